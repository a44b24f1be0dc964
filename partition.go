package jitterretry

// This file owns the partition keys callers choose from: by operation, or by
// a key carried in the context.

import (
	"context"

	awsmiddle "github.com/aws/aws-sdk-go-v2/aws/middleware"
)

// PartitionByOperation is an Options.PartitionKey that gives each service
// operation its own retry token bucket, such as "DynamoDB.PutItem". Outside
// an SDK operation (in Do, say), or for a nil ctx, it returns "", the shared
// partition.
func PartitionByOperation(ctx context.Context) string {
	if ctx == nil {
		return ""
	}
	service, op := awsmiddle.GetServiceID(ctx), awsmiddle.GetOperationName(ctx)
	if service == "" && op == "" {
		return ""
	}
	return service + "." + op
}

type partitionKey struct{}

// WithPartition returns a context whose operations draw retry tokens from the
// bucket of key (a table name, a tenant) when the Retryer's PartitionKey is
// PartitionFromContext. See Options.PartitionKey for how many keys are kept.
// An empty key is the shared partition (""), not PartitionFromContext's
// fallback to the operation. A nil ctx is taken as context.Background(), as
// the retryer takes it.
func WithPartition(ctx context.Context, key string) context.Context {
	if ctx == nil {
		ctx = context.Background()
	}
	return context.WithValue(ctx, partitionKey{}, key)
}

// PartitionFromContext is an Options.PartitionKey that uses the key set with
// WithPartition, or the service operation (as PartitionByOperation) when none
// was set; "" for a nil ctx.
func PartitionFromContext(ctx context.Context) string {
	if ctx == nil {
		return ""
	}
	if k, ok := ctx.Value(partitionKey{}).(string); ok {
		return k
	}
	return PartitionByOperation(ctx)
}
