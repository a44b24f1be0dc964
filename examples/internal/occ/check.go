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
	// ones whose token shows they landed.
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
}

// OK reports whether every counter equals its expected increments and its
// version, and every increment's outcome was known to its worker.
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
		return fmt.Sprintf("ok (%d/%d items)", len(c.Items), len(c.Items))
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
	for _, p := range res.Unresolved {
		c.Unresolved++
		if p.Item >= 0 && p.Item < len(items) && items[p.Item].token(p.Worker) >= p.Seq {
			c.UnresolvedApplied++
			expected[p.Item]++
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
