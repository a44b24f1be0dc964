package main

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"
)

// deadlineRange is the deadline each operation gets (-deadline): a time drawn
// uniformly from [lo, hi] when the operation starts, as callers with
// per-request timeouts have. The zero value sets no deadline.
type deadlineRange struct {
	lo, hi time.Duration
}

// parseDeadline parses "" (none), one duration ("300ms": every operation
// the same) or two separated by a comma ("200ms,500ms": uniform between
// them).
func parseDeadline(s string) (deadlineRange, error) {
	if s == "" {
		return deadlineRange{}, nil
	}
	lo, hi, two := strings.Cut(s, ",")
	var d deadlineRange
	var err error
	if d.lo, err = time.ParseDuration(strings.TrimSpace(lo)); err != nil {
		return deadlineRange{}, fmt.Errorf("invalid -deadline %q: %w", s, err)
	}
	d.hi = d.lo
	if two {
		if d.hi, err = time.ParseDuration(strings.TrimSpace(hi)); err != nil {
			return deadlineRange{}, fmt.Errorf("invalid -deadline %q: %w", s, err)
		}
	}
	if d.lo <= 0 || d.hi < d.lo {
		return deadlineRange{}, fmt.Errorf("invalid -deadline %q: want a positive duration, or two with the first no longer than the second", s)
	}
	return d, nil
}

// set reports whether operations get a deadline.
func (d deadlineRange) set() bool { return d.hi > 0 }

// pick returns one operation's time until its deadline.
func (d deadlineRange) pick(rng *rand.Rand) time.Duration {
	if d.hi == d.lo {
		return d.lo
	}
	return d.lo + time.Duration(rng.Int64N(int64(d.hi-d.lo)+1))
}

func (d deadlineRange) String() string {
	if d.lo == d.hi {
		return d.lo.String()
	}
	return d.lo.String() + "–" + d.hi.String()
}
