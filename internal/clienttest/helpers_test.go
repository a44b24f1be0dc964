package clienttest_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/jitterretry/jitterretry/internal/ddbwire"
)

// reply is one scripted answer of the fake DynamoDB server.
type reply struct {
	code       string // DynamoDB error code; "" for success
	status     int    // HTTP status; 0 means ddbwire.StatusFor(code) or 200
	retryAfter string // x-amz-retry-after header value
	date       string // Date header value, for a clock skew
	drop       bool   // close the connection without answering
	unmodeled  bool   // 429 with no error type, as a proxy would send
	// cancelled: a TransactionCanceledException with these reasons,
	// comma-separated, one for each item of the transaction
	cancelled string
	delay     time.Duration // answer after this long, as a far region does
}

var (
	ok        = reply{}
	throttle  = reply{code: ddbwire.ProvisionedThroughputExceeded}
	throttle2 = reply{code: ddbwire.Throttling}
	serverErr = reply{code: ddbwire.InternalServerError}
	tooMany   = reply{status: http.StatusTooManyRequests, unmodeled: true}
	ccf       = reply{code: ddbwire.ConditionalCheckFailed}
	dropped   = reply{drop: true}
)

// scriptServer answers requests with its script in order, then with the last
// reply for ever (or, with cycle, round and round), and counts the requests.
type scriptServer struct {
	*httptest.Server
	mu     sync.Mutex
	script []reply
	cycle  bool
	calls  int
	// what the SDK's token accounting depends on, read from the
	// amz-sdk-request header the retry middleware sends
	firstAttemptOK, retryFailed int
}

func newScriptServer(t *testing.T, script ...reply) *scriptServer {
	t.Helper()
	s := &scriptServer{script: script}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

func (s *scriptServer) Calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

func (s *scriptServer) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	i := min(s.calls, len(s.script)-1)
	if s.cycle {
		i = s.calls % len(s.script)
	}
	s.calls++
	rep := s.script[i]
	attempt, _, _ := strings.Cut(r.Header.Get("Amz-Sdk-Request"), ";")
	first := attempt == "attempt=1"
	switch {
	case first && rep == ok:
		s.firstAttemptOK++
	case !first && rep != ok:
		s.retryFailed++
	}
	s.mu.Unlock()

	time.Sleep(rep.delay)
	switch {
	case rep.drop:
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			_ = conn.Close()
		}
	case rep.unmodeled:
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(rep.status)
		_, _ = w.Write([]byte("slow down"))
	case rep.cancelled != "":
		ddbwire.WriteTransactionCanceled(w, strings.Split(rep.cancelled, ",")...)
	case rep.code == "":
		ddbwire.WriteJSON(w, http.StatusOK, []byte("{}"))
	default:
		status := rep.status
		if status == 0 {
			status = ddbwire.StatusFor(rep.code)
		}
		if rep.retryAfter != "" {
			w.Header().Set("X-Amz-Retry-After", rep.retryAfter)
		}
		if rep.date != "" {
			w.Header().Set("Date", rep.date)
		}
		ddbwire.WriteError(w, status, rep.code, "scripted "+strings.ToLower(rep.code))
	}
}

// newClient returns a real DynamoDB client that talks to url with retryer.
func newClient(url string, retryer aws.Retryer) *dynamodb.Client {
	return newClientIn("us-east-1", url, retryer)
}

// newClientIn is newClient for a client of region.
func newClientIn(region, url string, retryer aws.Retryer) *dynamodb.Client {
	return dynamodb.New(dynamodb.Options{
		Region:       region,
		BaseEndpoint: aws.String(url),
		Credentials:  credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", ""),
		Retryer:      retryer,
	})
}

func putItem(ctx context.Context, c *dynamodb.Client, optFns ...func(*dynamodb.Options)) error {
	_, err := c.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String("orders"),
		Item:      map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "a"}},
	}, optFns...)
	return err
}

// transactWrite calls TransactWriteItems with one put for each of items.
func transactWrite(ctx context.Context, c *dynamodb.Client, items int) error {
	puts := make([]types.TransactWriteItem, items)
	for i := range puts {
		puts[i] = types.TransactWriteItem{Put: &types.Put{
			TableName: aws.String("orders"),
			Item:      map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: strconv.Itoa(i)}},
		}}
	}
	_, err := c.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: puts})
	return err
}

func requireNoErr(t *testing.T, err error) {
	t.Helper()
	require.NoError(t, err)
}

// testClock is a retryer's Options.Clock that the test moves. It starts an
// hour ahead of the wall clock, so that a context whose deadline is set on
// it has its own timer an hour away: only the retryer's checks, which read
// this clock, see that deadline, and a busy machine's late wake-ups cannot
// end the context first. It stands still, moving only when advanced, until
// run, from when it moves with the wall clock from where it stood.
type testClock struct {
	mu      sync.Mutex
	at      time.Time     // the reading while it stands still
	running bool          // it moves with the wall clock...
	offset  time.Duration // ...this far ahead of it
}

func newTestClock() *testClock { return &testClock{at: time.Now().Add(time.Hour)} }

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.running {
		return time.Now().Add(c.offset)
	}
	return c.at
}

// Advance moves the clock d forward.
func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.at = c.at.Add(d)
	c.offset += d
}

// Run sets the clock moving with the wall clock from its current reading.
func (c *testClock) Run() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.running, c.offset = true, time.Until(c.at)
}
