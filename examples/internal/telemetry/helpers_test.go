package telemetry_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sts"

	"github.com/jitterretry/jitterretry/internal/ddbwire"
)

// reply is one scripted answer of the fake DynamoDB server: an error code,
// or "" for success.
type reply struct {
	code       string
	retryAfter string // x-amz-retry-after, in milliseconds
}

var (
	ok         = reply{}
	throttle   = reply{code: ddbwire.ProvisionedThroughputExceeded}
	serverErr  = reply{code: ddbwire.InternalServerError}
	conditions = reply{code: ddbwire.ConditionalCheckFailed}
)

// scriptServer answers in DynamoDB's wire format with the replies queued by
// script, in order, then with success; it counts attempts and errors by
// operation, as the SDK's client.call.* metrics should.
type scriptServer struct {
	*httptest.Server
	mu       sync.Mutex
	queue    []reply
	attempts map[string]int    // by operation
	errors   map[[2]string]int // by operation and error code
}

func newScriptServer(t *testing.T) *scriptServer {
	t.Helper()
	s := &scriptServer{attempts: map[string]int{}, errors: map[[2]string]int{}}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

func (s *scriptServer) script(replies ...reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queue = append(s.queue, replies...)
}

// pending returns how many scripted replies are left.
func (s *scriptServer) pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.queue)
}

func (s *scriptServer) serve(w http.ResponseWriter, r *http.Request) {
	target := r.Header.Get("X-Amz-Target")
	op := target[strings.LastIndexByte(target, '.')+1:]
	s.mu.Lock()
	rep := ok
	if len(s.queue) > 0 {
		rep, s.queue = s.queue[0], s.queue[1:]
	}
	s.attempts[op]++
	if rep.code != "" {
		s.errors[[2]string{op, rep.code}]++
	}
	s.mu.Unlock()
	if rep.code == "" {
		ddbwire.WriteJSON(w, http.StatusOK, []byte("{}"))
		return
	}
	if rep.retryAfter != "" {
		w.Header().Set("X-Amz-Retry-After", rep.retryAfter)
	}
	ddbwire.WriteError(w, ddbwire.StatusFor(rep.code), rep.code, "scripted")
}

// newClient returns a real DynamoDB client of url, with optFns applied.
func newClient(url string, optFns ...func(*dynamodb.Options)) *dynamodb.Client {
	return dynamodb.New(dynamodb.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(url),
		Credentials:  credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", ""),
	}, optFns...)
}

var key = map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "a"}}

func putItem(ctx context.Context, c *dynamodb.Client) error {
	_, err := c.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("t"), Item: key})
	return err
}

func getItem(ctx context.Context, c *dynamodb.Client) error {
	_, err := c.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("t"), Key: key})
	return err
}

func updateItem(ctx context.Context, c *dynamodb.Client) error {
	_, err := c.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String("t"), Key: key})
	return err
}

func deleteItem(ctx context.Context, c *dynamodb.Client) error {
	_, err := c.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String("t"), Key: key})
	return err
}

// callerIdentityServer answers every request with STS's GetCallerIdentity
// response.
func callerIdentityServer(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/xml")
		_, _ = io.WriteString(w, `<GetCallerIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><GetCallerIdentityResult>`+
			`<Arn>arn:aws:iam::123456789012:user/u</Arn><UserId>U</UserId><Account>123456789012</Account>`+
			`</GetCallerIdentityResult><ResponseMetadata><RequestId>1</RequestId></ResponseMetadata></GetCallerIdentityResponse>`)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// newSTSClient returns a real STS client that talks to url with retryer.
func newSTSClient(url string, retryer aws.Retryer) *sts.Client {
	return sts.New(sts.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(url),
		Credentials:  credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", ""),
		Retryer:      retryer,
	})
}
