// Package clienttest holds the library's tests that need a real DynamoDB
// client: a dynamodb.Client over HTTP to a local server in DynamoDB's wire
// format, with the retryer in its retry middleware. They live in a module
// of their own so that the library's go.mod requires no service client.
package clienttest
