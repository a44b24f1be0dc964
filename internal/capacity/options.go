package capacity

import (
	"fmt"
	"maps"
	"math"
	"net/http"
	"time"
)

// Unlimited is a capacity that never throttles.
var Unlimited = math.Inf(1)

// Capacity is a table's provisioned throughput in units per second: one unit
// per item read or written (two in a transaction). Zero admits nothing;
// Unlimited admits everything; negative and NaN values are errors.
type Capacity struct {
	Read  float64
	Write float64
}

// Options configures a Proxy. New fills it with the defaults documented on
// each field before the caller's option functions run.
type Options struct {
	// Default is the capacity of every table that has no entry in Tables.
	// Default: Unlimited reads and writes.
	Default Capacity

	// Tables gives some tables their own capacity. Default: none.
	Tables map[string]Capacity

	// BurstSeconds is how many seconds of unused capacity a table can save up
	// and then spend at once; each bucket holds ceil(capacity*BurstSeconds)
	// tokens, at least one when capacity is positive, and starts full.
	// Default: 1 (DynamoDB keeps up to 300). Must be positive.
	BurstSeconds float64

	// ErrorRate is the fraction, in [0, 1], of admitted data-plane requests
	// answered with HTTP 500 InternalServerError without being forwarded: the
	// request had no effect. Default: 0.
	ErrorRate float64

	// LostResponseRate is the fraction, in [0, 1], of admitted data-plane
	// requests that are forwarded and then answered with HTTP 500
	// InternalServerError instead of the server's response: a write landed
	// but the client cannot know. ErrorRate+LostResponseRate must not exceed
	// 1. Default: 0.
	LostResponseRate float64

	// ThrottleRate is the probability, in [0, 1], that a metered request is
	// answered with ProvisionedThroughputExceededException whatever the
	// capacity: throttles independent of load, such as a hot partition's
	// within a table that has capacity to spare. The draw comes before the
	// capacity check, and a request it throttles takes no capacity. It can
	// be changed at run time with SetThrottleRate. Default: 0, which draws
	// nothing.
	ThrottleRate float64

	// Seed seeds the generators that decide error injection and random
	// throttles, so a run that sends the same requests in the same order
	// injects the same errors and throttles. Default: 1.
	Seed uint64

	// Now is the clock for the token buckets and per-second counts. Default:
	// time.Now. Tests can freeze it so that only the burst is admitted.
	Now func() time.Time

	// Transport sends requests to the upstream server. Default: a clone of
	// http.DefaultTransport keeping up to 64 idle connections.
	Transport http.RoundTripper
}

func defaultOptions() Options {
	return Options{
		Default:      Capacity{Read: Unlimited, Write: Unlimited},
		BurstSeconds: 1,
		Seed:         1,
		Now:          time.Now,
	}
}

func (c Capacity) validate(what string) error {
	for _, f := range []struct {
		name string
		v    float64
	}{{"Read", c.Read}, {"Write", c.Write}} {
		if math.IsNaN(f.v) || f.v < 0 {
			return fmt.Errorf("capacity: invalid %s %s capacity %v: must be zero, positive or Unlimited", what, f.name, f.v)
		}
	}
	return nil
}

func (o *Options) validate() error {
	if err := o.Default.validate("default"); err != nil {
		return err
	}
	for table, c := range o.Tables {
		if err := c.validate(fmt.Sprintf("table %q", table)); err != nil {
			return err
		}
	}
	if !(o.BurstSeconds > 0) || math.IsInf(o.BurstSeconds, 1) {
		return fmt.Errorf("capacity: invalid BurstSeconds %v: must be positive and finite", o.BurstSeconds)
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"ErrorRate", o.ErrorRate}, {"LostResponseRate", o.LostResponseRate}, {"ThrottleRate", o.ThrottleRate}} {
		if !validRate(f.v) {
			return fmt.Errorf("capacity: invalid %s %v: must be within [0, 1]", f.name, f.v)
		}
	}
	if o.ErrorRate+o.LostResponseRate > 1 {
		return fmt.Errorf("capacity: ErrorRate %v + LostResponseRate %v exceed 1", o.ErrorRate, o.LostResponseRate)
	}
	if o.Now == nil {
		return fmt.Errorf("capacity: Now must not be nil")
	}
	return nil
}

// validRate reports whether v is a probability, within [0, 1].
func validRate(v float64) bool { return v >= 0 && v <= 1 }

func (o *Options) copyMaps() {
	o.Tables = maps.Clone(o.Tables)
}
