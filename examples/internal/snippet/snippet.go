// Package snippet holds the README's jitterretry.Do example, so that a test
// runs it exactly as the README shows it: snippet_test.go checks that the
// README holds the code between the markers below verbatim, and runs it with
// 32 writers on one item while responses are lost.
package snippet

// README: begin
import (
	"context"
	"errors"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/jitterretry/jitterretry"
)

// Increment adds one to the counter n of item key, exactly once however often
// its requests are retried; seq counts writer's increments from 1 (an item
// without writer's seq reads as 0, as if that one landed). The version v
// makes the write conditional, so no update is lost, and the
// item keeps each writer's last seq, so a retry whose earlier write landed
// (its response was lost) finds it there instead of adding one again.
func Increment(ctx context.Context, client *dynamodb.Client, retryer *jitterretry.Retryer,
	table, key, writer string, seq int64) error {
	k := map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: key}}
	if seq < 1 {
		return errors.New("increment: seq counts from 1")
	}
	mine := "seq_" + writer
	var item map[string]types.AttributeValue // as last seen; nil: read it
	return jitterretry.Do(ctx, retryer, func(ctx context.Context) error {
		if item == nil { // the first call, or the server ignored ALL_OLD
			out, err := client.GetItem(ctx, &dynamodb.GetItemInput{
				TableName: &table, Key: k, ConsistentRead: aws.Bool(true),
			})
			if err != nil {
				return err // the SDK has retried throttles and 5xx already
			}
			item = out.Item
		}
		if number(item, mine) >= seq {
			return nil // an earlier call's write landed, its response was lost
		}
		seen := number(item, "v")
		_, err := client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName: &table, Key: k,
			UpdateExpression:         aws.String("ADD n :one, v :one SET #mine = :seq"),
			ConditionExpression:      aws.String("attribute_not_exists(v) OR v = :seen"),
			ExpressionAttributeNames: map[string]string{"#mine": mine},
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":one": num(1), ":seq": num(seq), ":seen": num(seen),
			},
			// On a conflict, send back the item as the write found it.
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		})
		var failed *types.ConditionalCheckFailedException
		if !errors.As(err, &failed) {
			return err // nil, or an error the SDK's retries did not mend
		}
		if item = failed.Item; number(item, mine) >= seq {
			return nil // the SDK retried a write that had landed
		}
		// Another writer won: tell Do the version we wrote against and the
		// one the item has (0, unknown, if the server ignored ALL_OLD), so it
		// backs off for the contention it sees, and call again.
		return jitterretry.Conflict(err, seen, number(item, "v"))
	})
}

// number returns item's number attribute name, 0 when it has none.
func number(item map[string]types.AttributeValue, name string) int64 {
	n, _ := item[name].(*types.AttributeValueMemberN)
	if n == nil {
		return 0
	}
	v, _ := strconv.ParseInt(n.Value, 10, 64)
	return v
}

func num(v int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(v, 10)}
}

// README: end
