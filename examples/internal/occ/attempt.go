package occ

import (
	"context"
	"errors"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/jitterretry/jitterretry"
)

// attempt is one increment's state across the calls Do makes.
type attempt struct {
	w    *worker
	item int
	seq  int64
	// version is the item's version the next write expects; known is false
	// when the next call must read it first.
	version int64
	known   bool
	// unconfirmed is a condition failure that came without the item
	// (the server ignored ALL_OLD): the next read tells whether it was a
	// conflict or this increment's own earlier write.
	unconfirmed bool
}

// try is one call of Do's loop: read the item if its version is unknown,
// then write conditionally. It returns nil when the increment is applied,
// by this write or, as the item's token shows, by an earlier one whose
// response was lost; a conflict (jitterretry.ClassConflict) when another
// worker wrote first, marked with jitterretry.Conflict and the item's
// versions when the server returned the item.
func (a *attempt) try(ctx context.Context) error {
	if !a.known {
		out, err := a.w.client.GetItem(ctx, &dynamodb.GetItemInput{
			TableName:      aws.String(a.w.cfg.Table),
			Key:            keyOf(a.item),
			ConsistentRead: aws.Bool(true),
		})
		if err != nil {
			return err
		}
		if done, err := a.learn(out.Item); done || err != nil {
			return err
		}
	}
	seen := a.version
	in := increment{table: a.w.cfg.Table, item: a.item, worker: a.w.id, seq: a.seq, version: seen}
	var err error
	if a.w.cfg.Transact {
		_, err = a.w.client.TransactWriteItems(ctx, in.transactWriteItems())
	} else {
		_, err = a.w.client.UpdateItem(ctx, in.updateItem())
	}
	if err == nil {
		a.version++
		return nil
	}
	a.known = false
	if throttledTransaction(err) {
		return &ThrottledTransactionError{Err: err}
	}
	old, conflict := conflictItem(err)
	if !conflict {
		return err
	}
	if old == nil {
		// A conflict as it is, to Do (a transaction cancelled for a
		// failed condition or another transaction too), with the current
		// version unknown: the next call reads it.
		a.unconfirmed = true
		return err
	}
	done, lerr := a.learn(old)
	if lerr != nil {
		return lerr
	}
	if done {
		return nil
	}
	a.w.conflicts.Add(1)
	return jitterretry.Conflict(err, seen, a.version)
}

// learn takes the item's version from attrs and reports whether it already
// carries this increment's token.
func (a *attempt) learn(attrs map[string]types.AttributeValue) (done bool, err error) {
	it, err := parseItem(attrs)
	if err != nil {
		return false, err
	}
	a.version, a.known = it.version, true
	done = it.token(a.w.id) >= a.seq
	switch {
	case done:
		a.w.recognised.Add(1)
	case a.unconfirmed:
		a.w.conflicts.Add(1)
	}
	a.unconfirmed = false
	return done, nil
}

// conflictItem reports whether err is a condition failure or a transaction
// conflict, and returns the item as it was when the server returned it
// (ReturnValuesOnConditionCheckFailure=ALL_OLD), nil when the server did not.
func conflictItem(err error) (map[string]types.AttributeValue, bool) {
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return ccf.Item, true
	}
	var tce *types.TransactionCanceledException
	if errors.As(err, &tce) {
		for _, r := range tce.CancellationReasons {
			switch aws.ToString(r.Code) {
			case "ConditionalCheckFailed":
				return r.Item, true
			case "TransactionConflict":
				return nil, true
			}
		}
		return nil, false
	}
	var tc *types.TransactionConflictException
	return nil, errors.As(err, &tc)
}

// throttledTransaction reports whether err is a TransactionCanceledException
// cancelled only because an item was throttled: the SDK does not retry it
// (the exception is not a throttle), the application does.
func throttledTransaction(err error) bool {
	var tce *types.TransactionCanceledException
	if !errors.As(err, &tce) {
		return false
	}
	throttled := false
	for _, r := range tce.CancellationReasons {
		switch aws.ToString(r.Code) {
		case "", "None":
		case "ThrottlingError", "ProvisionedThroughputExceeded":
			throttled = true
		default:
			return false
		}
	}
	return throttled
}
