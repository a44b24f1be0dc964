package jitterretry

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
)

// Shapes a TransactionCanceledException may come in: the SDK's (pointers
// to a struct whose reasons hold a *string Code), and others a user's or a
// test's error type may have. None may panic or loop. Each has the methods
// of an error with the cancelled transaction's code (cancelledCode), so the
// classification reads its reasons.
type (
	reasonPtr struct{ Code *string }
	reasonStr struct{ Code string }
	reasonInt struct{ Code int }
	sdkShaped struct {
		cancelledCode
		CancellationReasons []reasonPtr
	}
	stringShaped struct {
		cancelledCode
		CancellationReasons []*reasonStr
	}
	intShaped struct {
		cancelledCode
		CancellationReasons []reasonInt
	}
	notASlice struct {
		cancelledCode
		CancellationReasons string
	}
	embeddedReasons struct{ sdkShaped }
	selfPointer     *selfPointer
	selfShaped      struct {
		cancelledCode
		CancellationReasons []selfPointer
	}
	stringReasons struct {
		cancelledCode
		CancellationReasons []string
	}
	// nilEmbedded reaches its reasons through a nil pointer; its own
	// methods need none.
	nilEmbedded struct {
		cancelledCode
		*sdkShaped
	}
	// codeOnly has the code and no struct at all.
	codeOnly string
)

type cancelledCode struct{}

func (cancelledCode) Error() string     { return "cancelled" }
func (cancelledCode) ErrorCode() string { return transactionCanceledCode }
func (codeOnly) Error() string          { return "cancelled" }
func (codeOnly) ErrorCode() string      { return transactionCanceledCode }

func codes(cs ...string) []reasonPtr {
	out := make([]reasonPtr, len(cs))
	for i := range cs {
		out[i] = reasonPtr{&cs[i]}
	}
	return out
}

func TestCancellationOfReadsTheReasonsWhateverTheirShape(t *testing.T) {
	var loop selfPointer
	loop = &loop
	cases := map[string]struct {
		err  error
		want cancellation
	}{
		"conflicts":                 {&sdkShaped{CancellationReasons: codes("None", "ConditionalCheckFailed", "TransactionConflict")}, cancelledByConflicts},
		"throttles":                 {&sdkShaped{CancellationReasons: codes("ThrottlingError", "None", "ProvisionedThroughputExceeded")}, cancelledByThrottles},
		"races and throttles":       {&sdkShaped{CancellationReasons: codes("ConditionalCheckFailed", "ThrottlingError")}, cancelledFinally},
		"a validation error":        {&sdkShaped{CancellationReasons: codes("ConditionalCheckFailed", "ValidationError")}, cancelledFinally},
		"none at all":               {&sdkShaped{CancellationReasons: codes("None", "None")}, cancelledFinally},
		"no reasons":                {&sdkShaped{}, cancelledFinally},
		"a nil code":                {&sdkShaped{CancellationReasons: []reasonPtr{{nil}}}, cancelledFinally},
		"string codes":              {stringShaped{CancellationReasons: []*reasonStr{{"TransactionConflict"}, nil}}, cancelledFinally},
		"string codes, all set":     {stringShaped{CancellationReasons: []*reasonStr{{"TransactionConflict"}, {"None"}}}, cancelledByConflicts},
		"int codes":                 {intShaped{CancellationReasons: []reasonInt{{1}}}, cancelledFinally},
		"not a slice":               {notASlice{CancellationReasons: "ConditionalCheckFailed"}, cancelledFinally},
		"embedded":                  {&embeddedReasons{sdkShaped{CancellationReasons: codes("TransactionConflict")}}, cancelledByConflicts},
		"a nil pointer":             {(*sdkShaped)(nil), cancelledFinally},
		"a pointer to itself":       {selfShaped{CancellationReasons: []selfPointer{loop}}, cancelledFinally},
		"an error with no reasons":  {assert.AnError, cancelledFinally},
		"reasons that are strings":  {stringReasons{CancellationReasons: []string{"TransactionConflict"}}, cancelledFinally},
		"a nil embedded pointer":    {nilEmbedded{}, cancelledFinally},
		"no struct at all":          {codeOnly("x"), cancelledFinally},
		"a full transaction":        {&sdkShaped{CancellationReasons: codes(slices.Repeat([]string{"TransactionConflict"}, 100)...)}, cancelledByConflicts},
		"more than any transaction": {&sdkShaped{CancellationReasons: codes(slices.Repeat([]string{"TransactionConflict"}, 101)...)}, cancelledFinally},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			assert.NotPanics(t, func() { assert.Equal(t, tc.want, cancellationOf(tc.err)) })
			// Through the classification the SDK's middleware calls on
			// every failed attempt (the shapes have the code).
			assert.NotPanics(t, func() { _ = Classify(tc.err) })
		})
	}
	assert.NotPanics(t, func() { _ = Classify(codeOnly("x")) })
}
