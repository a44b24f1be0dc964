// Package occ is the workload of the DynamoDB example and of its integration
// tests: many workers increment a few hot counters with optimistic locking
// while the table throttles, and a check proves afterwards that no
// acknowledged increment was lost and none was applied twice.
//
// Each increment is a conditional write on a version attribute. On a
// condition failure the server returns the item as it is
// (ReturnValuesOnConditionCheckFailure=ALL_OLD), so the next attempt needs no
// re-read; servers that ignore ALL_OLD (dynalite) get a consistent re-read
// instead. The write also stores a per-operation token on the item: the
// attribute w<worker> holds the sequence number of that worker's last
// increment of the item. When a write lands but its response is lost, the
// SDK's retry fails its condition, and the returned item shows the worker's
// own token, so the increment is recognised as done instead of applied again.
//
// Retries happen in one layer each: the SDK's retry middleware (a
// jitterretry.Retryer, or retry.Standard for the baseline) retries throttles
// and 5xx responses inside one call; jitterretry.Do retries conflicts, which
// only the application can resolve, so retries never multiply. How Do backs
// off after a conflict is what the policies compare (see Policy): the
// Contention policy uses Do's default conflict handling, a backoff that
// follows the contention measured from the versions each conflict reports,
// a budget of its own and no tokens from the retry token bucket, which
// stays for the throttles and 5xx (and the transactions cancelled by
// throttling, which Do retries as throttles); the blind policies retry a
// conflict like any transient error, with their jitter and no token bucket.
// When Do gives up (conflict budget or attempts spent, bucket empty, or the
// SDK gave up on a throttle or 5xx), the increment goes back to the
// worker's queue and is tried again after a backoff, as a job queue would
// redeliver it.
package occ
