package occ

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// ItemCheck is the final state of one hot item against what the workers
// acknowledged.
type ItemCheck struct {
	Key string
	// Counter and Version are the stored values; every applied increment
	// adds one to both.
	Counter, Version int64
	// Expected is the acknowledged increments of the item, plus unresolved
	// and failed ones whose token shows they landed.
	Expected int64
}

// Check is the result of Verify.
type Check struct {
	Items []ItemCheck
	// Lost is the acknowledged increments missing from the counters.
	Lost int64
	// Double is the increments the counters hold beyond those expected:
	// increments applied twice, or applied without being acknowledged.
	Double int64
	// Unresolved is the increments whose workers never learned their
	// outcome; UnresolvedApplied of them had landed.
	Unresolved, UnresolvedApplied int
	// Failed is the increments reported as failed (Result.Failed);
	// FailedApplied of them had landed all the same (a write whose every
	// response was lost). Neither is a loss: the caller was told.
	Failed, FailedApplied int
}

// OK reports whether every counter equals its expected increments and its
// version, and every increment's outcome was known to its worker: either
// acknowledged or reported as failed.
func (c Check) OK() bool {
	if c.Lost != 0 || c.Double != 0 || c.Unresolved != 0 {
		return false
	}
	for _, it := range c.Items {
		if it.Counter != it.Expected || it.Version != it.Counter {
			return false
		}
	}
	return true
}

// String summarises the check for the report's last column.
func (c Check) String() string {
	if c.OK() {
		s := fmt.Sprintf("ok (%d/%d items)", len(c.Items), len(c.Items))
		if c.Failed > 0 {
			s += fmt.Sprintf(", %d failed (%d landed)", c.Failed, c.FailedApplied)
		}
		return s
	}
	s := fmt.Sprintf("FAILED: lost %d, double %d", c.Lost, c.Double)
	if c.Unresolved > 0 {
		s += fmt.Sprintf(", unresolved %d", c.Unresolved)
	}
	return s
}

// Verify reads every hot item with a consistent read through admin, which
// should reach the server directly rather than through the capacity proxy,
// and compares its counter with the increments res acknowledged.
func Verify(ctx context.Context, admin *dynamodb.Client, table string, res *Result) (Check, error) {
	var c Check
	items := make([]item, len(res.Acked))
	for i := range res.Acked {
		out, err := admin.GetItem(ctx, &dynamodb.GetItemInput{
			TableName:      aws.String(table),
			Key:            keyOf(i),
			ConsistentRead: aws.Bool(true),
		})
		if err != nil {
			return c, fmt.Errorf("occ: verify %s: %w", ItemKey(i), err)
		}
		if items[i], err = parseItem(out.Item); err != nil {
			return c, fmt.Errorf("occ: verify %s: %w", ItemKey(i), err)
		}
	}
	expected := append([]int64(nil), res.Acked...)
	landed := func(p Pending) bool {
		if p.Item >= 0 && p.Item < len(items) && items[p.Item].token(p.Worker) >= p.Seq {
			expected[p.Item]++
			return true
		}
		return false
	}
	for _, p := range res.Unresolved {
		c.Unresolved++
		if landed(p) {
			c.UnresolvedApplied++
		}
	}
	for _, f := range res.Failed {
		c.Failed++
		if landed(f.Pending) {
			c.FailedApplied++
		}
	}
	for i, it := range items {
		c.Items = append(c.Items, ItemCheck{Key: ItemKey(i), Counter: it.counter, Version: it.version, Expected: expected[i]})
		if d := expected[i] - it.counter; d > 0 {
			c.Lost += d
		} else {
			c.Double -= d
		}
	}
	return c, nil
}
