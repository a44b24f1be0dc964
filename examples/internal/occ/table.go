package occ

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Setup creates table if it does not exist, with the given provisioned
// capacity (for the record: the capacity proxy enforces it), waits until it
// is usable, and puts items hot items with counter and version 0, replacing
// any earlier ones. admin should reach the server directly, not through the
// capacity proxy.
func Setup(ctx context.Context, admin *dynamodb.Client, table string, items int, read, write int64) error {
	_, err := admin.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(table),
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String(keyAttr), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String(keyAttr), KeyType: types.KeyTypeHash}},
		BillingMode:          types.BillingModeProvisioned,
		ProvisionedThroughput: &types.ProvisionedThroughput{
			ReadCapacityUnits:  aws.Int64(max(read, 1)),
			WriteCapacityUnits: aws.Int64(max(write, 1)),
		},
	})
	var inUse *types.ResourceInUseException
	if err != nil && !errors.As(err, &inUse) {
		return fmt.Errorf("occ: create table %s: %w", table, err)
	}
	if err := waitActive(ctx, admin, table); err != nil {
		return err
	}
	for i := range items {
		_, err := admin.PutItem(ctx, &dynamodb.PutItemInput{
			TableName: aws.String(table),
			Item: map[string]types.AttributeValue{
				keyAttr:     &types.AttributeValueMemberS{Value: ItemKey(i)},
				counterAttr: num(0),
				versionAttr: num(0),
			},
		})
		if err != nil {
			return fmt.Errorf("occ: put item %s: %w", ItemKey(i), err)
		}
	}
	return nil
}

// waitActive polls DescribeTable until the table is ACTIVE. A server that
// reports no TableStatus at all (minidyn) counts as ready: the SDK's table
// waiter would wait for ever there.
func waitActive(ctx context.Context, admin *dynamodb.Client, table string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for {
		out, err := admin.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
		if err != nil {
			return fmt.Errorf("occ: describe table %s: %w", table, err)
		}
		if out.Table == nil || out.Table.TableStatus == "" || out.Table.TableStatus == types.TableStatusActive {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("occ: table %s still %s: %w", table, out.Table.TableStatus, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Teardown deletes table; a missing table is not an error.
func Teardown(ctx context.Context, admin *dynamodb.Client, table string) error {
	_, err := admin.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(table)})
	var nf *types.ResourceNotFoundException
	if err != nil && !errors.As(err, &nf) {
		return fmt.Errorf("occ: delete table %s: %w", table, err)
	}
	return nil
}
