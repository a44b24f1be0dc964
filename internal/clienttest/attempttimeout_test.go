package clienttest_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/jitterretry/jitterretry"
)

// answerHolder is a Deserialize-step middleware that, once the service's
// answer is in hand as an error before the attempt's context ended, waits
// for it to end before returning the answer: the answer that arrives as
// AttemptTimeout's timer fires, made certain. It counts those attempts.
type answerHolder struct{ held atomic.Int32 }

func (h *answerHolder) add(stack *middleware.Stack) error {
	return stack.Deserialize.Add(middleware.DeserializeMiddlewareFunc("holdAnswerUntilCut",
		func(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (middleware.DeserializeOutput, middleware.Metadata, error) {
			out, md, err := next.HandleDeserialize(ctx, in)
			if err != nil && ctx.Err() == nil {
				h.held.Add(1)
				<-ctx.Done()
			}
			return out, md, err
		}), middleware.Before)
}

// TestAttemptTimeoutKeepsAnAnswerThatCameAsItFired: a service answer the
// attempt holds when AttemptTimeout cuts it is the attempt's outcome, not a
// timeout: a ConditionalCheckFailedException stays one (errors.As finds
// it, nothing retries it); only an attempt the cut interrupted is a
// retryable timeout. Before, the answer was wrapped as a timeout, hidden
// from errors.As and retried. (On a machine too busy to get the answer
// within the timeout, the cut attempt is retried, as it should be: the
// attempt that held its answer is the last either way.)
func TestAttemptTimeoutKeepsAnAnswerThatCameAsItFired(t *testing.T) {
	for _, tc := range []struct {
		name   string
		answer reply
	}{
		{"a conflict", ccf},
		{"a validation error", reply{code: "ValidationException"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newScriptServer(t, tc.answer)
			client := newClient(srv.URL, jitterretry.New(fast))
			var holder answerHolder
			err := putItem(context.Background(), client, dynamodb.WithAPIOptions(jitterretry.AttemptTimeout(100*time.Millisecond), holder.add))
			require.Error(t, err)
			assert.NotErrorIs(t, err, jitterretry.ErrAttemptTimeout, "expect the service's answer, not a timeout")
			assert.Equal(t, int32(1), holder.held.Load(), "expect the operation to end with the first attempt that held its answer (%d calls)", srv.Calls())
			if tc.answer == ccf {
				var c *types.ConditionalCheckFailedException
				assert.ErrorAs(t, err, &c)
			}
		})
	}
}
