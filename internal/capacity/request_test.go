package capacity

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseRequest(t *testing.T) {
	cases := map[string]struct {
		target  string
		body    string
		want    Request
		wantErr bool
	}{
		"update item": {
			target: "DynamoDB_20120810.UpdateItem",
			body:   `{"TableName":"hot","Key":{"pk":{"S":"a"}}}`,
			want:   Request{Operation: "UpdateItem", Kind: Write, Costs: []Cost{{"hot", 1}}},
		},
		"get item": {
			target: "DynamoDB_20120810.GetItem",
			body:   `{"TableName":"hot"}`,
			want:   Request{Operation: "GetItem", Kind: Read, Costs: []Cost{{"hot", 1}}},
		},
		"batch write counts each write request of each table": {
			target: "DynamoDB_20120810.BatchWriteItem",
			body:   `{"RequestItems":{"b":[{"PutRequest":{}}],"a":[{"PutRequest":{}},{"DeleteRequest":{}}]}}`,
			want:   Request{Operation: "BatchWriteItem", Kind: Write, Costs: []Cost{{"a", 2}, {"b", 1}}},
		},
		"batch get counts keys": {
			target: "DynamoDB_20120810.BatchGetItem",
			body:   `{"RequestItems":{"a":{"Keys":[{},{},{}]}}}`,
			want:   Request{Operation: "BatchGetItem", Kind: Read, Costs: []Cost{{"a", 3}}},
		},
		"transactions cost two per item": {
			target: "DynamoDB_20120810.TransactWriteItems",
			body: `{"TransactItems":[{"Update":{"TableName":"a"}},{"ConditionCheck":{"TableName":"a"}},` +
				`{"Put":{"TableName":"b"}}]}`,
			want: Request{Operation: "TransactWriteItems", Kind: Write, Costs: []Cost{{"a", 4}, {"b", 2}}},
		},
		"transact get": {
			target: "DynamoDB_20120810.TransactGetItems",
			body:   `{"TransactItems":[{"Get":{"TableName":"a"}}]}`,
			want:   Request{Operation: "TransactGetItems", Kind: Read, Costs: []Cost{{"a", 2}}},
		},
		"control plane is unmetered whatever its body": {
			target: "DynamoDB_20120810.CreateTable",
			body:   `not json`,
			want:   Request{Operation: "CreateTable", Kind: Unmetered},
		},
		"missing target is unmetered": {
			body: `{"TableName":"hot"}`,
			want: Request{Kind: Unmetered},
		},
		"metered with a bad body": {
			target:  "DynamoDB_20120810.PutItem",
			body:    `{`,
			want:    Request{Operation: "PutItem", Kind: Write},
			wantErr: true,
		},
		"metered without a table": {
			target:  "DynamoDB_20120810.PutItem",
			body:    `{"Item":{}}`,
			want:    Request{Operation: "PutItem", Kind: Write},
			wantErr: true,
		},
		"empty batch write of one table still costs a unit": {
			target: "DynamoDB_20120810.BatchWriteItem",
			body:   `{"RequestItems":{"a":[]}}`,
			want:   Request{Operation: "BatchWriteItem", Kind: Write, Costs: []Cost{{"a", 1}}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := ParseRequest(tc.target, []byte(tc.body))
			if tc.wantErr {
				require.Error(t, err)
			} else {
				require.NoError(t, err)
			}
			assert.Equal(t, tc.want, got, "expect %+v, got %+v", tc.want, got)
		})
	}
}

func TestBurstOf(t *testing.T) {
	cases := map[string]struct {
		units, seconds float64
		want           int
	}{
		"zero admits nothing":          {0, 1, 0},
		"fraction rounds up to one":    {0.2, 1, 1},
		"one second of capacity":       {100, 1, 100},
		"ceil of a fractional product": {10, 0.25, 3},
		"unlimited saturates":          {Unlimited, 1, 1<<31 - 1},
		"huge saturates":               {1e300, 1, 1<<31 - 1},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, tc.want, burstOf(tc.units, tc.seconds))
		})
	}
}

// FuzzParseRequest checks that any body parses without panicking and that
// a metered request that parses names each table once, sorted, with a
// positive cost.
func FuzzParseRequest(f *testing.F) {
	f.Add("DynamoDB_20120810.UpdateItem", `{"TableName":"hot"}`)
	f.Add("DynamoDB_20120810.BatchWriteItem", `{"RequestItems":{"a":[{}],"b":[]}}`)
	f.Add("DynamoDB_20120810.BatchGetItem", `{"RequestItems":{"a":{"Keys":[{}]}}}`)
	f.Add("DynamoDB_20120810.TransactWriteItems", `{"TransactItems":[{"Put":{"TableName":"a"}},{"Update":{"TableName":""}}]}`)
	f.Add("DynamoDB_20120810.CreateTable", `{`)
	f.Fuzz(func(t *testing.T, target, body string) {
		req, err := ParseRequest(target, []byte(body))
		if err != nil || req.Kind == Unmetered {
			return
		}
		require.NotEmpty(t, req.Costs)
		for i, c := range req.Costs {
			require.NotEmpty(t, c.Table)
			require.Positive(t, c.Units)
			if i > 0 {
				require.Less(t, req.Costs[i-1].Table, c.Table)
			}
		}
	})
}
