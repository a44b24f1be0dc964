package fault

import "time"

// Fault is a named set of toxics applied together.
type Fault struct {
	// Name names the fault in reports and test names.
	Name string
	// Doc says what the fault models, for reports.
	Doc string
	// Toxics are added in order; in one direction they chain in that order.
	Toxics []Toxic
	// AttemptTimeout, when set, replaces the package's AttemptTimeout for
	// a fault that stalls nothing but whose exchanges take one timer wake
	// per slice, which a loaded machine makes slow.
	AttemptTimeout time.Duration
}

// Timeout returns the per-attempt HTTP timeout for f's client.
func (f Fault) Timeout() time.Duration {
	if f.AttemptTimeout > 0 {
		return f.AttemptTimeout
	}
	return AttemptTimeout
}

// AttemptTimeout is the per-attempt HTTP timeout a client under Matrix
// should use: long enough for a healthy attempt under the race detector on a
// busy machine, shorter than the stalls the matrix injects, so that stalled
// attempts end and are retried.
const AttemptTimeout = 400 * time.Millisecond

// Matrix returns the faults the reliability tests run, each on its own.
// They are meant for a client that opens new connections now and then (its
// idle ones closed every few tens of milliseconds), since each connection
// draws once whether a toxic with a toxicity below 1 applies to it.
func Matrix() []Fault {
	return []Fault{
		{
			Name: "none",
			Doc:  "no toxic: the capacity proxy's throttles and injected 500s alone",
		},
		{
			Name: "latency",
			Doc:  "10±10 ms on every response, 2±2 ms on every request, and on 3% of connections a 1 s spike past the attempt timeout",
			Toxics: []Toxic{
				{Name: "latency_down", Type: "latency", Stream: "downstream", Attributes: map[string]int64{"latency": 10, "jitter": 10}},
				{Name: "latency_up", Type: "latency", Stream: "upstream", Attributes: map[string]int64{"latency": 2, "jitter": 2}},
				{Name: "spike", Type: "latency", Stream: "downstream", Toxicity: 0.03, Attributes: map[string]int64{"latency": 1000}},
			},
		},
		{
			Name: "reset_peer",
			Doc:  "on 5% of connections the server's response is dropped and the connection reset (TCP RST): the request reached the server",
			Toxics: []Toxic{
				{Type: "reset_peer", Stream: "downstream", Toxicity: 0.05, Attributes: map[string]int64{"timeout": 0}},
			},
		},
		{
			Name: "truncate",
			Doc:  "on 5% of connections the server's responses are cut after 256 bytes and the connection closed, mid-response",
			Toxics: []Toxic{
				{Type: "limit_data", Stream: "downstream", Toxicity: 0.05, Attributes: map[string]int64{"bytes": 256}},
			},
		},
		{
			Name: "timeout",
			Doc:  "on 5% of connections nothing comes back and the connection stays open: only the client's attempt timeout ends the attempt",
			Toxics: []Toxic{
				{Type: "timeout", Stream: "downstream", Toxicity: 0.05, Attributes: map[string]int64{"timeout": 0}},
			},
		},
		{
			Name: "bandwidth",
			Doc:  "every connection limited to 64 KB/s from the server and 128 KB/s to it",
			Toxics: []Toxic{
				{Type: "bandwidth", Stream: "downstream", Attributes: map[string]int64{"rate": 64}},
				{Type: "bandwidth", Stream: "upstream", Attributes: map[string]int64{"rate": 128}},
			},
		},
		{
			Name: "slicer",
			Doc:  "every response and request sliced into segments of about 32 and 64 bytes, 100 and 50 µs apart",
			Toxics: []Toxic{
				{Type: "slicer", Stream: "downstream", Attributes: map[string]int64{"average_size": 32, "size_variation": 16, "delay": 100}},
				{Type: "slicer", Stream: "upstream", Attributes: map[string]int64{"average_size": 64, "size_variation": 32, "delay": 50}},
			},
			// Some thirty slices an exchange, a wake each: at a load
			// average of 9.6 (a README run beside two CPU hogs and a CI
			// job) attempts passed 400 ms, and 55 of 400 increments failed
			// for the budget the timeouts spent. Slicing is no stall.
			AttemptTimeout: 5 * time.Second,
		},
	}
}
