// Package capacity is a loopback reverse proxy that models DynamoDB
// provisioned capacity in front of any DynamoDB-compatible server (minidyn,
// dynalite, DynamoDB Local), so that throttling in tests and examples is real
// HTTP in DynamoDB's wire format rather than a mocked error.
//
// Each table has a read and a write token bucket (golang.org/x/time/rate),
// refilled at the table's capacity in units per second. A request that finds
// too few tokens is answered with ProvisionedThroughputExceededException
// exactly as DynamoDB sends it (HTTP 400, x-amzn-ErrorType header, __type
// body, X-Amz-Crc32) and never reaches the server. The table is parsed from
// the JSON request (TableName, or the keys of RequestItems, or each entry of
// TransactItems) and the operation from X-Amz-Target.
//
// The model is deliberately simple: every item an operation touches costs one
// unit, whatever its size; transactions cost two per item, as in DynamoDB; a
// Query or a Scan costs one read unit; a BatchWriteItem or BatchGetItem is
// admitted or throttled whole (DynamoDB would return part of it as
// UnprocessedItems). Control-plane operations (CreateTable, DescribeTable, ...)
// are never metered nor failed.
//
// The proxy can also inject HTTP 500 InternalServerError into data-plane
// requests, either before forwarding (the request had no effect) or after it
// (the write landed but its response is lost: the ambiguous failure that
// optimistic-locking loops must survive), throttle requests at random
// whatever the capacity (throttles independent of load), change capacity at
// run time for drop-then-recover scenarios, and count what it did for
// reports.
package capacity
