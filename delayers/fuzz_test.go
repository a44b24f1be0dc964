package delayers

import (
	"cmp"
	"errors"
	"math"
	"testing"
	"time"
)

// fuzzThrottle is built once so the fuzzers spend their time in the package.
var fuzzThrottle = throttleErr()

// fuzzOptions builds Options from raw fuzz values and predicts whether the
// constructors of strategy must reject them, and for which field.
func fuzzOptions(strategy Strategy, base, throttleBase, cap int64, growth float64, seed uint64) (func(*Options), string) {
	o := Options{Base: time.Duration(base), ThrottleBase: time.Duration(throttleBase), Cap: time.Duration(cap), Growth: growth, Source: NewSource(seed)}
	bad := ""
	switch {
	case o.Base < 0:
		bad = "Base"
	case o.ThrottleBase < 0:
		bad = "ThrottleBase"
	case o.Cap < 0:
		bad = "Cap"
	case growth == 0:
	case strategy == StrategyDecorrelated && growth == DefaultGrowth:
	case strategy == StrategyDecorrelated:
		bad = "Growth"
	case math.IsNaN(growth) || growth < MinGrowth || growth > MaxGrowth:
		bad = "Growth"
	}
	return func(dst *Options) { *dst = o }, bad
}

// fuzzDelayer builds the delayer, checks the constructor's verdict against
// the prediction, and returns nil when the options are invalid.
func fuzzDelayer(t *testing.T, strategyIndex uint8, base, throttleBase, cap int64, growth float64, seed uint64) Delayer {
	t.Helper()
	strategy := Strategies()[int(strategyIndex)%len(Strategies())]
	opts, bad := fuzzOptions(strategy, base, throttleBase, cap, growth, seed)
	d, err := New(strategy, opts)
	if bad != "" {
		var oe *OptionError
		if !errors.As(err, &oe) {
			t.Fatalf("expect *OptionError for %s, got %T %v", bad, err, err)
		}
		if oe.Option != bad || d != nil {
			t.Fatalf("expect OptionError on %s and no delayer, got %s and %v", bad, oe.Option, d)
		}
		return nil
	}
	if err != nil || d == nil {
		t.Fatalf("expect a delayer, got %v", err)
	}
	if s := d; s.Cap() <= 0 || s.Base() <= 0 || s.Base() > s.Cap() || s.ThrottleBase() <= 0 || s.ThrottleBase() > s.Cap() {
		t.Fatalf("expect 0 < bases <= cap, got base %v, throttle base %v, cap %v", s.Base(), s.ThrottleBase(), s.Cap())
	}
	if g, ok := d.(interface{ Growth() float64 }); ok {
		if want := cmp.Or(growth, DefaultGrowth); g.Growth() != want {
			t.Fatalf("expect growth %v, got %v", want, g.Growth())
		}
	}
	return d
}

// fuzzWindow is the window a windowed delayer with growth (0 for the
// default) uses, checked against its reference: refWindow's doubling exactly,
// or refGrownWindow's repeated multiplication to a relative 1e-9.
func fuzzWindow(t *testing.T, base, cap time.Duration, growth float64, attempt int) time.Duration {
	t.Helper()
	if growth == 0 {
		w := window(base, cap, attempt)
		if ref := refWindow(base, cap, attempt); w != ref {
			t.Fatalf("expect window(%v, %v, %d) = %v, got %v", base, cap, attempt, ref, w)
		}
		if g := grownWindow(base, cap, DefaultGrowth, attempt); g != w {
			t.Fatalf("expect growth 2 to give the doubling %v, got %v", w, g)
		}
		return w
	}
	w := grownWindow(base, cap, growth, attempt)
	// The reference loops once per attempt until the cap, at most about
	// 4400 times for MinGrowth from 1 ns to math.MaxInt64.
	if ref := refGrownWindow(base, cap, growth, attempt); !closeWindows(w, ref) {
		t.Fatalf("expect grownWindow(%v, %v, %v, %d) close to %v, got %v", base, cap, growth, attempt, ref, w)
	}
	return w
}

func FuzzBackoffDelay(f *testing.F) {
	f.Add(uint8(1), int64(0), int64(0), int64(0), 3, uint64(1), false, 0.0)
	f.Add(uint8(3), int64(1), int64(1), int64(math.MaxInt64), math.MaxInt, uint64(2), true, 0.0)
	f.Add(uint8(1), int64(0), int64(0), int64(0), 7, uint64(3), false, 1.5)
	f.Add(uint8(2), int64(1), int64(1), int64(math.MaxInt64), math.MaxInt, uint64(4), true, MinGrowth)
	f.Fuzz(func(t *testing.T, strategyIndex uint8, base, throttleBase, cap int64, attempt int, seed uint64, throttle bool, growth float64) {
		d := fuzzDelayer(t, strategyIndex, base, throttleBase, cap, growth, seed)
		if d == nil {
			return
		}
		s := d
		var err error
		b := s.Base()
		if throttle {
			err, b = fuzzThrottle, s.ThrottleBase()
		}

		// The window directly: within [min(base, cap), cap], equal to (or,
		// for another growth, close to) its reference, and never shrinking
		// as attempt grows. Decorrelated jitter has no window: growth is 0.
		w := fuzzWindow(t, b, s.Cap(), growth, attempt)
		if w < min(b, s.Cap()) || w > s.Cap() {
			t.Fatalf("expect a window in [%v, %v], got %v", min(b, s.Cap()), s.Cap(), w)
		}
		g := cmp.Or(growth, DefaultGrowth)
		if attempt < math.MaxInt {
			if next := grownWindow(b, s.Cap(), g, attempt+1); next < w {
				t.Fatalf("expect the window not to shrink from attempt %d (%v) to %d, got %v", attempt, w, attempt+1, next)
			}
		}
		if attempt > math.MinInt {
			if prev := grownWindow(b, s.Cap(), g, attempt-1); prev > w {
				t.Fatalf("expect the window not to shrink from attempt %d (%v) to %d, got %v", attempt-1, prev, attempt, w)
			}
		}

		got, e := d.BackoffDelay(attempt, err)
		if e != nil {
			t.Fatalf("expect no error, got %v", e)
		}
		if got < 0 || got > s.Cap() {
			t.Fatalf("expect a delay in [0, %v], got %v", s.Cap(), got)
		}
		switch d := d.(type) {
		case *Exponential:
			if got != w {
				t.Fatalf("expect the window %v, got %v", w, got)
			}
			if attempt < math.MaxInt {
				if next, _ := d.BackoffDelay(attempt+1, err); next < got {
					t.Fatalf("expect Exponential not to shrink from attempt %d (%v), got %v", attempt, got, next)
				}
			}
		case *Full:
			if got >= w {
				t.Fatalf("expect a delay in [0, %v), got %v", w, got)
			}
		case *Equal:
			if got < w/2 || got >= w {
				t.Fatalf("expect a delay in [%v, %v), got %v", w/2, w, got)
			}
		case *Decorrelated:
			if got < b {
				t.Fatalf("expect a delay >= base %v, got %v", b, got)
			}
			if attempt <= 1 && got > min(s.Cap(), triple(b)) {
				t.Fatalf("expect a first delay <= min(cap, 3*base) %v, got %v", min(s.Cap(), triple(b)), got)
			}
		default:
			t.Fatalf("unexpected delayer %T", d)
		}
	})
}

func FuzzSequence(f *testing.F) {
	f.Add(uint8(3), int64(0), int64(0), int64(0), uint64(1), uint64(0xf0), uint8(40), 0.0)
	f.Add(uint8(0), int64(1), int64(2), int64(math.MaxInt64), uint64(2), uint64(0), uint8(255), 0.0)
	f.Add(uint8(1), int64(0), int64(0), int64(0), uint64(3), uint64(0x0f), uint8(30), 1.5)
	f.Add(uint8(0), int64(1), int64(2), int64(math.MaxInt64), uint64(4), uint64(0), uint8(255), MinGrowth)
	f.Fuzz(func(t *testing.T, strategyIndex uint8, base, throttleBase, cap int64, seed, throttles uint64, n uint8, growth float64) {
		d := fuzzDelayer(t, strategyIndex, base, throttleBase, cap, growth, seed)
		if d == nil {
			return
		}
		s := d
		// A twin with the same seed: for the windowed strategies the k-th
		// Next must equal BackoffDelay(k), since both draw once per delay.
		twin := fuzzDelayer(t, strategyIndex, base, throttleBase, cap, growth, seed)
		_, decorrelated := d.(*Decorrelated)

		q := d.NewSequence()
		var prev, prevBase time.Duration
		for k := 1; k <= int(n); k++ {
			var err error
			b := s.Base()
			if throttles>>(k%64)&1 == 1 {
				err, b = fuzzThrottle, s.ThrottleBase()
			}
			if k%97 == 0 {
				q.Reset()
				prevBase = 0
			}
			got := q.Next(err)
			if got < 0 || got > s.Cap() {
				t.Fatalf("Next %d: expect a delay in [0, %v], got %v", k, s.Cap(), got)
			}
			if !decorrelated {
				want, _ := twin.BackoffDelay(q.Attempt(), err)
				if got != want {
					t.Fatalf("Next %d: expect BackoffDelay(%d) = %v, got %v", k, q.Attempt(), want, got)
				}
				continue
			}
			if b != prevBase {
				prev, prevBase = b, b
			}
			if hi := min(s.Cap(), triple(prev)); got < b || got > hi {
				t.Fatalf("Next %d: expect a delay in [%v, %v] after %v, got %v", k, b, hi, prev, got)
			}
			prev = got
		}
	})
}
