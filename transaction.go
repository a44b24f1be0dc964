package jitterretry

// This file owns what a DynamoDB transaction the service cancelled says of
// itself: a reason for each of its items, which tells a lost race and a
// throttle from a cancellation that no retry mends.

import "reflect"

// transactionCanceledCode is the error code of a DynamoDB transaction
// (TransactWriteItems, TransactGetItems) the service cancelled.
const transactionCanceledCode = "TransactionCanceledException"

// maxTransactionItems is the most items a DynamoDB transaction has, and so
// the most reasons a real cancellation lists; a longer list is read as no
// race or throttle, so that reading it costs a few microseconds at most.
const maxTransactionItems = 100

// cancellation is what the reasons of a cancelled transaction make it.
type cancellation uint8

const (
	// cancelledFinally: no reasons, a reason that neither reading again
	// nor waiting mends (a validation error, an item collection's size
	// limit), or races and throttles at once.
	cancelledFinally cancellation = iota
	// cancelledByConflicts: conditions failed, or other transactions held
	// items; the rest None. A conflict, which Do retries after the
	// application reads again.
	cancelledByConflicts
	// cancelledByThrottles: items were throttled; the rest None. Do
	// retries it as a throttle; the SDK's middleware does not, since the
	// code is no throttle's.
	cancelledByThrottles
)

// reasonKind returns what one item's cancellation reason code says, and
// false for a code that is neither None nor a race nor a throttle.
func reasonKind(code string) (cancellation, bool) {
	switch code {
	case "ConditionalCheckFailed", "TransactionConflict":
		return cancelledByConflicts, true
	case "ThrottlingError", "ProvisionedThroughputExceeded":
		return cancelledByThrottles, true
	}
	return cancelledFinally, false
}

// cancellationOf returns what err, a node with the code
// transactionCanceledCode, says by its CancellationReasons. They are read by
// their field names, since this module does not import the DynamoDB client:
// a struct, or a pointer to one, with CancellationReasons, a slice of
// structs (or pointers to them) whose Code is a string or *string, at most
// maxTransactionItems long. Any other shape, and a nil Code, is
// cancelledFinally.
func cancellationOf(err error) cancellation {
	reasons := fieldOf(reflect.ValueOf(err), "CancellationReasons")
	if reasons.Kind() != reflect.Slice || reasons.Len() > maxTransactionItems {
		return cancelledFinally
	}
	kind := cancelledFinally
	for i := range reasons.Len() {
		code := fieldOf(reasons.Index(i), "Code")
		if code.Kind() == reflect.Pointer && !code.IsNil() {
			code = code.Elem()
		}
		if code.Kind() != reflect.String {
			return cancelledFinally
		}
		if code.String() == "None" {
			continue
		}
		k, known := reasonKind(code.String())
		if !known || kind != cancelledFinally && k != kind {
			return cancelledFinally
		}
		kind = k
	}
	return kind
}

// fieldOf returns the field name of the struct v holds, through a few
// pointers and interfaces (a pointer that points to itself ends the
// search), or the zero Value when there is no such struct or field, or the
// field is reached through a nil embedded pointer.
func fieldOf(v reflect.Value, name string) reflect.Value {
	for range 4 {
		if v.Kind() != reflect.Pointer && v.Kind() != reflect.Interface || v.IsNil() {
			break
		}
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return reflect.Value{}
	}
	sf, ok := v.Type().FieldByName(name)
	if !ok {
		return reflect.Value{}
	}
	f, err := v.FieldByIndexErr(sf.Index)
	if err != nil {
		return reflect.Value{}
	}
	return f
}
