package sim

import (
	"fmt"
	"time"
)

// Params are the OCC experiment's parameters. The zero value of a field
// means its default, the blog's number.
type Params struct {
	// Base is the blog's base: its n-th retry's window is min(Cap, Base*2^n)
	// with n = 1 on the first retry, and decorrelated jitter starts at Base.
	// Zero means 5 ms.
	Base time.Duration
	// Cap bounds every sleep. Zero means 2000 ms.
	Cap time.Duration
	// NetMean and NetSD define one message's delay, |Normal(NetMean, NetSD)|.
	// Zero means 10 ms and 2 ms.
	NetMean, NetSD time.Duration
	// AllOld selects the loop of clients that write with
	// ReturnValuesOnConditionCheckFailure set to ALL_OLD: after a failed
	// write a client sleeps and sends its write again with the version the
	// failed write returned, without reading the row again, so every retry
	// is one round trip and fails if anyone won since the previous write
	// reached the row. False (the blog's loop) re-reads after every failed
	// write. The first attempt reads in both.
	AllOld bool
}

// Defaults of Params: the blog's numbers.
const (
	DefaultBase    = 5 * time.Millisecond
	DefaultCap     = 2000 * time.Millisecond
	DefaultNetMean = 10 * time.Millisecond
	DefaultNetSD   = 2 * time.Millisecond
)

func (p Params) withDefaults() (Params, error) {
	for _, f := range []struct {
		name string
		v    time.Duration
	}{{"Base", p.Base}, {"Cap", p.Cap}, {"NetMean", p.NetMean}, {"NetSD", p.NetSD}} {
		if f.v < 0 {
			return p, fmt.Errorf("sim: invalid %s %v: must not be negative", f.name, f.v)
		}
	}
	if p.Base == 0 {
		p.Base = DefaultBase
	}
	if p.Cap == 0 {
		p.Cap = DefaultCap
	}
	if p.NetMean == 0 {
		p.NetMean = DefaultNetMean
	}
	if p.NetSD == 0 {
		p.NetSD = DefaultNetSD
	}
	if p.Base > p.Cap {
		return p, fmt.Errorf("sim: invalid Base %v: larger than Cap %v", p.Base, p.Cap)
	}
	return p, nil
}
