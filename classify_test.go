package jitterretry

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestContextEndedReadsRefusals: a refusal in the chain says whether the
// context ended: a deadline refusal is made before it (no), a cancellation
// refusal carries its context's error.
func TestContextEndedReadsRefusals(t *testing.T) {
	cause := errors.New("503")
	cases := map[string]struct {
		err  error
		want error
	}{
		"a deadline refusal":      {&GiveUpError{Reason: GiveUpDeadline, Err: cause}, nil},
		"a deadline cancellation": {&GiveUpError{Reason: GiveUpCanceled, Err: cause, ctxErr: context.DeadlineExceeded}, context.DeadlineExceeded},
		"a cancel":                {&GiveUpError{Reason: GiveUpCanceled, Err: cause, ctxErr: context.Canceled}, context.Canceled},
		"context.Canceled":        {context.Canceled, context.Canceled},
		"none":                    {cause, nil},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, tc.want, defaultClassifier.inspect(tc.err).ended)
		})
	}
}

// typedNilAs is an error whose As dereferences its receiver.
type typedNilAs struct{ err error }

func (e *typedNilAs) Error() string      { return e.err.Error() }
func (e *typedNilAs) As(target any) bool { return e.err != nil }

// TestCutAtDeadlineCallsNoMethodOfANil: the attempt's release looks for a
// cut in the attempt's error without calling a nil node's methods.
func TestCutAtDeadlineCallsNoMethodOfANil(t *testing.T) {
	assert.NotPanics(t, func() { assert.False(t, wasCut((*typedNilAs)(nil))) })
	assert.True(t, wasCut(&attemptTimeoutError{byDeadline: true}))
	assert.True(t, wasCut(&attemptTimeoutError{}))
	assert.False(t, wasCut(context.DeadlineExceeded))
}
