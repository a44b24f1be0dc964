package sim

import (
	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/jitterretry/jitterretry"
	"github.com/jitterretry/jitterretry/delayers"
)

// retryerOursPrefix starts the names of jitterretry.Retryer rows.
const retryerOursPrefix = "jitterretry-"

// ourRetryers returns one jitterretry.Retryer row per jitter strategy, each
// with the library's defaults (the SDK's 2.1 numbers), a seeded Source and
// FailFastOnEmptyBudget.
func ourRetryers() []Retryer {
	var rs []Retryer
	for _, st := range delayers.Strategies() {
		rs = append(rs, Retryer{
			Name:         retryerOursPrefix + string(st),
			Description:  "jitterretry.New with Jitter " + string(st) + ", fail fast on an empty budget, defaults otherwise",
			Reproducible: true,
			New: func(src delayers.Source) (aws.RetryerV2, error) {
				r := jitterretry.New(func(o *jitterretry.Options) {
					o.Jitter = st
					o.Source = src
					// The simulator runs in virtual time: the retryer's
					// wall-clock wait before an empty-budget error would
					// block it, so these rows fail fast, as the SDK does.
					o.FailFastOnEmptyBudget = true
				})
				return r, r.Err()
			},
		})
	}
	return rs
}
