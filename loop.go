package jitterretry

import (
	"context"
	"time"

	"github.com/jitterretry/jitterretry/delayers"
)

// DoOptions configures one Do loop.
type DoOptions struct {
	// Classify decides what the loop retries. Nil means the Retryer's own
	// classification (the SDK's rules). An application loop typically
	// returns ClassTransient for errors that only it knows how to retry,
	// such as a ConditionalCheckFailedException after which fn re-reads the
	// item, or a TransactionConflictException, and leaves throttles to the
	// SDK's retry middleware so that retries do not multiply.
	Classify func(error) ErrorClass

	// MaxAttempts is the most calls of fn. Zero means the Retryer's
	// MaxAttempts; UnlimitedAttempts means no limit; other negative values
	// are invalid.
	MaxAttempts int

	// RetryCost, when set, gives the tokens a retry after err takes from the
	// Retryer's bucket, in place of its RetryCost and ThrottlingRetryCost.
	// Optimistic-locking conflicts are the normal price of contention, not a
	// sign of a struggling service, so a loop may charge them little or
	// nothing (0) and keep the budget for the SDK-level retries of throttles
	// and 5xx. A successful retry refunds whatever it was charged.
	RetryCost func(err error, class ErrorClass) uint
}

// Do calls fn until it returns nil, returns an error that is not retryable,
// or the Retryer gives up, sleeping between calls with the Retryer's jitter
// and paying for each retry from the Retryer's token bucket, the same budget
// its SDK-level retries use.
//
// Do returns nil on success; fn's own error when it is not retryable; a
// *MaxAttemptsError when the attempts run out; a *BudgetError when the bucket
// is empty; a *GiveUpError when ctx is done or the next backoff would end
// past ctx's deadline. Every one of them wraps fn's last error. A nil fn or
// invalid options give an *OptionsError; a nil ctx counts as
// context.Background(); nothing panics.
//
// Do pays only for its own retries: a retry that succeeds gets its cost back,
// and Do adds no NoRetryIncrement for a first-call success, since the SDK
// calls inside fn already earn theirs.
//
// Decorrelated jitter keeps the loop's real previous delay, as the blog's
// formula does for one client.
func Do(ctx context.Context, r *Retryer, fn func(ctx context.Context) error, optFns ...func(*DoOptions)) error {
	if r == nil {
		return &OptionsError{Option: "Retryer", Reason: "must not be nil"}
	}
	if r.err != nil {
		return r.err
	}
	if fn == nil {
		return &OptionsError{Option: "fn", Reason: "must not be nil"}
	}
	if ctx == nil {
		ctx = context.Background()
	}
	o := DoOptions{Classify: r.Classify}
	for _, f := range optFns {
		if f != nil {
			f(&o)
		}
	}
	if o.Classify == nil {
		o.Classify = r.Classify
	}
	maxAttempts := r.maxAttempts
	switch {
	case o.MaxAttempts == UnlimitedAttempts:
		maxAttempts = 0
	case o.MaxAttempts > 0:
		maxAttempts = o.MaxAttempts
	case o.MaxAttempts < 0:
		return &OptionsError{Option: "DoOptions.MaxAttempts", Reason: "must be at least 1, 0 for the Retryer's, or UnlimitedAttempts"}
	}

	l := r.laneFor(ctx)
	var seq *delayers.Sequence
	if d, ok := r.backoff.(delayers.Delayer); ok {
		seq = d.NewSequence()
	}
	var (
		held    heldTokens // the tokens of the retry about to be made
		holding bool
		lastErr error
	)
	for attempt := 1; ; attempt++ {
		if cerr := ctx.Err(); cerr != nil {
			if holding {
				held.refund()
			}
			return &GiveUpError{Reason: GiveUpCanceled, Attempt: attempt - 1, Context: cerr, Err: lastErr}
		}
		err := fn(ctx)
		if holding && err == nil {
			held.refund() // a successful retry gets its cost back
		}
		holding, lastErr = false, err
		if err == nil {
			return nil
		}

		class := o.Classify(err)
		if class == ClassNotRetryable {
			r.giveUp(GiveUpEvent{Reason: GiveUpNotRetryable, Attempt: attempt, Partition: l.key, Err: err})
			return err
		}
		if maxAttempts > 0 && attempt >= maxAttempts {
			r.giveUp(GiveUpEvent{Reason: GiveUpMaxAttempts, Attempt: attempt, Partition: l.key, Err: err})
			return &MaxAttemptsError{Attempt: attempt, Err: err}
		}
		cost := r.costs.retry
		switch {
		case o.RetryCost != nil:
			cost = o.RetryCost(err, class)
		case class == ClassThrottle:
			cost = r.costs.throttle
		}
		var terr error
		_, held, terr = l.take(ctx, cost)
		if terr != nil {
			r.giveUp(GiveUpEvent{Reason: GiveUpBudget, Attempt: attempt, Partition: l.key, Err: err})
			if be, ok := terr.(*BudgetError); ok {
				return &BudgetError{Available: be.Available, Requested: be.Requested, Partition: l.key, Err: err}
			}
			return terr
		}

		delay, derr := r.loopDelay(seq, attempt, err)
		if derr != nil {
			held.refund()
			return derr
		}
		if deadline, ok := ctx.Deadline(); ok && r.deadlineGiveUp {
			if remaining := deadline.Sub(r.now()); exceeds(delay, r.margin, remaining) {
				held.refund()
				r.giveUp(GiveUpEvent{Reason: GiveUpDeadline, Attempt: attempt, Partition: l.key, Err: err})
				return &GiveUpError{Reason: GiveUpDeadline, Attempt: attempt, Delay: delay, Remaining: remaining, Err: err}
			}
		}
		if r.onRetry != nil {
			r.onRetry(RetryEvent{Attempt: attempt, Delay: delay, Class: class, Err: err})
		}
		holding = true
		if serr := sleep(ctx, delay); serr != nil {
			holding = false
			held.refund()
			r.giveUp(GiveUpEvent{Reason: GiveUpCanceled, Attempt: attempt, Partition: l.key, Err: err})
			return &GiveUpError{Reason: GiveUpCanceled, Attempt: attempt, Context: serr, Err: err}
		}
	}
}

func (r *Retryer) loopDelay(seq *delayers.Sequence, attempt int, err error) (time.Duration, error) {
	if seq != nil {
		return seq.Next(err), nil
	}
	return r.backoff.BackoffDelay(attempt, err)
}

// sleep waits for d or until ctx is done, and returns ctx's error then.
func sleep(ctx context.Context, d time.Duration) error {
	return sleepUntilChanged(ctx, d, nil)
}

// sleepUntilChanged is sleep that also ends, without error, when changed is
// closed. A nil changed never is.
func sleepUntilChanged(ctx context.Context, d time.Duration, changed <-chan struct{}) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-changed:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
