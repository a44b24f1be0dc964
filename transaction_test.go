package jitterretry

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// Shapes a TransactionCanceledException may come in: the SDK's (pointers
// to a struct whose reasons hold a *string Code), and others a user's or a
// test's error type may have. None may panic or loop.
type (
	reasonPtr       struct{ Code *string }
	reasonStr       struct{ Code string }
	reasonInt       struct{ Code int }
	sdkShaped       struct{ CancellationReasons []reasonPtr }
	stringShaped    struct{ CancellationReasons []*reasonStr }
	intShaped       struct{ CancellationReasons []reasonInt }
	notASlice       struct{ CancellationReasons string }
	embeddedReasons struct{ sdkShaped }
	selfPointer     *selfPointer
	selfShaped      struct{ CancellationReasons []selfPointer }
	stringReasons   struct{ CancellationReasons []string }
	nilEmbedded     struct{ *sdkShaped }
	// codeOnly is a test double with the code and no struct at all.
	codeOnly string
)

func (codeOnly) Error() string     { return "cancelled" }
func (codeOnly) ErrorCode() string { return transactionCanceledCode }

func (*sdkShaped) Error() string           { return "cancelled" }
func (*sdkShaped) ErrorCode() string       { return transactionCanceledCode }
func (stringShaped) Error() string         { return "cancelled" }
func (stringShaped) ErrorCode() string     { return transactionCanceledCode }
func (intShaped) Error() string            { return "cancelled" }
func (intShaped) ErrorCode() string        { return transactionCanceledCode }
func (notASlice) Error() string            { return "cancelled" }
func (notASlice) ErrorCode() string        { return transactionCanceledCode }
func (*embeddedReasons) Error() string     { return "cancelled" }
func (*embeddedReasons) ErrorCode() string { return transactionCanceledCode }
func (selfShaped) Error() string           { return "cancelled" }
func (selfShaped) ErrorCode() string       { return transactionCanceledCode }
func (stringReasons) Error() string        { return "cancelled" }
func (stringReasons) ErrorCode() string    { return transactionCanceledCode }
func (nilEmbedded) Error() string          { return "cancelled" }
func (nilEmbedded) ErrorCode() string      { return transactionCanceledCode }

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
		"conflicts":                {&sdkShaped{codes("None", "ConditionalCheckFailed", "TransactionConflict")}, cancelledByConflicts},
		"throttles":                {&sdkShaped{codes("ThrottlingError", "None", "ProvisionedThroughputExceeded")}, cancelledByThrottles},
		"races and throttles":      {&sdkShaped{codes("ConditionalCheckFailed", "ThrottlingError")}, cancelledFinally},
		"a validation error":       {&sdkShaped{codes("ConditionalCheckFailed", "ValidationError")}, cancelledFinally},
		"none at all":              {&sdkShaped{codes("None", "None")}, cancelledFinally},
		"no reasons":               {&sdkShaped{}, cancelledFinally},
		"a nil code":               {&sdkShaped{[]reasonPtr{{nil}}}, cancelledFinally},
		"string codes":             {stringShaped{[]*reasonStr{{"TransactionConflict"}, nil}}, cancelledFinally},
		"string codes, all set":    {stringShaped{[]*reasonStr{{"TransactionConflict"}, {"None"}}}, cancelledByConflicts},
		"int codes":                {intShaped{[]reasonInt{{1}}}, cancelledFinally},
		"not a slice":              {notASlice{"ConditionalCheckFailed"}, cancelledFinally},
		"embedded":                 {&embeddedReasons{sdkShaped{codes("TransactionConflict")}}, cancelledByConflicts},
		"a nil pointer":            {(*sdkShaped)(nil), cancelledFinally},
		"a pointer to itself":      {selfShaped{[]selfPointer{loop}}, cancelledFinally},
		"an error with no reasons": {assert.AnError, cancelledFinally},
		"reasons that are strings": {stringReasons{[]string{"TransactionConflict"}}, cancelledFinally},
		"a nil embedded pointer":   {nilEmbedded{}, cancelledFinally},
		"no struct at all":         {codeOnly("x"), cancelledFinally},
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
