package fault_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/credentials/stscreds"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/aws/smithy-go/middleware"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/jitterretry/jitterretry"
	"github.com/jitterretry/jitterretry/internal/ddbwire"
)

// slowCredentials is a credentials provider that takes delay to answer, as
// a cold client's AssumeRole, SSO or IMDS fetch can. The SDK's
// CredentialsCache runs it under a context whose cancellation is
// suppressed, so one fetch goes on whatever the attempt that started it
// does; done is closed when it returns.
type slowCredentials struct {
	delay time.Duration
	calls atomic.Int32
	done  chan struct{}
}

func (p *slowCredentials) Retrieve(ctx context.Context) (aws.Credentials, error) {
	if p.calls.Add(1) == 1 {
		defer close(p.done)
	}
	select {
	case <-time.After(p.delay):
	case <-ctx.Done():
		return aws.Credentials{}, ctx.Err()
	}
	return aws.Credentials{AccessKeyID: "AKID", SecretAccessKey: "SECRET", Source: "slow",
		CanExpire: true, Expires: time.Now().Add(time.Hour)}, nil
}

// TestAttemptTimeoutDoesNotCutTheCredentialFetch: a cold client whose
// credentials take 4 s (a slow AssumeRole, say) under AttemptTimeout(500ms)
// succeeds with one request and a whole bucket (500 ms, not the review's
// 200, so that a loopback call under -race on a busy machine is not cut). When the timeout sat right
// after the SDK's Retry middleware, before GetIdentity, ResolveEndpointV2
// and Signing, it bounded the credential fetch too: the call failed with
// "exceeded maximum number of attempts, 4, jitterretry: attempt cut after
// 200ms, at the attempt timeout: get identity: get credentials: request
// canceled" without reaching the server, and spent 3 x 14 retry tokens on
// retries that could not help, since the cache's fetch goes on in the
// background under a suppressed context whatever the attempts do (an
// outside review). The four cut attempts and their backoffs end after
// about 2.1 s, well before the 4 s fetch.
func TestAttemptTimeoutDoesNotCutTheCredentialFetch(t *testing.T) {
	noLeaks(t)
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		ddbwire.WriteJSON(w, http.StatusOK, []byte(`{}`))
	}))
	t.Cleanup(srv.Close)
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	creds := &slowCredentials{delay: 4 * time.Second, done: make(chan struct{})}
	t.Cleanup(func() {
		if creds.calls.Load() > 0 {
			<-creds.done // the cache's background fetch, before the leak check
		}
	})

	r := jitterretry.New(jitterretry.DynamoDB)
	require.NoError(t, r.Err())
	client := dynamodb.New(dynamodb.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(srv.URL),
		Credentials:  aws.NewCredentialsCache(creds),
		Retryer:      r,
		HTTPClient:   &http.Client{Transport: tr},
		APIOptions:   []func(*middleware.Stack) error{jitterretry.AttemptTimeout(500 * time.Millisecond)},
	})

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String("t"),
		Key:       map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "a"}},
	})
	require.NoError(t, err, "expect a slow credential fetch, which no retry can speed up, not to be cut by the per-attempt timeout")
	assert.Equal(t, int32(1), requests.Load(), "expect one request: the server answers at once")
	assert.Equal(t, uint(500), r.Remaining(), "expect no retry tokens spent on attempts that sent nothing")
	assert.Equal(t, int32(1), creds.calls.Load(), "expect one credential fetch")
}

// assumeRoleAnswer is STS's answer to AssumeRole, in its XML wire format.
const assumeRoleAnswer = `<AssumeRoleResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
<AssumeRoleResult>
<Credentials><AccessKeyId>AKIDROLE</AccessKeyId><SecretAccessKey>SECRET</SecretAccessKey><SessionToken>TOKEN</SessionToken><Expiration>2099-01-01T00:00:00Z</Expiration></Credentials>
<AssumedRoleUser><Arn>arn:aws:sts::123456789012:assumed-role/role/session</Arn><AssumedRoleId>AROA:session</AssumedRoleId></AssumedRoleUser>
</AssumeRoleResult>
<ResponseMetadata><RequestId>req</RequestId></ResponseMetadata>
</AssumeRoleResponse>`

// TestAttemptTimeoutOnTheClientLeavesAnAssumeRoleAlone: a role assumed the
// usual way, through an STS client made from the same config, whose
// AssumeRole takes 1.2 s, under AttemptTimeout(500ms). Given with
// config.WithAPIOptions, as the README showed, the option reached the STS
// client too and cut every attempt of the fetch: no DynamoDB request was
// sent (an outside review: 16 STS attempts, 210 retry tokens, with the
// retryer shared; here two attempts each, so that it ends sooner). Given on the DynamoDB client, as the README shows now,
// the fetch takes its time and the call succeeds with one request each.
func TestAttemptTimeoutOnTheClientLeavesAnAssumeRoleAlone(t *testing.T) {
	t.Setenv("AWS_CONFIG_FILE", "/nonexistent")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	const attemptTimeout, assumeRoleTakes = 500 * time.Millisecond, 1200 * time.Millisecond
	run := func(t *testing.T, onConfig bool) (stsCalls, ddbRequests int32, err error) {
		var stsN, ddb atomic.Int32
		stsSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			stsN.Add(1)
			_, _ = io.Copy(io.Discard, r.Body)
			select {
			case <-time.After(assumeRoleTakes):
			case <-r.Context().Done():
				return
			}
			w.Header().Set("Content-Type", "text/xml")
			_, _ = io.WriteString(w, assumeRoleAnswer)
		}))
		t.Cleanup(stsSrv.Close)
		ddbSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ddb.Add(1)
			_, _ = io.Copy(io.Discard, r.Body)
			ddbwire.WriteJSON(w, http.StatusOK, []byte(`{}`))
		}))
		t.Cleanup(ddbSrv.Close)

		r := jitterretry.New(jitterretry.DynamoDB, func(o *jitterretry.Options) { o.MaxAttempts = 2 }) // the pitfall's cuts end sooner
		require.NoError(t, r.Err())
		opts := []func(*config.LoadOptions) error{
			config.WithRegion("us-east-1"),
			config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("AKIDBASE", "SECRET", "")),
			config.WithRetryer(func() aws.Retryer { return r }),
		}
		if onConfig {
			opts = append(opts, config.WithAPIOptions([]func(*middleware.Stack) error{jitterretry.AttemptTimeout(attemptTimeout)}))
		}
		cfg, err := config.LoadDefaultConfig(context.Background(), opts...)
		require.NoError(t, err)
		stsClient := sts.NewFromConfig(cfg, func(o *sts.Options) { o.BaseEndpoint = aws.String(stsSrv.URL) })
		cfg.Credentials = aws.NewCredentialsCache(stscreds.NewAssumeRoleProvider(stsClient, "arn:aws:iam::123456789012:role/role"))
		client := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) {
			o.BaseEndpoint = aws.String(ddbSrv.URL)
			if !onConfig {
				o.APIOptions = append(o.APIOptions, jitterretry.AttemptTimeout(attemptTimeout))
			}
		})
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err = client.GetItem(ctx, &dynamodb.GetItemInput{
			TableName: aws.String("t"),
			Key:       map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "a"}},
		})
		return stsN.Load(), ddb.Load(), err
	}
	t.Run("on the client", func(t *testing.T) {
		stsCalls, ddbRequests, err := run(t, false)
		require.NoError(t, err)
		assert.Equal(t, int32(1), stsCalls, "expect one AssumeRole")
		assert.Equal(t, int32(1), ddbRequests)
	})
	t.Run("on the config, the pitfall", func(t *testing.T) {
		stsCalls, ddbRequests, err := run(t, true)
		require.ErrorIs(t, err, jitterretry.ErrAttemptTimeout, "expect the fetch's attempts cut")
		assert.Greater(t, stsCalls, int32(1), "expect AssumeRole cut and retried")
		assert.Zero(t, ddbRequests)
	})
}
