package jitterretry

// This file owns the conflict report: how a Do loop's function tells it that
// it lost an optimistic-concurrency race, and what it learnt.

// Conflict marks err as a lost optimistic-concurrency race and reports what
// the attempt learnt: seen is the item's version that the write expected
// (the one the attempt read, or, in a loop that writes again without
// reading, the one the previous conflict returned), and current the version
// the item had when the conditional write failed (DynamoDB returns the item
// with ReturnValuesOnConditionCheckFailure set to ALL_OLD). The result wraps err, so errors.As still finds the
// ConditionalCheckFailedException, and is ClassConflict under Do's default
// classification.
//
// With the versions, Do's backoff learns how many clients compete for the
// item and spaces its retries to match (see delayers.Contention); pass
// current <= seen when they are unknown, and it falls back to full jitter
// with growth 1.5 over the measured round trip. A nil err gives nil.
func Conflict(err error, seen, current int64) error {
	if err == nil {
		return nil
	}
	return &conflictError{err: err, seen: seen, current: current}
}

type conflictError struct {
	err           error
	seen, current int64
}

func (e *conflictError) Error() string { return errorText(e.err) }
func (e *conflictError) Unwrap() error { return e.err }

// conflictReport returns the versions reported with Conflict inside err;
// unknown ones (current <= seen) when there are none. It walks the chain
// with inChain, bounded and calling no method but Unwrap.
func conflictReport(err error) (seen, current int64) {
	var c *conflictError
	if inChain(err, func(e error) bool {
		c, _ = e.(*conflictError)
		return c != nil
	}) {
		return c.seen, c.current
	}
	return 0, 0
}
