package occ

import (
	"fmt"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// The item schema: a string partition key, a counter, a version, and one
// token attribute per worker that has written the item.
const (
	keyAttr     = "pk"
	counterAttr = "n"
	versionAttr = "v"
	tokenPrefix = "w"
)

// ItemKey returns the partition key of hot item i.
func ItemKey(i int) string { return fmt.Sprintf("hot-%02d", i) }

func keyOf(i int) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{keyAttr: &types.AttributeValueMemberS{Value: ItemKey(i)}}
}

func tokenAttr(worker int) string { return tokenPrefix + strconv.Itoa(worker) }

// item is the part of a stored item the workload reads.
type item struct {
	counter, version int64
	attrs            map[string]types.AttributeValue
}

func parseItem(attrs map[string]types.AttributeValue) (item, error) {
	it := item{attrs: attrs}
	var err error
	if it.counter, err = number(attrs, counterAttr); err != nil {
		return it, err
	}
	it.version, err = number(attrs, versionAttr)
	return it, err
}

// token returns the sequence number of worker's last increment applied to
// the item, 0 when it has none.
func (it item) token(worker int) int64 {
	n, err := number(it.attrs, tokenAttr(worker))
	if err != nil {
		return 0
	}
	return n
}

func number(attrs map[string]types.AttributeValue, name string) (int64, error) {
	av, ok := attrs[name].(*types.AttributeValueMemberN)
	if !ok {
		return 0, fmt.Errorf("occ: item has no number attribute %q", name)
	}
	n, err := strconv.ParseInt(av.Value, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("occ: attribute %q: %w", name, err)
	}
	return n, nil
}

func num(n int64) *types.AttributeValueMemberN {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

// increment is the conditional write shared by UpdateItem and
// TransactWriteItems: add one to the counter and the version, and record the
// worker's token, if the version is still the one read.
type increment struct {
	table   string
	item    int
	worker  int
	seq     int64
	version int64
}

const (
	updateExpr    = "SET #n = #n + :one, #v = #v + :one, #w = :seq"
	conditionExpr = "#v = :expected"
)

func (in increment) names() map[string]string {
	return map[string]string{"#n": counterAttr, "#v": versionAttr, "#w": tokenAttr(in.worker)}
}

func (in increment) values() map[string]types.AttributeValue {
	return map[string]types.AttributeValue{":one": num(1), ":seq": num(in.seq), ":expected": num(in.version)}
}

func (in increment) updateItem() *dynamodb.UpdateItemInput {
	return &dynamodb.UpdateItemInput{
		TableName:                           aws.String(in.table),
		Key:                                 keyOf(in.item),
		UpdateExpression:                    aws.String(updateExpr),
		ConditionExpression:                 aws.String(conditionExpr),
		ExpressionAttributeNames:            in.names(),
		ExpressionAttributeValues:           in.values(),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
}

func (in increment) transactWriteItems() *dynamodb.TransactWriteItemsInput {
	return &dynamodb.TransactWriteItemsInput{
		TransactItems: []types.TransactWriteItem{{Update: &types.Update{
			TableName:                           aws.String(in.table),
			Key:                                 keyOf(in.item),
			UpdateExpression:                    aws.String(updateExpr),
			ConditionExpression:                 aws.String(conditionExpr),
			ExpressionAttributeNames:            in.names(),
			ExpressionAttributeValues:           in.values(),
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		}}},
	}
}
