package capacity

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// answerOK is an upstream transport that answers every request at once
// with "{}", so that a test can send many requests through ServeHTTP
// without a network.
type answerOK struct{}

func (answerOK) RoundTrip(r *http.Request) (*http.Response, error) {
	return &http.Response{
		StatusCode: http.StatusOK,
		Header:     http.Header{"Content-Type": {"application/x-amz-json-1.0"}},
		Body:       io.NopCloser(strings.NewReader("{}")),
		Request:    r,
	}, nil
}

// newOffline returns a proxy whose upstream is answerOK, on a frozen clock.
func newOffline(t *testing.T, optFns ...func(*Options)) *Proxy {
	t.Helper()
	clk := newClock()
	p, err := New("http://upstream.invalid", append([]func(*Options){func(o *Options) {
		o.Transport = answerOK{}
		o.Now = clk.Now
	}}, optFns...)...)
	require.NoError(t, err)
	return p
}

// putItems sends n PutItem requests to p's handler and returns which were
// throttled.
func putItems(p *Proxy, n int) []bool {
	out := make([]bool, n)
	for i := range out {
		req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(`{"TableName":"hot"}`))
		req.Header.Set("X-Amz-Target", "DynamoDB_20120810.PutItem")
		rec := httptest.NewRecorder()
		p.ServeHTTP(rec, req)
		out[i] = rec.Code == http.StatusBadRequest
	}
	return out
}

func count(xs []bool) (n int) {
	for _, x := range xs {
		if x {
			n++
		}
	}
	return n
}

func TestThrottleRateThrottlesThatShareWhateverTheCapacity(t *testing.T) {
	const n = 10000
	for _, rate := range []float64{0, 0.2, 0.5, 1} {
		t.Run(fmt.Sprint("rate ", rate), func(t *testing.T) {
			p := newOffline(t, func(o *Options) {
				o.ThrottleRate = rate
				o.Seed = 42
			})
			got := count(putItems(p, n))
			st := p.Stats()
			assert.Equal(t, int64(got), st.Throttled)
			assert.Equal(t, int64(got), st.RandomThrottled, "expect every throttle random at unlimited capacity")
			assert.Equal(t, int64(n-got), st.Forwarded)
			switch rate {
			case 0:
				assert.Zero(t, got, "expect no throttle at rate 0")
			case 1:
				assert.Equal(t, n, got, "expect every request throttled at rate 1")
			default:
				// Four standard deviations of the binomial: at most 2% of n.
				tol := 4 * math.Sqrt(n*rate*(1-rate))
				assert.InDelta(t, rate*n, float64(got), tol, "rate %v: expect about %v throttles, got %d", rate, rate*n, got)
			}
		})
	}
}

func TestThrottleRateIsSeeded(t *testing.T) {
	draws := func(seed uint64) []bool {
		return putItems(newOffline(t, func(o *Options) { o.ThrottleRate, o.Seed = 0.5, seed }), 200)
	}
	first := draws(7)
	assert.Equal(t, first, draws(7), "expect the same seed to throttle the same requests")
	assert.NotEqual(t, first, draws(8))
}

func TestRandomThrottlesTakeNoCapacity(t *testing.T) {
	// A bucket of 10 on a frozen clock admits exactly 10, however many
	// requests the random throttles turned away before.
	p := newOffline(t, func(o *Options) {
		o.Default = Capacity{Read: 10, Write: 10}
		o.ThrottleRate = 0.5
	})
	throttled := count(putItems(p, 60))
	st := p.Stats()
	assert.Positive(t, st.RandomThrottled)
	assert.Equal(t, int64(10), st.Forwarded)
	assert.Equal(t, int64(50), int64(throttled))
	assert.Equal(t, int64(50), st.Throttled)
}

func TestSetThrottleRate(t *testing.T) {
	p := newOffline(t)
	assert.Zero(t, count(putItems(p, 100)))
	require.NoError(t, p.SetThrottleRate(1))
	assert.Equal(t, 100, count(putItems(p, 100)))
	require.NoError(t, p.SetThrottleRate(0))
	assert.Zero(t, count(putItems(p, 100)))
	for _, bad := range []float64{-0.1, 1.1, math.NaN(), math.Inf(1)} {
		assert.Error(t, p.SetThrottleRate(bad), "expect %v rejected", bad)
	}
	_, err := New("http://127.0.0.1:1", func(o *Options) { o.ThrottleRate = 1.5 })
	assert.Error(t, err)
}

func TestRandomThrottleReachesTheSDKAsProvisionedThroughputExceeded(t *testing.T) {
	_, up, client := setup(t, aws.NopRetryer{}, func(o *Options) { o.ThrottleRate = 1 })
	err := updateItem(context.Background(), client, "hot")
	assert.True(t, isThrottle(err), "expect ProvisionedThroughputExceededException, got %v", err)
	assert.Zero(t, up.count("UpdateItem"))
}

func TestResetStats(t *testing.T) {
	clk := newClock()
	p, err := New("http://upstream.invalid", func(o *Options) {
		o.Transport = answerOK{}
		o.Now = clk.Now
		o.ThrottleRate = 1
	})
	require.NoError(t, err)
	putItems(p, 3)
	clk.Advance(2500 * time.Millisecond)
	p.ResetStats()
	assert.Equal(t, Stats{}, p.Stats())
	putItems(p, 2)
	clk.Advance(time.Second)
	putItems(p, 1)
	st := p.Stats()
	assert.Equal(t, int64(3), st.Requests)
	assert.Equal(t, int64(3), st.RandomThrottled)
	assert.Equal(t, []Second{{Requests: 2, Throttled: 2}, {Requests: 1, Throttled: 1}}, st.PerSecond,
		"expect the per-second counts to start at the reset")
}
