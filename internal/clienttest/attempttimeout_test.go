package clienttest_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sts"
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

// TestAttemptTimeoutLeavesPresigning: AttemptTimeout given to a whole
// config, as the README gives it (config.WithAPIOptions sets
// aws.Config.APIOptions), reaches the presign clients made from it too,
// whose stacks have no retry middleware: they sign a request, and send
// nothing. It returned an error there, and every presign failed: STS's
// PresignGetCallerIdentity, which EKS tokens are made of (an outside
// review, helper-133). Now it adds nothing there, and the service client
// made from the same config still has it.
func TestAttemptTimeoutLeavesPresigning(t *testing.T) {
	cfg := aws.Config{
		Region:      "us-east-1",
		Credentials: credentials.NewStaticCredentialsProvider("AKID", "SECRET", ""),
		Retryer:     func() aws.Retryer { return jitterretry.New() },
		APIOptions:  []func(*middleware.Stack) error{jitterretry.AttemptTimeout(300 * time.Millisecond)},
	}
	client := sts.NewFromConfig(cfg)
	req, err := sts.NewPresignClient(client).PresignGetCallerIdentity(context.Background(), &sts.GetCallerIdentityInput{})
	require.NoError(t, err)
	assert.True(t, strings.Contains(req.URL, "Action=GetCallerIdentity") && strings.Contains(req.URL, "X-Amz-Signature="), "expect a signed URL, got %s", req.URL)

	var stackIDs []string
	_, err = client.GetCallerIdentity(context.Background(), &sts.GetCallerIdentityInput{}, func(o *sts.Options) {
		o.APIOptions = append(o.APIOptions, func(stack *middleware.Stack) error {
			stackIDs = stack.Finalize.List()
			return errStopBeforeSending
		})
	})
	require.ErrorIs(t, err, errStopBeforeSending)
	assert.Contains(t, stackIDs, "jitterretry.AttemptTimeout", "expect the service client's stack to have it")
}

// errStopBeforeSending ends an operation from an API option, after the
// options before it built its stack, so that a test reads the stack
// without a server.
var errStopBeforeSending = errors.New("stopped before sending")
