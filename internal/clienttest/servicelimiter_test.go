package clienttest_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/jitterretry/jitterretry"
)

// TestServicesWithLimitersOfTheirOwnShareOneBudget: with the send-rate
// limiter and no PartitionKey, each SDK service's attempts wait at a
// limiter of their own, but every retry still spends the one bucket, as
// the SDK's retryer shared by a DynamoDB and an STS client does: a failed
// operation of each, three attempts on 500s, leaves 500 - 4 × 14 tokens
// in both.
func TestServicesWithLimitersOfTheirOwnShareOneBudget(t *testing.T) {
	ddb := newScriptServer(t, serverErr)
	stsSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/xml")
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = io.WriteString(w, `<ErrorResponse><Error><Type>Receiver</Type><Code>InternalFailure</Code><Message>x</Message></Error><RequestId>1</RequestId></ErrorResponse>`)
	}))
	t.Cleanup(stsSrv.Close)

	for _, tc := range standardAndOursWithSendRate(t) {
		t.Run(tc.name, func(t *testing.T) {
			stsClient := sts.New(sts.Options{
				Region:       "us-east-1",
				BaseEndpoint: aws.String(stsSrv.URL),
				Credentials:  credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", ""),
				Retryer:      tc.retryer,
			})
			var maxAttempts *retry.MaxAttemptsError
			require.ErrorAs(t, putItem(context.Background(), newClient(ddb.URL, tc.retryer)), &maxAttempts)
			assert.Equal(t, uint(500-2*14), tc.remaining(), "expect DynamoDB's two retries paid")
			_, err := stsClient.GetCallerIdentity(context.Background(), &sts.GetCallerIdentityInput{})
			require.ErrorAs(t, err, &maxAttempts)
			assert.Equal(t, uint(500-4*14), tc.remaining(), "expect STS's two retries paid from the same bucket")
		})
	}
}

// TestServiceLanesLeaveNoSkipsBehindTheOlderInterface: a successful retry
// leaves a skip for the attempt release that follows it, so that it adds
// no NoRetryIncrement; behind a decorator of the older aws.Retryer
// interface that release is GetInitialToken's, which takes the shared
// lane's skip. Left on a service's own lane, the skips piled up and ate
// the increments of the first attempts that followed on the same service
// (helper-219: 20 first-attempt successes added nothing, the SDK's 20).
func TestServiceLanesLeaveNoSkipsBehindTheOlderInterface(t *testing.T) {
	failing := newScriptServer(t, serverErr)
	recovering := newScriptServer(t, serverErr, ok)
	recovering.cycle = true
	healthy := newScriptServer(t, ok)

	for _, tc := range standardAndOursWithSendRate(t) {
		t.Run(tc.name, func(t *testing.T) {
			for range 10 { // two retries of 14 each, never refunded
				require.Error(t, putItem(context.Background(), newClient(failing.URL, tc.retryer)))
			}
			require.Equal(t, uint(500-10*2*14), tc.remaining())
			older := newClient(recovering.URL, olderDecorator{tc.retryer})
			for range 20 { // a 500, then a retry that succeeds: refunded, +1 on its release
				require.NoError(t, putItem(context.Background(), older))
			}
			require.Equal(t, uint(220+20), tc.remaining())
			direct := newClient(healthy.URL, tc.retryer)
			for range 20 {
				require.NoError(t, putItem(context.Background(), direct))
			}
			assert.Equal(t, uint(240+20), tc.remaining(), "expect each first-attempt success to add its increment")
		})
	}
}

// budgetSide is a retryer of a side-by-side test, and how to read its
// bucket.
type budgetSide struct {
	name      string
	retryer   aws.RetryerV2
	remaining func() uint
}

// standardAndOursWithSendRate returns retry.NewStandard() and New with the
// send-rate limiter, each with a bucket of 500 it can read.
func standardAndOursWithSendRate(t *testing.T) []budgetSide {
	t.Helper()
	sdkBucket := ratelimit.NewTokenRateLimit(500)
	ours := jitterretry.New(func(o *jitterretry.Options) { o.SendRate = &jitterretry.SendRateOptions{} })
	require.NoError(t, ours.Err())
	return []budgetSide{
		{"retry.NewStandard", retry.NewStandard(func(o *retry.StandardOptions) { o.RateLimiter = sdkBucket }), sdkBucket.Remaining},
		{"jitterretry with SendRate", ours, ours.Remaining},
	}
}
