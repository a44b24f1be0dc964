// Command quickstart is the README's Quick start, whole: the snippet
// test (examples/internal/snippet) checks that the README shows this file
// from its package clause on, verbatim, so that the Quick start compiles.
// Run it against a local DynamoDB-compatible server as the README says.
package main

import (
	"context"
	"fmt"
	"log"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/jitterretry/jitterretry"
	"github.com/jitterretry/jitterretry/delayers"
)

func main() {
	ctx := context.Background()
	retryer := jitterretry.New(jitterretry.DynamoDB, func(o *jitterretry.Options) {
		o.Jitter = delayers.StrategyFull // the default; or Equal, Decorrelated, Exponential
	})
	if err := retryer.Err(); err != nil {
		log.Fatal(err) // an *OptionsError: bad options are found at startup
	}
	cfg, err := config.LoadDefaultConfig(ctx,
		config.WithRetryer(func() aws.Retryer { return retryer }),
	)
	if err != nil {
		log.Fatal(err)
	}
	client := dynamodb.NewFromConfig(cfg)

	out, err := client.ListTables(ctx, &dynamodb.ListTablesInput{}) // retried as the SDK would, with full jitter
	if err != nil {
		// A refusal of the retryer's (budget, deadline) is a
		// *jitterretry.GiveUpError that says why; attempts run out are the
		// SDK's own *retry.MaxAttemptsError, as with retry.NewStandard().
		log.Fatal(err)
	}
	fmt.Println(out.TableNames, retryer.Remaining())
}
