package delayers

import (
	"cmp"
	"errors"
	"fmt"
	mathrand "math/rand"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
)

// Default values, the SDK's retry behaviour 2.1 numbers.
const (
	// DefaultBase is the first retry's window for errors that are not
	// throttles: 50 ms.
	DefaultBase = 50 * time.Millisecond

	// DefaultThrottleBase is the first retry's window for throttling errors:
	// 1 s.
	DefaultThrottleBase = time.Second

	// DefaultCap is the largest delay any strategy returns: 20 s.
	DefaultCap = 20 * time.Second

	// DefaultGrowth is the factor the window grows by per attempt: 2, the
	// blog's and the SDK's doubling.
	DefaultGrowth = 2.0

	// MinGrowth and MaxGrowth bound Options.Growth. Closer to 1 the window
	// would barely grow, and the floating-point rounding of
	// Growth^(attempt-1) could approach the growth from one attempt to the
	// next, so the window's never shrinking could no longer be guaranteed;
	// above 8 it reaches any cap within a few attempts, which Exponential
	// with a larger Base does more plainly.
	MinGrowth = 1.01
	MaxGrowth = 8.0
)

// Options configures a delayer. The zero value of every field means its
// default, so Options{} gives the SDK's standard numbers.
type Options struct {
	// Base is the window of the first retry after an error that is not a
	// throttle, growing by Growth (doubling by default) with each further
	// attempt. Zero means DefaultBase; negative is an error. A Base larger
	// than Cap is capped at Cap, as the SDK caps it.
	Base time.Duration

	// ThrottleBase is Base for throttling errors. Zero means
	// DefaultThrottleBase; negative is an error; larger than Cap is capped
	// at Cap.
	ThrottleBase time.Duration

	// Cap bounds every delay, and is applied before jitter, so full jitter
	// stays jittered at the cap. Zero means DefaultCap; negative is an error.
	Cap time.Duration

	// Growth is the factor, a plain number with no unit, by which the window
	// of Exponential, Full and Equal grows with each attempt:
	// w = min(Cap, base*Growth^(attempt-1)), base being Base or ThrottleBase.
	// Zero means DefaultGrowth (2), computed exactly as before this option
	// existed; an explicit 2 is the same. Any other value must be within
	// [MinGrowth, MaxGrowth] = [1.01, 8]; outside it, and NaN or an
	// infinity, is an error. A factor other than 2 is computed in floating
	// point, truncated to whole nanoseconds, and still saturates at Cap for
	// any attempt up to math.MaxInt; the window never shrinks as the attempt
	// grows. BENCHMARKS.md, section 2, measures full jitter with Growth 1.5
	// against doubling under contention.
	//
	// Decorrelated jitter has no window: it grows from the previous delay,
	// by up to 3x. NewDecorrelated, and New with StrategyDecorrelated,
	// therefore reject any Growth but zero and 2 rather than ignore it.
	Growth float64

	// Throttle decides which errors use ThrottleBase; it is called once per
	// BackoffDelay or Next with a non-nil error, and must be safe for
	// concurrent use. Nil means the SDK's
	// retry.IsErrorThrottles(retry.DefaultThrottles), copied when the delayer
	// is built (later changes to retry.DefaultThrottles do not reach it); pass
	// the same list as retry.StandardOptions.Throttles to keep the two in step.
	// An unknown or false answer counts as not a throttle. The SDK's
	// classifiers use errors.As and cost about one small allocation per
	// non-nil error; the delayers themselves allocate nothing. (A zero-value
	// delayer, built by no constructor, takes its defaults on every call:
	// a few allocations each, and the list as it is at that call.)
	Throttle retry.IsErrorThrottle

	// Source supplies the randomness and must be safe for concurrent use:
	// math/rand's generators (a *rand.Rand, *rand.PCG, *rand.ChaCha8, or
	// math/rand's NewSource as a Source64) are not, and are refused. Nil
	// means the Go runtime's generator, which scales across cores; use
	// NewSource(seed) for deterministic results.
	//
	// Throttle and Source are called through: a nil func, a nil pointer to
	// a type whose methods take a value (such as *retry.ThrottleErrorCode),
	// a nil *rand.Rand (or another of math/rand's generators), and a nil
	// entry of a retry.IsErrorThrottles (or of a list within it), are an
	// error rather than a panic at the first delay. A nil pointer of another type is taken as meant:
	// its methods may not need their receiver.
	Source Source
}

// ErrInvalidOption is the sentinel every *OptionError matches with
// errors.Is, for callers that only need to know the settings were rejected.
var ErrInvalidOption = errors.New("delayers: invalid option")

// OptionError reports a delayer setting that cannot be used: a negative
// duration, a Growth outside [MinGrowth, MaxGrowth], a Growth other than
// 2 given to decorrelated jitter, or a Throttle or Source that cannot be
// called (see Options.Source). The constructors return it, with a nil delayer, instead of
// silently changing the setting. Use errors.As to read its fields.
type OptionError struct {
	// Option is the name of the Options field: "Base", "ThrottleBase",
	// "Cap", "Growth", "Throttle" or "Source".
	Option string
	// Value is the value it was given, for the duration fields; it is zero
	// for the others.
	Value time.Duration
	// Factor is the value given to Growth; it is zero for the others.
	Factor float64
	// Reason says what is wrong with it, e.g. "must not be negative".
	Reason string
}

// Error returns "delayers: invalid <Option> <Value>: <Reason>", with Factor
// in place of Value when Option is "Growth", and neither for Throttle and
// Source, whose Reason says what they hold. A nil *OptionError prints as
// such rather than panic, and a zero one as ErrInvalidOption.
func (e *OptionError) Error() string {
	switch {
	case e == nil:
		return "delayers: <nil *OptionError>"
	case e.Option == "" && e.Reason == "":
		return ErrInvalidOption.Error() // a zero OptionError
	case e.Option == "Growth":
		return fmt.Sprintf("delayers: invalid %s %v: %s", e.Option, e.Factor, e.Reason)
	case e.Option == "Throttle" || e.Option == "Source":
		return fmt.Sprintf("delayers: invalid %s: %s", e.Option, e.Reason)
	}
	return fmt.Sprintf("delayers: invalid %s %v: %s", e.Option, e.Value, e.Reason)
}

// Is reports whether target is ErrInvalidOption; a nil *OptionError matches
// nothing, as a nil *jitterretry.GiveUpError (a typed nil in an error is a
// bug to surface, not a rejected setting).
func (e *OptionError) Is(target error) bool { return e != nil && target == ErrInvalidOption }

// settings is Options after defaults and validation: what every strategy
// shares.
type settings struct {
	base, throttleBase, cap time.Duration
	// growth is Options.Growth after defaults: DefaultGrowth, or a factor in
	// [MinGrowth, MaxGrowth]. Decorrelated jitter does not use it.
	growth   float64
	throttle retry.IsErrorThrottle
	source   Source
}

// newSettings applies optFns to a zero Options and validates the result;
// windowed says whether the strategy has a window for Growth to act on.
func newSettings(optFns []func(*Options), windowed bool) (settings, error) {
	var o Options
	for _, fn := range optFns {
		if fn != nil {
			fn(&o)
		}
	}
	return o.settings(windowed)
}

func (o Options) settings(windowed bool) (settings, error) {
	for _, f := range []struct {
		name string
		v    time.Duration
	}{{"Base", o.Base}, {"ThrottleBase", o.ThrottleBase}, {"Cap", o.Cap}} {
		if f.v < 0 {
			return settings{}, &OptionError{Option: f.name, Value: f.v, Reason: "must not be negative"}
		}
	}
	if err := o.validateCallees(); err != nil {
		return settings{}, err
	}
	s := settings{base: o.Base, throttleBase: o.ThrottleBase, cap: o.Cap, growth: o.Growth, throttle: o.Throttle, source: o.Source}
	if s.cap == 0 {
		s.cap = DefaultCap
	}
	if err := validGrowth(s.growth, windowed); err != nil {
		return settings{}, err
	}
	if s.growth == 0 {
		s.growth = DefaultGrowth
	}
	s.base = min(cmp.Or(s.base, DefaultBase), s.cap)
	s.throttleBase = min(cmp.Or(s.throttleBase, DefaultThrottleBase), s.cap)
	if s.throttle == nil {
		s.throttle = retry.IsErrorThrottles(append([]retry.IsErrorThrottle(nil), retry.DefaultThrottles...))
	}
	if s.source == nil {
		s.source = runtimeSource{}
	}
	return s, nil
}

// validateCallees refuses a Throttle or Source that the first delay would
// panic calling through (see callable), naming what it holds.
func (o Options) validateCallees() error {
	refuse := func(option string, held any, where string) error {
		return &OptionError{Option: option, Reason: fmt.Sprintf("%s a nil %T, whose methods need a value; build one, or leave the field nil for the default", where, held)}
	}
	if !callable(o.Source, reflect.TypeFor[Source]()) {
		return refuse("Source", o.Source, "holds")
	}
	if zeroGenerator(o.Source) {
		t := reflect.TypeOf(o.Source).Elem()
		return &OptionError{Option: "Source", Reason: fmt.Sprintf("holds a pointer to a zero %s.%s, whose methods need one its constructor built", t.PkgPath(), t.Name())}
	}
	if generator(o.Source) {
		// Racing draws corrupt it (a data race under -race; ChaCha8's
		// buffer index can run out of range), and one delayer serves
		// every request of a client.
		return &OptionError{Option: "Source", Reason: fmt.Sprintf("holds a %T, which is not safe for concurrent use; use delayers.NewSource(seed), or a Source of your own that locks", o.Source)}
	}
	if !callable(o.Throttle, reflect.TypeFor[retry.IsErrorThrottle]()) {
		return refuse("Throttle", o.Throttle, "holds")
	}
	// The entries of a list, and of the lists it holds, are called too; a
	// list that holds itself is called again, without end, for an error
	// the entries before it do not answer.
	type listID struct {
		first uintptr
		len   int
	}
	checked := map[listID]bool{} // lists found sound already
	var inList func(list retry.IsErrorThrottles, path string, within []listID) error
	inList = func(list retry.IsErrorThrottles, path string, within []listID) error {
		id := listID{reflect.ValueOf(list).Pointer(), len(list)}
		if len(list) == 0 || checked[id] {
			return nil
		}
		if slices.Contains(within, id) {
			return &OptionError{Option: "Throttle", Reason: fmt.Sprintf("the retry.IsErrorThrottles at entry %s holds itself: the SDK would call it again, without end, for an error the entries before it do not answer", strings.TrimSuffix(path, "."))}
		}
		within = append(within, id)
		for i, check := range list {
			at := fmt.Sprintf("%s%d", path, i)
			if check == nil {
				return &OptionError{Option: "Throttle", Reason: fmt.Sprintf("entry %s of the retry.IsErrorThrottles is nil; leave it out", at)}
			}
			if !callable(check, reflect.TypeFor[retry.IsErrorThrottle]()) {
				return refuse("Throttle", check, fmt.Sprintf("entry %s of the retry.IsErrorThrottles is", at))
			}
			if nested, ok := throttleList(check); ok {
				if err := inList(nested, at+".", within); err != nil {
					return err
				}
			}
		}
		checked[id] = true
		return nil
	}
	list, _ := throttleList(o.Throttle)
	return inList(list, "", nil)
}

// throttleList returns the checks v holds when it is the SDK's list of
// them, retry.IsErrorThrottles, which calls every entry in turn, or a
// pointer to one; a list type of the caller's own may do otherwise.
func throttleList(v any) (retry.IsErrorThrottles, bool) {
	switch l := v.(type) {
	case retry.IsErrorThrottles:
		return l, true
	case *retry.IsErrorThrottles:
		if l != nil {
			return *l, true
		}
	}
	return nil, false
}

// zeroGenerator reports whether s points to the zero value of one of
// math/rand's generators that only their constructors build usable (a
// zero rand.PCG or rand.ChaCha8 works).
func zeroGenerator(s any) bool {
	switch s.(type) {
	case *rand.Rand, *rand.Zipf, *mathrand.Rand, *mathrand.Zipf:
		rv := reflect.ValueOf(s)
		return !rv.IsNil() && rv.Elem().IsZero()
	}
	return false
}

// generator reports whether s is one of math/rand's generators, which are
// not safe for concurrent use: math/rand's NewSource is one too, though its
// type is unexported (a Source64 a caller asserted it to; helper-191).
func generator(s any) bool {
	switch s.(type) {
	case *rand.Rand, *rand.PCG, *rand.ChaCha8, *rand.Zipf, *mathrand.Rand, *mathrand.Zipf:
		return true
	}
	return s != nil && reflect.TypeOf(s) == mathRandSource
}

// mathRandSource is the type math/rand's NewSource returns, unexported.
var mathRandSource = reflect.TypeOf(mathrand.NewSource(0))

// callable reports whether v, held in an option of interface type iface,
// can be called through: it is not a nil func (nor a pointer to one whose
// type has the methods), nor a nil pointer to a type
// whose methods for iface take a value (Go's wrapper dereferences it), nor
// a nil pointer to one of math/rand's generators, whose methods read it.
// Any other nil pointer is callable as far as can be told: its methods may
// not need their receiver.
func callable(v any, iface reflect.Type) bool {
	rv := reflect.ValueOf(v)
	switch {
	case rv.Kind() == reflect.Func:
		return !rv.IsNil()
	case rv.Kind() == reflect.Pointer && !rv.IsNil() && rv.Elem().Kind() == reflect.Func:
		// A pointer to a func type with value methods: Go's wrapper
		// calls the func it points to.
		return !rv.Elem().IsNil() || !rv.Type().Elem().Implements(iface)
	case rv.Kind() != reflect.Pointer || !rv.IsNil():
		return true
	}
	if generator(v) {
		return false // a nil generator: its methods read it
	}
	return !rv.Type().Elem().Implements(iface)
}

// validGrowth checks Options.Growth: zero, or within [MinGrowth, MaxGrowth]
// for a windowed strategy; zero or 2 for decorrelated jitter. The range test is
// written so that NaN fails it.
func validGrowth(g float64, windowed bool) error {
	switch {
	case g == 0 || g == DefaultGrowth && !windowed:
		return nil
	case !windowed:
		return &OptionError{Option: "Growth", Factor: g, Reason: "applies only to the windowed strategies (exponential, full, equal): decorrelated jitter has no window"}
	case !(g >= MinGrowth && g <= MaxGrowth):
		return &OptionError{Option: "Growth", Factor: g, Reason: fmt.Sprintf("must be within [%v, %v], or 0 for the default %v", MinGrowth, MaxGrowth, DefaultGrowth)}
	}
	return nil
}

// orDefaults returns s, or, for the zero settings of a strategy value not
// made by its constructor (or for none at all), the defaults: the zero value
// of every strategy behaves as its constructor with no options.
func (s *settings) orDefaults() *settings {
	if s != nil && s.cap > 0 {
		return s
	}
	d, _ := Options{}.settings(true)
	return &d
}

// own gives the strategy types, through embedding, a way for use to reach
// their settings.
func (s *settings) own() *settings { return s }

// strategy is a pointer to one of the strategy types (Exponential, Full,
// Equal, Decorrelated).
type strategy[T any] interface {
	*T
	own() *settings
}

// use returns the settings d works with: its own, or the defaults for the
// zero value. A nil d behaves as the zero value too, so a constructor's nil
// result kept despite its error (d, _ := NewFull(bad)) delays by the
// defaults where it would otherwise panic, in the SDK's retry middleware, at
// the first retry. Every exported method of a strategy type goes through
// it: a method promoted from settings would dereference a nil d before
// running.
func use[T any, P strategy[T]](d P) *settings {
	if d == nil {
		return (*settings)(nil).orDefaults()
	}
	return d.own().orDefaults()
}

// isThrottle reports whether Options.Throttle classifies err as a
// throttle. A nil error is not one.
func (s *settings) isThrottle(err error) bool {
	return err != nil && s.throttle.IsErrorThrottle(err) == aws.TrueTernary
}

// baseOf returns ThrottleBase for a throttle and Base otherwise.
func (s *settings) baseOf(throttle bool) time.Duration {
	if throttle {
		return s.throttleBase
	}
	return s.base
}

// The accessors below are defined on every strategy type rather than once
// on settings, so that they answer on a nil pointer too (see use). They
// report the values in use after defaults were applied, never zero:
// callers such as a retryer's MaxBackoff check can rely on them.

// Base returns the window of the first retry after an error that is not a
// throttle, the value that grows with each further attempt: Options.Base,
// or min(DefaultBase, Cap) (50 ms by default) when that was zero. It is
// always in (0, Cap()].
func (d *Exponential) Base() time.Duration { return use(d).base }

// Base is Exponential.Base.
func (d *Full) Base() time.Duration { return use(d).base }

// Base is Exponential.Base.
func (d *Equal) Base() time.Duration { return use(d).base }

// Base is Exponential.Base, but not a window: the floor of every delay,
// the first drawn in [base, 3*base) and capped at Cap.
func (d *Decorrelated) Base() time.Duration { return use(d).base }

// ThrottleBase returns the window of the first retry after a throttling
// error: Options.ThrottleBase, or min(DefaultThrottleBase, Cap) (1 s by
// default) when that was zero. It is always in (0, Cap()], and may be smaller
// than Base() if the options say so.
func (d *Exponential) ThrottleBase() time.Duration { return use(d).throttleBase }

// ThrottleBase is Exponential.ThrottleBase.
func (d *Full) ThrottleBase() time.Duration { return use(d).throttleBase }

// ThrottleBase is Exponential.ThrottleBase.
func (d *Equal) ThrottleBase() time.Duration { return use(d).throttleBase }

// ThrottleBase is Exponential.ThrottleBase, a floor as Decorrelated.Base
// is.
func (d *Decorrelated) ThrottleBase() time.Duration { return use(d).throttleBase }

// Cap returns the largest delay any call returns: Options.Cap, or DefaultCap
// (20 s) when that was zero. It is always positive.
func (d *Exponential) Cap() time.Duration { return use(d).cap }

// Cap is Exponential.Cap.
func (d *Full) Cap() time.Duration { return use(d).cap }

// Cap is Exponential.Cap.
func (d *Equal) Cap() time.Duration { return use(d).cap }

// Cap is Exponential.Cap.
func (d *Decorrelated) Cap() time.Duration { return use(d).cap }

// Growth returns the factor the window grows by per attempt, after defaults:
// Options.Growth, or DefaultGrowth (2) when that was zero. It is 2 or within
// [MinGrowth, MaxGrowth]. (Decorrelated jitter has no window.)
func (d *Exponential) Growth() float64 { return use(d).growth }

// Growth is Exponential.Growth.
func (d *Full) Growth() float64 { return use(d).growth }

// Growth is Exponential.Growth.
func (d *Equal) Growth() float64 { return use(d).growth }
