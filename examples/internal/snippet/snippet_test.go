package snippet

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/jitterretry/jitterretry"
	"github.com/jitterretry/jitterretry/examples/internal/ddbtest"
	"github.com/jitterretry/jitterretry/internal/capacity"
	"github.com/jitterretry/jitterretry/internal/ddbwire"
)

// The README's markers around the snippet, and the file's.
const (
	readmePath  = "../../../README.md"
	readmeBegin = "<!-- snippet: examples/internal/snippet/snippet.go -->"
	readmeEnd   = "<!-- end of snippet -->"
	sourceBegin = "// README: begin\n"
	sourceEnd   = "// README: end\n"
)

// TestREADMEShowsTheQuickStartVerbatim: the Quick start is a whole program,
// examples/quickstart, so that it compiles as a newcomer pastes it (an
// outside review pasted the earlier fragment and got "declared and not
// used: client"). The README's first go block after the heading is the
// file from its package clause on.
func TestREADMEShowsTheQuickStartVerbatim(t *testing.T) {
	src, err := os.ReadFile("../../quickstart/main.go")
	require.NoError(t, err)
	_, code, ok := strings.Cut(string(src), "\npackage main\n")
	require.True(t, ok, "expect quickstart/main.go to have a package clause")
	readme, err := os.ReadFile(readmePath)
	require.NoError(t, err)
	section := between(t, string(readme), "## Quick start\n", "\n## ", readmePath)
	_, block, ok := strings.Cut(section, "```go\n")
	require.True(t, ok, "expect a go block in the Quick start")
	block, _, _ = strings.Cut(block, "\n```")
	assert.Equal(t, "package main\n\n"+strings.TrimSpace(code), block,
		"expect the Quick start's first go block to be examples/quickstart/main.go from its package clause on")
}

func TestREADMEShowsTheSnippetVerbatim(t *testing.T) {
	src, err := os.ReadFile("snippet.go")
	require.NoError(t, err)
	code := between(t, string(src), sourceBegin, sourceEnd, "snippet.go")

	readme, err := os.ReadFile(readmePath)
	require.NoError(t, err)
	section := between(t, string(readme), readmeBegin, readmeEnd, readmePath)
	assert.Contains(t, section, "```go\n"+strings.TrimSpace(code)+"\n```",
		"expect the README's section between %q and %q to show snippet.go's code between its markers verbatim, in one go block", readmeBegin, readmeEnd)
}

// between returns the text of s between the markers begin and end.
func between(t *testing.T, s, begin, end, name string) string {
	t.Helper()
	_, after, ok := strings.Cut(s, begin)
	require.True(t, ok, "expect %s to have the marker %q", name, begin)
	inside, _, ok := strings.Cut(after, end)
	require.True(t, ok, "expect %s to have the marker %q after %q", name, end, begin)
	return inside
}

// The README's setting: 32 writers make 5 increments each on one item,
// through the client's own retryer, while 2% of the responses are lost
// after the server applied the request.
const writers, increments = 32, 5

func TestIncrementUnderContentionAndLostResponsesMinidyn(t *testing.T) {
	scenarioContention(t, ddbtest.Minidyn(t))
}

func TestIncrementUnderContentionAndLostResponsesDynalite(t *testing.T) {
	// dynalite ignores ALL_OLD: every conflict is followed by a read.
	scenarioContention(t, ddbtest.Dynalite(t))
}

func scenarioContention(t *testing.T, b *ddbtest.Backend) {
	table := ddbtest.TableName("snippet")
	b.CreateTable(t, table, "pk")
	proxy := ddbtest.Capacity(t, b.URL, func(o *capacity.Options) {
		o.LostResponseRate = 0.02 // capacity stays unlimited: no throttles
		// The proxy draws each data-plane request's fate in the order the
		// requests come: with this seed the 48th and the 74th responses are
		// lost whatever the interleaving, and the writes alone are 160.
		o.Seed = 1
	})
	retryer := jitterretry.New(jitterretry.DynamoDB) // as the README's Quick start
	client := b.NewClient(t, proxy.URL, func(o *ddbtest.ClientOptions) { o.Retryer = retryer })

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	errs := make(chan error, writers*increments)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for seq := int64(1); seq <= increments; seq++ {
				if err := Increment(ctx, client.Client, retryer, table, "hot", writerName(w), seq); err != nil {
					errs <- fmt.Errorf("writer %d, increment %d: %w", w, seq, err)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		assert.NoError(t, err, "expect every increment acknowledged")
	}

	item := read(t, b, table)
	assert.Equal(t, int64(writers*increments), number(item, "n"), "expect every increment applied exactly once")
	assert.Equal(t, int64(writers*increments), number(item, "v"))
	for w := range writers {
		assert.Equal(t, int64(increments), number(item, "seq_"+writerName(w)), "writer %d's last increment", w)
	}
	st := proxy.Stats()
	require.Positive(t, st.LostResponses, "expect responses lost after their write landed")
	t.Logf("%s: %d requests, %d responses lost", b.Name, st.Requests, st.LostResponses)
}

func writerName(w int) string { return fmt.Sprintf("w%02d", w) }

func read(t *testing.T, b *ddbtest.Backend, table string) map[string]types.AttributeValue {
	t.Helper()
	out, err := b.Admin(t).GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName:      aws.String(table),
		Key:            map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "hot"}},
		ConsistentRead: aws.Bool(true),
	})
	require.NoError(t, err)
	return out.Item
}

// TestIncrementRefusesSeqZero: a writer's seq is compared with the one the
// item keeps, 0 when it has none, so a first increment numbered 0 was taken
// for one that had landed and silently skipped (an outside review).
func TestIncrementRefusesSeqZero(t *testing.T) {
	b := ddbtest.Minidyn(t)
	table := ddbtest.TableName("snippet")
	b.CreateTable(t, table, "pk")
	retryer := jitterretry.New(jitterretry.DynamoDB)
	client := b.NewClient(t, b.URL, func(o *ddbtest.ClientOptions) { o.Retryer = retryer })
	assert.Error(t, Increment(context.Background(), client.Client, retryer, table, "hot", "w", 0), "expect seq 0 refused, not skipped")
	require.NoError(t, Increment(context.Background(), client.Client, retryer, table, "hot", "w", 1))
	assert.Equal(t, int64(1), number(read(t, b, table), "n"))
}

// TestIncrementRecognisesItsLostWrite loses the response of the first write
// only, so the SDK retries a write that landed: its condition fails, and
// the item it returns carries the writer's seq.
func TestIncrementRecognisesItsLostWrite(t *testing.T) {
	b := ddbtest.Minidyn(t)
	table := ddbtest.TableName("snippet")
	b.CreateTable(t, table, "pk")
	var lost, writes atomic.Int64
	endpoint := loseFirstWrite(t, b.URL, &lost, &writes)
	retryer := jitterretry.New(jitterretry.DynamoDB)
	client := b.NewClient(t, endpoint, func(o *ddbtest.ClientOptions) { o.Retryer = retryer })

	for seq := int64(1); seq <= 3; seq++ {
		require.NoError(t, Increment(context.Background(), client.Client, retryer, table, "hot", "solo", seq))
	}
	item := read(t, b, table)
	assert.Equal(t, int64(1), lost.Load(), "expect the first write's response lost")
	assert.Equal(t, int64(4), writes.Load(), "expect one retry of the lost write and no other")
	assert.Equal(t, int64(3), number(item, "n"), "expect 3 increments applied once each")
	assert.Equal(t, int64(3), number(item, "seq_solo"))
}

// loseFirstWrite is a loopback proxy to upstream that answers the first
// UpdateItem that the server applied with HTTP 500, counting what it lost
// and the writes it forwarded.
func loseFirstWrite(t *testing.T, upstream string, lost, writes *atomic.Int64) string {
	t.Helper()
	u, err := url.Parse(upstream)
	require.NoError(t, err)
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.ModifyResponse = func(resp *http.Response) error {
		if !strings.HasSuffix(resp.Request.Header.Get("X-Amz-Target"), ".UpdateItem") {
			return nil
		}
		if writes.Add(1) == 1 && resp.StatusCode == http.StatusOK {
			lost.Add(1)
			return errLost
		}
		return nil
	}
	rp.ErrorHandler = func(w http.ResponseWriter, _ *http.Request, err error) {
		ddbwire.WriteError(w, http.StatusInternalServerError, ddbwire.InternalServerError, err.Error())
	}
	srv := httptest.NewServer(rp)
	t.Cleanup(srv.Close)
	return srv.URL
}

var errLost = fmt.Errorf("response lost by the test's proxy")
