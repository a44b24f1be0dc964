package clienttest_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/jitterretry/jitterretry"
)

// holdAnswerUntilCut is a Deserialize-step middleware that, once the
// service's answer is in hand as an error, waits for the attempt's context
// to end before returning it: the answer that arrives as AttemptTimeout's
// timer fires, made certain.
func holdAnswerUntilCut(stack *middleware.Stack) error {
	return stack.Deserialize.Add(middleware.DeserializeMiddlewareFunc("holdAnswerUntilCut",
		func(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (middleware.DeserializeOutput, middleware.Metadata, error) {
			out, md, err := next.HandleDeserialize(ctx, in)
			if err != nil {
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
// from errors.As and retried.
func TestAttemptTimeoutKeepsAnAnswerThatCameAsItFired(t *testing.T) {
	for _, tc := range []struct {
		name   string
		answer reply
		calls  int
	}{
		{"a conflict", ccf, 1},
		{"a validation error", reply{code: "ValidationException"}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newScriptServer(t, tc.answer)
			client := newClient(srv.URL, jitterretry.New(fast))
			err := putItem(context.Background(), client, dynamodb.WithAPIOptions(jitterretry.AttemptTimeout(20*time.Millisecond), holdAnswerUntilCut))
			require.Error(t, err)
			assert.NotErrorIs(t, err, jitterretry.ErrAttemptTimeout, "expect the service's answer, not a timeout")
			assert.Equal(t, tc.calls, srv.Calls(), "expect no retry of the answer")
			if tc.answer == ccf {
				var c *types.ConditionalCheckFailedException
				assert.ErrorAs(t, err, &c)
			}
		})
	}
}
