package listflag

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSplit(t *testing.T) {
	assert.Equal(t, []string{"a", "b"}, Split(" a, ,b ,"))
	assert.Nil(t, Split(" , "))
}

func TestPositiveInts(t *testing.T) {
	got, err := PositiveInts("k", "4, 64,1000")
	require.NoError(t, err)
	assert.Equal(t, []int{4, 64, 1000}, got)
	for _, bad := range []string{"", "0", "-1", "x", "1,,y"} {
		_, err := PositiveInts("k", bad)
		assert.ErrorContains(t, err, "-k", "expect an error naming the flag for %q", bad)
	}
}
