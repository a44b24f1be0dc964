//go:build linux

package emulator

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/jitterretry/jitterretry/examples/internal/fault"
	"github.com/jitterretry/jitterretry/internal/capacity"
)

// Scenario is a run of the function under the emulator against DynamoDB
// that throttles hard and stalls: several execution environments (one
// emulator each) invoke the function side by side, each one invocation at
// a time; an invocation that fails is retried once with the same request
// ID, as Lambda retries an asynchronous invocation. The zero value of every
// field but Dir means its default.
type Scenario struct {
	// Dir is where the function and the emulator are built. Required.
	Dir string
	// Invocations is the number of invocations, Lambda's retries included.
	// Default 200.
	Invocations int
	// Environments is the number of emulators invoked side by side.
	// Default 8.
	Environments int
	// Keys is the number of counters the invocations increment, round
	// robin. Default 4.
	Keys int
	// Timeout is the function's timeout in whole seconds. Default 2: with
	// the function's 500 ms reserve, 1.5 s for DynamoDB.
	Timeout int
	// Race builds the function with the race detector.
	Race bool
	// Seed seeds the capacity proxy's injected errors and throttles.
	// Default 1.
	Seed uint64
	// Progress, when set, is called with each invocation as it returns,
	// one call at a time.
	Progress func(Invocation)
}

// The faults between the function and DynamoDB.
const (
	// writeCapacity is the table's write capacity in units per second; the
	// function's transaction writes two items, 4 units: 5 transactions a
	// second for the whole fleet.
	writeCapacity = 20
	// throttleRate is the share of requests throttled whatever the
	// capacity, reads included.
	throttleRate = 0.2
	// errorRate and lostResponseRate are the shares of requests answered
	// with a 500 before and after they reach the server.
	errorRate, lostResponseRate = 0.02, 0.05
	// stallToxicity is the share of requests whose response stalls for
	// good (a toxiproxy timeout toxic: only the attempt timeout ends the
	// attempt; the write may have landed), and spikeToxicity the share
	// whose response comes 1 s late, past the attempt timeout.
	stallToxicity, spikeToxicity = 0.04, 0.03
)

func (sc Scenario) faults() faults {
	return faults{
		capacity: func(o *capacity.Options) {
			o.Default = capacity.Capacity{Read: capacity.Unlimited, Write: writeCapacity}
			o.BurstSeconds = 0.5
			o.ThrottleRate = throttleRate
			o.ErrorRate = errorRate
			o.LostResponseRate = lostResponseRate
			o.Seed = sc.Seed
		},
		toxics: []fault.Toxic{
			{Name: "latency", Type: "latency", Attributes: map[string]int64{"latency": 2, "jitter": 2}},
			{Name: "spike", Type: "latency", Toxicity: spikeToxicity, Attributes: map[string]int64{"latency": 1000}},
			{Name: "stall", Type: "timeout", Toxicity: stallToxicity, Attributes: map[string]int64{"timeout": 0}},
		},
	}
}

// Invocation is one invocation's outcome.
type Invocation struct {
	// Seq numbers the invocations in the order they were sent, from 1.
	Seq int
	// Env is the emulator (execution environment) that ran it, from 0.
	Env int
	// RequestID is the invocation's request ID; Try is 1, or 2 for
	// Lambda's retry of a failed invocation with the same ID.
	RequestID string
	Try       int
	Key       string

	// Outcome is "ok", "replayed" (Lambda's retry of an increment that had
	// landed), "error" (Lambda's error JSON), "timeout" (the emulator's
	// "Task timed out") or "broken" (no answer, or one that is none of
	// these).
	Outcome string
	// Count is the counter after an ok or replayed invocation.
	Count int64
	// ErrorType and ErrorMessage are Lambda's error JSON's.
	ErrorType, ErrorMessage string
	// Status and Body are the emulator's HTTP answer; Start is when it
	// was sent and Elapsed the time the caller waited for it.
	Status  int
	Body    string
	Start   time.Time
	Elapsed time.Duration
	// Err is the failure to invoke at all.
	Err error
	// Log is what the emulator's output says about it; set once the
	// emulators have stopped (not yet for Progress).
	Log *LogEntry
}

// Acknowledged reports whether the invocation told its caller that its
// increment is applied.
func (inv Invocation) Acknowledged() bool { return inv.Outcome == "ok" || inv.Outcome == "replayed" }

// Report is what a scenario run found.
type Report struct {
	// Scenario is the scenario run, with its defaults filled in.
	Scenario    Scenario
	Invocations []Invocation
	// Outputs are each emulator's output.
	Outputs []string
	// TimedOut, DataRaces and Panics add up the emulators' outputs.
	TimedOut, DataRaces, Panics int
	// Counters are the counters in the table at the end, by key; Markers
	// the keys of the request IDs whose increment landed, by request ID.
	Counters map[string]int64
	Markers  map[string]string
	// Lost are the acknowledged request IDs whose increment is not in the
	// table; Doubled is how much the counters exceed the increments that
	// landed; Missing how much they fall short of them.
	Lost             []string
	Doubled, Missing int64
	// LandedUnacknowledged counts the request IDs never acknowledged
	// whose increment landed (its response lost, or its invocation gave
	// up after the write reached the server).
	LandedUnacknowledged int
	// Acknowledged counts the acknowledged request IDs.
	Acknowledged int
	// Proxy is the capacity proxy's count of the requests it saw.
	Proxy capacity.Stats
	// Wall is the time the invocations took, all environments together.
	Wall time.Duration
}

// Run builds the function and the emulator, starts the backend and the
// emulators, makes the invocations, stops everything and checks the table.
// It returns an error when the run could not be made; what the run found,
// good or bad, is in the Report.
func Run(ctx context.Context, sc Scenario) (*Report, error) {
	sc = sc.withDefaults()
	if sc.Dir == "" {
		return nil, errors.New("emulator: Scenario.Dir is required")
	}
	bin, err := Build(ctx, sc.Dir, sc.Race)
	if err != nil {
		return nil, err
	}
	b, err := startBackend(sc.faults())
	if err != nil {
		return nil, err
	}
	defer b.close()
	const table = "counter"
	if err := b.createTable(ctx, table); err != nil {
		return nil, fmt.Errorf("emulator: create the table: %w", err)
	}

	emus, err := startEmulators(ctx, sc, Config{Binaries: bin, Timeout: sc.Timeout, Env: []string{
		"TABLE_NAME=" + table,
		"AWS_ENDPOINT_URL_DYNAMODB=" + b.Endpoint,
		"AWS_REGION=us-east-1",
		"AWS_ACCESS_KEY_ID=local",
		"AWS_SECRET_ACCESS_KEY=local",
		"AWS_EC2_METADATA_DISABLED=true",
		"AWS_CONFIG_FILE=/dev/null",
		"AWS_SHARED_CREDENTIALS_FILE=/dev/null",
		"AWS_LAMBDA_FUNCTION_NAME=counter",
	}})
	if err != nil {
		return nil, err
	}
	closeAll := func() error {
		var errs []error
		for _, e := range emus {
			errs = append(errs, e.Close())
		}
		return errors.Join(errs...)
	}
	defer closeAll()

	r := &Report{Scenario: sc}
	start := time.Now()
	r.Invocations, err = drive(ctx, sc, emus)
	r.Wall = time.Since(start)
	if err != nil {
		return nil, err
	}
	if err := closeAll(); err != nil {
		return nil, err
	}
	for i, e := range emus {
		out := e.Output()
		r.Outputs = append(r.Outputs, out)
		parsed := ParseOutput(out)
		r.TimedOut += parsed.TimedOut
		r.DataRaces += parsed.DataRaces
		r.Panics += parsed.Panics
		attachLogs(parsed, r.Invocations, i)
	}

	b.stopFaults()
	if err := b.quiesce(ctx); err != nil {
		return nil, err
	}
	r.Proxy = b.capacity.Stats()
	if err := r.audit(ctx, b.Admin, table); err != nil {
		return nil, err
	}
	return r, nil
}

func (sc Scenario) withDefaults() Scenario {
	if sc.Invocations <= 0 {
		sc.Invocations = 200
	}
	if sc.Environments <= 0 {
		sc.Environments = 8
	}
	if sc.Keys <= 0 {
		sc.Keys = 4
	}
	if sc.Timeout <= 0 {
		sc.Timeout = 2
	}
	if sc.Seed == 0 {
		sc.Seed = 1
	}
	return sc
}

func startEmulators(ctx context.Context, sc Scenario, cfg Config) ([]*Emulator, error) {
	emus := make([]*Emulator, sc.Environments)
	errs := make([]error, sc.Environments)
	var wg sync.WaitGroup
	for i := range emus {
		wg.Add(1)
		go func() {
			defer wg.Done()
			emus[i], errs[i] = Start(ctx, cfg)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for _, e := range emus {
			if e != nil {
				_ = e.Close()
			}
		}
		return nil, err
	}
	return emus, nil
}

// awaitReport returns the nth entry of requestID in the emulator's output
// once its REPORT line is there, or as it is after a second: the emulator
// writes the line before it answers the invocation, but its output reaches
// the caller through a pipe, after the answer at times.
func (e *Emulator) awaitReport(ctx context.Context, requestID string, nth int) *LogEntry {
	deadline := time.Now().Add(time.Second)
	for {
		entry := ParseOutput(e.Output()).Find(requestID, nth)
		if entry != nil && entry.Reported || time.Now().After(deadline) || ctx.Err() != nil {
			return entry
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// attachLogs gives each invocation of invs that ran on emulator env its
// entry in the emulator's parsed output: a request ID's tries on one
// emulator appear in the order they were sent.
func attachLogs(out Output, invs []Invocation, env int) {
	nth := map[string]int{}
	for j := range invs {
		if inv := &invs[j]; inv.Env == env {
			inv.Log = out.Find(inv.RequestID, nth[inv.RequestID])
			nth[inv.RequestID]++
		}
	}
}

// schedule hands out the invocations: Lambda's retries of failed ones
// first, then new ones, up to the total.
type schedule struct {
	mu      sync.Mutex
	sc      Scenario
	sent    int
	fresh   int
	retries []Invocation
	done    []Invocation
}

func (s *schedule) next() (Invocation, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sent >= s.sc.Invocations {
		return Invocation{}, false
	}
	s.sent++
	if len(s.retries) > 0 {
		inv := s.retries[0]
		s.retries = s.retries[1:]
		return Invocation{Seq: s.sent, RequestID: inv.RequestID, Try: inv.Try + 1, Key: inv.Key}, true
	}
	s.fresh++
	return Invocation{
		Seq: s.sent, RequestID: fmt.Sprintf("inv-%03d", s.fresh), Try: 1,
		Key: "k" + strconv.Itoa((s.fresh-1)%s.sc.Keys),
	}, true
}

func (s *schedule) finish(inv Invocation) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if inv.Try == 1 && !inv.Acknowledged() {
		s.retries = append(s.retries, inv)
	}
	s.done = append(s.done, inv)
	if s.sc.Progress != nil {
		s.sc.Progress(inv)
	}
}

func drive(ctx context.Context, sc Scenario, emus []*Emulator) ([]Invocation, error) {
	s := &schedule{sc: sc}
	var wg sync.WaitGroup
	for i, e := range emus {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tries := map[string]int{} // on this emulator, by request ID
			for {
				inv, ok := s.next()
				if !ok || ctx.Err() != nil {
					return
				}
				inv.Env = i
				invoke(ctx, e, sc.Timeout, &inv)
				if sc.Progress != nil {
					inv.Log = e.awaitReport(ctx, inv.RequestID, tries[inv.RequestID])
				}
				tries[inv.RequestID]++
				s.finish(inv)
			}
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	sort.Slice(s.done, func(i, j int) bool { return s.done[i].Seq < s.done[j].Seq })
	return s.done, nil
}

// invoke makes one invocation and sorts its answer.
func invoke(ctx context.Context, e *Emulator, timeout int, inv *Invocation) {
	// A safety net only: the emulator itself ends the invocation at the
	// function's timeout.
	ctx, cancel := context.WithTimeout(ctx, time.Duration(timeout)*time.Second+30*time.Second)
	defer cancel()
	payload, _ := json.Marshal(map[string]string{"key": inv.Key})
	inv.Start = time.Now()
	resp, err := e.Invoke(ctx, inv.RequestID, payload)
	inv.Status, inv.Body, inv.Elapsed, inv.Err = resp.Status, string(resp.Body), resp.Elapsed, err
	inv.Outcome = "broken"
	if err != nil || resp.Status != 200 {
		return
	}
	if bytes.HasPrefix(resp.Body, []byte("Task timed out")) {
		inv.Outcome = "timeout"
		return
	}
	var body struct {
		Key          string `json:"key"`
		Count        int64  `json:"count"`
		Replayed     bool   `json:"replayed"`
		ErrorType    string `json:"errorType"`
		ErrorMessage string `json:"errorMessage"`
	}
	if json.Unmarshal(resp.Body, &body) != nil {
		return
	}
	switch {
	case body.ErrorType != "":
		inv.Outcome, inv.ErrorType, inv.ErrorMessage = "error", body.ErrorType, body.ErrorMessage
	case body.Key == inv.Key && body.Replayed:
		inv.Outcome, inv.Count = "replayed", body.Count
	case body.Key == inv.Key:
		inv.Outcome, inv.Count = "ok", body.Count
	}
}

// audit reads the table and checks the counters against the
// acknowledgements: every acknowledged increment landed, and every counter
// equals the increments that landed for it (one marker each), no more.
func (r *Report) audit(ctx context.Context, admin *dynamodb.Client, table string) error {
	r.Counters, r.Markers = map[string]int64{}, map[string]string{}
	pages := dynamodb.NewScanPaginator(admin, &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("emulator: scan the table: %w", err)
		}
		for _, item := range page.Items {
			pk, _ := item["pk"].(*types.AttributeValueMemberS)
			if pk == nil {
				continue
			}
			if key, ok := strings.CutPrefix(pk.Value, "counter#"); ok {
				n, _ := item["n"].(*types.AttributeValueMemberN)
				if n != nil {
					v, err := strconv.ParseInt(n.Value, 10, 64)
					if err != nil {
						return fmt.Errorf("emulator: counter %s holds %q", key, n.Value)
					}
					r.Counters[key] = v
				}
			}
			if id, ok := strings.CutPrefix(pk.Value, "request#"); ok {
				key, _ := item["key"].(*types.AttributeValueMemberS)
				if key != nil {
					r.Markers[id] = key.Value
				}
			}
		}
	}
	acked := map[string]bool{}
	for _, inv := range r.Invocations {
		if inv.Acknowledged() {
			acked[inv.RequestID] = true
		}
	}
	r.Acknowledged = len(acked)
	for id := range acked {
		if _, ok := r.Markers[id]; !ok {
			r.Lost = append(r.Lost, id)
		}
	}
	slices.Sort(r.Lost)
	landed := map[string]int64{}
	for id, key := range r.Markers {
		landed[key]++
		if !acked[id] {
			r.LandedUnacknowledged++
		}
	}
	for _, key := range r.keys() {
		if d := r.Counters[key] - landed[key]; d > 0 {
			r.Doubled += d
		} else {
			r.Missing -= d
		}
	}
	return nil
}

func (r *Report) keys() []string {
	seen := map[string]bool{}
	for k := range r.Counters {
		seen[k] = true
	}
	for _, k := range r.Markers {
		seen[k] = true
	}
	return slices.Sorted(func(yield func(string) bool) {
		for k := range seen {
			if !yield(k) {
				return
			}
		}
	})
}

// MaxConcurrent is the largest number of invocations that were running at
// the same instant, as their callers saw them.
func (r *Report) MaxConcurrent() int {
	type event struct {
		at    time.Time
		delta int
	}
	var events []event
	for _, inv := range r.Invocations {
		events = append(events, event{inv.Start, 1}, event{inv.Start.Add(inv.Elapsed), -1})
	}
	sort.Slice(events, func(i, j int) bool {
		if events[i].at.Equal(events[j].at) {
			return events[i].delta < events[j].delta
		}
		return events[i].at.Before(events[j].at)
	})
	n, most := 0, 0
	for _, e := range events {
		n += e.delta
		most = max(most, n)
	}
	return most
}

// TimeoutMs is the function's timeout in milliseconds.
func (r *Report) TimeoutMs() float64 { return float64(r.Scenario.Timeout) * 1000 }

// WriteInvocation writes one line about inv: what its caller got, what the
// function logged about its DynamoDB attempts, and the emulator's REPORT
// duration against the timeout.
func WriteInvocation(w io.Writer, inv Invocation, timeout int) {
	what := inv.Outcome
	switch inv.Outcome {
	case "ok", "replayed":
		what += fmt.Sprintf(" count=%d", inv.Count)
	case "error":
		what = inv.ErrorType
		if inv.Log != nil && inv.Log.Record != nil && inv.Log.Record.GaveUp != "" {
			what += " (gave up: " + inv.Log.Record.GaveUp + ")"
		}
	case "broken":
		what = fmt.Sprintf("broken: status %d, %v, %.80q", inv.Status, inv.Err, inv.Body)
	}
	attempts := ""
	if inv.Log != nil && inv.Log.Record != nil {
		rec := inv.Log.Record
		attempts = fmt.Sprintf("attempts %2d (throttled %2d, cut %d), left %4d ms", rec.Attempts, rec.Throttled, rec.Cut, rec.LeftMs)
	}
	duration := fmt.Sprintf("waited %4d ms", inv.Elapsed.Milliseconds())
	if inv.Log != nil && inv.Log.Reported {
		duration = fmt.Sprintf("REPORT %7.2f ms of %d s", inv.Log.DurationMs, timeout)
	}
	fmt.Fprintf(w, "%3d env%-2d %s try %d %s  %-36s %s  %s\n", inv.Seq, inv.Env, inv.RequestID, inv.Try, inv.Key, what, duration, attempts)
}

// WriteSummary writes the run's totals.
func (r *Report) WriteSummary(w io.Writer) {
	outcomes := map[string]int{}
	gaveUp := map[string]int{}
	retries := 0
	var durations []float64
	var attempts, throttled, cut int64
	for _, inv := range r.Invocations {
		key := inv.Outcome
		if inv.Outcome == "error" {
			key = inv.ErrorType
		}
		outcomes[key]++
		if inv.Try > 1 {
			retries++
		}
		if inv.Log != nil {
			if inv.Log.Reported {
				durations = append(durations, inv.Log.DurationMs)
			}
			if rec := inv.Log.Record; rec != nil {
				attempts += rec.Attempts
				throttled += rec.Throttled
				cut += rec.Cut
				if rec.GaveUp != "" {
					gaveUp[rec.GaveUp]++
				}
			}
		}
	}
	sort.Float64s(durations)
	fmt.Fprintf(w, "%d invocations (%d of them Lambda's retries of a failed one) on %d emulated execution environments, up to %d at once, function timeout %d s, in %v:\n",
		len(r.Invocations), retries, r.Scenario.Environments, r.MaxConcurrent(), r.Scenario.Timeout, r.Wall.Round(100*time.Millisecond))
	fmt.Fprintf(w, "  outcomes: %s; the retryer gave up: %s\n", counts(outcomes), counts(gaveUp))
	if n := len(durations); n > 0 {
		fmt.Fprintf(w, "  REPORT Duration: p50 %.0f ms, p99 %.0f ms, max %.0f ms, of the %.0f ms timeout; %d reported of %d; timed out: %d\n",
			durations[n/2], durations[n*99/100], durations[n-1], r.TimeoutMs(), n, len(r.Invocations), r.TimedOut)
	}
	fmt.Fprintf(w, "  DynamoDB attempts: %d, %d throttled, %d cut by the attempt timeout; the capacity proxy saw %d requests: %d throttled, %d answered 500 before and %d after reaching the server\n",
		attempts, throttled, cut, r.Proxy.Requests, r.Proxy.Throttled, r.Proxy.InjectedErrors, r.Proxy.LostResponses)
	var cs []string
	var total int64
	for _, k := range r.keys() {
		cs = append(cs, fmt.Sprintf("%s=%d", k, r.Counters[k]))
		total += r.Counters[k]
	}
	fmt.Fprintf(w, "  counters: %s (total %d) = %d acknowledged + %d landed without an acknowledgement; lost %d, doubled %d, missing %d\n",
		strings.Join(cs, " "), total, r.Acknowledged, r.LandedUnacknowledged, len(r.Lost), r.Doubled, r.Missing)
	if lost := r.CauseLost(); len(lost) > 0 {
		fmt.Fprintf(w, "  CounterErrors without the retryer's give-up, the cause lost: %d\n", len(lost))
		for _, inv := range lost {
			fmt.Fprintf(w, "    invocation %d (%s, try %d): %s\n", inv.Seq, inv.RequestID, inv.Try, inv.ErrorMessage)
		}
	}
	if r.DataRaces > 0 || r.Panics > 0 {
		fmt.Fprintf(w, "  data races: %d, panics: %d\n", r.DataRaces, r.Panics)
	}
}

func counts(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}
