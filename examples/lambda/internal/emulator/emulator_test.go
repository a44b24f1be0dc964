//go:build linux

package emulator

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestStartFailsWhenTheRuntimeAPIPortIsTaken: a port picked free can be
// taken before the emulator binds it. When that is the runtime API's, the
// emulator panics in a goroutine after its invoke address is up, and every
// invocation of that environment then found the connection refused (16 of
// 200 in a CI run). start must see it, so that Start picks other ports.
func TestStartFailsWhenTheRuntimeAPIPortIsTaken(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	bins, err := Build(ctx, t.TempDir(), false)
	require.NoError(t, err)
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer taken.Close()
	free, err := freePorts(1)
	require.NoError(t, err)

	e, err := start(ctx, Config{Binaries: bins, Timeout: 2}, []int{free[0], taken.Addr().(*net.TCPAddr).Port})
	if e != nil {
		_ = e.Close()
	}
	require.Error(t, err, "expect the emulator's failure to bind its runtime API seen at start")

	e, err = Start(ctx, Config{Binaries: bins, Timeout: 2})
	require.NoError(t, err)
	require.NoError(t, e.Close())
}
