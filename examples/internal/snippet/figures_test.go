package snippet

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	smithymiddle "github.com/aws/smithy-go/middleware"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/jitterretry/jitterretry"
	"github.com/jitterretry/jitterretry/examples/internal/ddbtest"
	"github.com/jitterretry/jitterretry/internal/capacity"
)

// The measurements of BENCHMARKS.md section 5 that run the README's
// Increment on a hot item: under deadlines, through the send-rate limiter,
// under throttles. They print figures that depend on the machine, and take
// about a minute in all, so they run only when asked:
//
//	JITTERRETRY_FIGURES=1 go test -count 1 -run TestFigures -v ./examples/internal/snippet
//
// Each still checks what does not depend on the machine: no acknowledged
// increment is lost, none is applied twice.
const figuresEnv = "JITTERRETRY_FIGURES"

func skipUnlessFigures(t *testing.T) {
	t.Helper()
	if os.Getenv(figuresEnv) == "" {
		t.Skipf("a measurement for BENCHMARKS.md section 5: set %s=1 to run it", figuresEnv)
	}
}

// figuresSetup starts minidyn with a table, and returns them with a retryer
// as the README's Quick start makes it and a client of it whose sends log
// counts, late ones within lateWithin of their deadline.
func figuresSetup(t *testing.T, lateWithin time.Duration) (*ddbtest.Backend, string, *jitterretry.Retryer, *dynamodb.Client, *sendLog) {
	t.Helper()
	b, table := ddbtest.MinidynTable(t, "figures", "pk")
	retryer := jitterretry.New(jitterretry.DynamoDB)
	log := &sendLog{lateWithin: lateWithin}
	client := log.client(b.NewClient(t, b.URL, func(o *ddbtest.ClientOptions) { o.Retryer = retryer }).Client)
	return b, table, retryer, client, log
}

// sendLog counts the requests a client sends, and those sent with less
// than lateWithin left before their context's deadline.
type sendLog struct {
	sent, late atomic.Int64
	lateWithin time.Duration
}

// client returns a client of c's options that counts its sends into s.
func (s *sendLog) client(c *dynamodb.Client) *dynamodb.Client {
	return dynamodb.New(c.Options(), func(o *dynamodb.Options) {
		o.APIOptions = append(o.APIOptions, func(stack *smithymiddle.Stack) error {
			return stack.Finalize.Add(smithymiddle.FinalizeMiddlewareFunc("sendLog", func(ctx context.Context, in smithymiddle.FinalizeInput, next smithymiddle.FinalizeHandler) (smithymiddle.FinalizeOutput, smithymiddle.Metadata, error) {
				s.sent.Add(1)
				if dl, ok := ctx.Deadline(); ok && time.Until(dl) < s.lateWithin {
					s.late.Add(1)
				}
				return next.HandleFinalize(ctx, in)
			}), smithymiddle.After)
		})
	})
}

// giveUps collects the time left at each GiveUpDeadline, and counts the
// other errors.
type giveUps struct {
	mu     sync.Mutex
	left   []time.Duration
	others int
}

func (g *giveUps) note(err error, deadline time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	var gu *jitterretry.GiveUpError
	if errors.As(err, &gu) && gu.Reason == jitterretry.GiveUpDeadline {
		g.left = append(g.left, time.Until(deadline))
	} else {
		g.others++
	}
}

// summary returns the give-ups for the deadline, the least and the median
// time they left, and the other errors.
func (g *giveUps) summary() (n int, least, median time.Duration, others int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.left) == 0 {
		return 0, 0, 0, g.others
	}
	l := slices.Clone(g.left)
	slices.Sort(l)
	return len(l), l[0], l[len(l)/2], g.others
}

// TestFiguresDeadlines: 64 writers make 20 increments each on one item,
// each call of Increment under a deadline of its own, 1 s; a call that
// gives up is made again with the same seq, as a caller would.
func TestFiguresDeadlines(t *testing.T) {
	skipUnlessFigures(t)
	const writers, increments = 64, 20
	b, table, retryer, client, log := figuresSetup(t, 100*time.Millisecond)

	var gave giveUps
	stop := time.Now().Add(2 * time.Minute)
	start := time.Now()
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for seq := int64(1); seq <= increments && time.Now().Before(stop); {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				dl, _ := ctx.Deadline()
				err := Increment(ctx, client, retryer, table, "hot", writerName(w), seq)
				cancel()
				if err == nil {
					seq++
					continue
				}
				gave.note(err, dl)
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	require.NoError(t, b.Quiesce(context.Background()))
	item := read(t, b, table)
	assert.Equal(t, int64(writers*increments), number(item, "n"), "expect every increment applied exactly once")
	n, least, median, others := gave.summary()
	t.Logf("%d increments in %v: %.2f requests per increment; %d give-ups for the deadline (time left: least %v, median %v), %d other errors; %d requests sent with less than %v left",
		writers*increments, took.Round(time.Millisecond), float64(log.sent.Load())/float64(writers*increments),
		n, least.Round(100*time.Microsecond), median.Round(100*time.Microsecond), others, log.late.Load(), log.lateWithin)
}

// TestFiguresSharedDeadline: 128 loops, one Increment each on one item,
// all under one deadline of 250 ms, after 64 increments on another item
// that let the retryer learn the attempts' time.
func TestFiguresSharedDeadline(t *testing.T) {
	skipUnlessFigures(t)
	const loops = 128
	b, table, retryer, client, log := figuresSetup(t, 50*time.Millisecond)
	for i := range 64 {
		require.NoError(t, Increment(context.Background(), client, retryer, table, "warm", writerName(i), 1))
	}
	log.sent.Store(0)

	ctx, cancel := context.WithTimeout(context.Background(), 250*time.Millisecond)
	defer cancel()
	dl, _ := ctx.Deadline()
	var ok atomic.Int64
	var gave giveUps
	var wg sync.WaitGroup
	for w := range loops {
		wg.Go(func() {
			err := Increment(ctx, client, retryer, table, "hot", writerName(w), 1)
			switch {
			case err == nil:
				ok.Add(1)
			default:
				if w == 0 {
					t.Logf("loop 0: %v", err) // why it gave up
				}
				gave.note(err, dl)
			}
		})
	}
	wg.Wait()
	require.NoError(t, b.Quiesce(context.Background()))
	n := number(read(t, b, table), "n")
	assert.GreaterOrEqual(t, n, ok.Load(), "expect every acknowledged increment applied")
	assert.LessOrEqual(t, n, int64(loops), "expect no increment applied twice")
	gaveUp, least, median, others := gave.summary()
	t.Logf("%d of %d loops succeeded (%d applied); %d gave up for the deadline (time left: least %v, median %v), %d ended otherwise; %d requests sent, %d with less than %v left",
		ok.Load(), loops, n, gaveUp, least.Round(100*time.Microsecond), median.Round(100*time.Microsecond), others, log.sent.Load(), log.late.Load(), log.lateWithin)
}

// TestFiguresSendRate: 32 writers make 6 increments each on one item of a
// table of 100 (then 50) writes a second (the capacity proxy; reads
// unlimited), through a retryer without the send-rate limiter and one with
// it: the README's case for leaving the limiter off on hot items.
func TestFiguresSendRate(t *testing.T) {
	skipUnlessFigures(t)
	const writers, increments = 32, 6
	for _, writes := range []float64{100, 50} {
		for _, limited := range []bool{false, true} {
			b, table := ddbtest.MinidynTable(t, "figures", "pk")
			proxy := ddbtest.Capacity(t, b.URL, func(o *capacity.Options) {
				o.Default = capacity.Capacity{Read: capacity.Unlimited, Write: writes}
			})
			retryer := jitterretry.New(jitterretry.DynamoDB, func(o *jitterretry.Options) {
				if limited {
					o.SendRate = &jitterretry.SendRateOptions{}
				}
			})
			client := b.NewClient(t, proxy.URL, func(o *ddbtest.ClientOptions) { o.Retryer = retryer })
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			var failed atomic.Int64
			start := time.Now()
			var wg sync.WaitGroup
			for w := range writers {
				wg.Go(func() {
					for seq := int64(1); seq <= increments; seq++ {
						if Increment(ctx, client.Client, retryer, table, "hot", writerName(w), seq) != nil {
							failed.Add(1)
						}
					}
				})
			}
			wg.Wait()
			took := time.Since(start)
			cancel()
			require.NoError(t, b.Quiesce(context.Background()))
			n := number(read(t, b, table), "n")
			assert.Equal(t, int64(writers*increments)-failed.Load(), n, "expect every acknowledged increment applied once, and no failed one")
			st := proxy.Stats()
			t.Logf("%v writes/s, limiter %v: %d of %d increments in %v, %.2f requests per increment (%d throttled)",
				writes, limited, n, writers*increments, took.Round(100*time.Millisecond), float64(st.Requests)/float64(writers*increments), st.Throttled)
		}
	}
}

// TestFiguresUnderThrottles: 32 writers make 6 increments each on one item
// of a table of 50 writes a second that loses 2% of the responses after the
// write, each call of Increment under a deadline of its own drawn from a
// range, and made again with the same seq after an error. It counts how
// much of the deadline a give-up left, and the errors whose write had
// landed (the item already holds that seq when the writer reads it after
// the error): an error does not say the increment was not applied.
func TestFiguresUnderThrottles(t *testing.T) {
	skipUnlessFigures(t)
	const writers, increments = 32, 6
	for _, deadlines := range [][2]time.Duration{{500 * time.Millisecond, 3 * time.Second}, {50 * time.Millisecond, 300 * time.Millisecond}} {
		b, table := ddbtest.MinidynTable(t, "figures", "pk")
		proxy := ddbtest.Capacity(t, b.URL, func(o *capacity.Options) {
			o.Default = capacity.Capacity{Read: capacity.Unlimited, Write: 50}
			o.LostResponseRate = 0.02
			o.Seed = 1
		})
		retryer := jitterretry.New(jitterretry.DynamoDB)
		client := b.NewClient(t, proxy.URL, func(o *ddbtest.ClientOptions) { o.Retryer = retryer })
		admin := b.Admin(t).Client // one client for the writers' reads after an error, not one per read
		var gave giveUps
		var errs, landed atomic.Int64
		done := make([]int64, writers) // each writer's last increment known applied
		stop := time.Now().Add(2 * time.Minute)
		var wg sync.WaitGroup
		for w := range writers {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(1, uint64(w)))
				for seq := int64(1); seq <= increments && time.Now().Before(stop); {
					d := deadlines[0] + time.Duration(rng.Int64N(int64(deadlines[1]-deadlines[0])))
					ctx, cancel := context.WithTimeout(context.Background(), d)
					dl, _ := ctx.Deadline()
					err := Increment(ctx, client.Client, retryer, table, "hot", writerName(w), seq)
					cancel()
					if err == nil {
						done[w] = seq
						seq++
						continue
					}
					errs.Add(1)
					gave.note(err, dl)
					item, err := admin.GetItem(context.Background(), &dynamodb.GetItemInput{
						TableName: aws.String(table), ConsistentRead: aws.Bool(true),
						Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "hot"}},
					})
					if err != nil {
						t.Errorf("writer %d: reading the item after an error: %v", w, err) // not require: another goroutine
						return
					}
					if number(item.Item, "seq_"+writerName(w)) >= seq {
						landed.Add(1) // the call that failed had written it
						done[w] = seq
						seq++
					}
				}
			})
		}
		wg.Wait()
		require.NoError(t, b.Quiesce(context.Background()))
		item := read(t, b, table)
		n := number(item, "n")
		assert.LessOrEqual(t, n, int64(writers*increments), "expect no increment applied twice")
		for w := range writers {
			assert.GreaterOrEqual(t, number(item, "seq_"+writerName(w)), done[w], "expect writer %d's last acknowledged increment applied", w)
		}
		gaveUp, least, median, others := gave.summary()
		t.Logf("deadlines %v-%v: %d of %d increments applied; %d errors, %d of them for writes that had landed; %d gave up for the deadline (time left: least %v, median %v), %d other errors",
			deadlines[0], deadlines[1], n, writers*increments, errs.Load(), landed.Load(), gaveUp, least.Round(time.Millisecond), median.Round(time.Millisecond), others)
	}
}
