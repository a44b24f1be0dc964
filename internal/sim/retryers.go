package sim

import (
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"

	"github.com/jitterretry/jitterretry/delayers"
)

// Retryer makes the retryers of the throttled scenario, one per client.
type Retryer struct {
	// Name is what the -strategies flag and the output call it.
	Name string
	// Description says in one line what it is.
	Description string
	// Reproducible is false when the retryer draws randomness the seed does
	// not control.
	Reproducible bool
	// New returns one client's retryer; its seeded randomness, if it takes
	// any, comes from src, which belongs to that client alone.
	New func(src delayers.Source) (aws.RetryerV2, error)
}

// Names of the throttled scenario's retryers.
const (
	RetryerNone             = "none"
	RetryerSDK              = "sdk"
	RetryerSDKNoBucket      = "sdk-nobucket"
	retryerSDKDelayerPrefix = "sdk+"
)

// Retryers returns every retryer the throttled scenario knows, the default
// ones first (see DefaultRetryerNames).
func Retryers() []Retryer {
	rs := []Retryer{
		{
			Name: RetryerNone, Description: "aws.NopRetryer: one attempt, no retries", Reproducible: true,
			New: func(delayers.Source) (aws.RetryerV2, error) { return aws.NopRetryer{}, nil },
		},
		{
			Name: RetryerSDK, Description: "retry.NewStandard() with its defaults (crypto/rand: not seedable)",
			New: func(delayers.Source) (aws.RetryerV2, error) { return retry.NewStandard(), nil },
		},
		{
			Name: RetryerSDKNoBucket, Description: "retry.NewStandard() without its retry token bucket (ratelimit.None)",
			New: func(delayers.Source) (aws.RetryerV2, error) {
				return retry.NewStandard(func(o *retry.StandardOptions) { o.RateLimiter = ratelimit.None }), nil
			},
		},
	}
	rs = append(rs, ourRetryers()...)
	for _, st := range delayers.Strategies() {
		rs = append(rs, Retryer{
			Name:         retryerSDKDelayerPrefix + string(st),
			Description:  "retry.NewStandard() with delayers " + string(st) + " as its Backoff, default numbers",
			Reproducible: true,
			New: func(src delayers.Source) (aws.RetryerV2, error) {
				d, err := delayers.New(st, func(o *delayers.Options) { o.Source = src })
				if err != nil {
					return nil, err
				}
				return retry.NewStandard(func(o *retry.StandardOptions) { o.Backoff = d }), nil
			},
		})
	}
	return rs
}

// DefaultRetryerNames lists the retryers the throttled scenario runs when
// none are named: no retries, the SDK's standard retryer with and without its
// bucket, and ours.
func DefaultRetryerNames() []string {
	names := []string{RetryerNone, RetryerSDK, RetryerSDKNoBucket}
	for _, r := range ourRetryers() {
		names = append(names, r.Name)
	}
	return names
}

// RetryerNames returns the names of Retryers, in order.
func RetryerNames() []string {
	var names []string
	for _, r := range Retryers() {
		names = append(names, r.Name)
	}
	return names
}

// LookupRetryer returns the retryer called name, or an error listing the
// valid names.
func LookupRetryer(name string) (Retryer, error) {
	for _, r := range Retryers() {
		if r.Name == name {
			return r, nil
		}
	}
	return Retryer{}, fmt.Errorf("sim: unknown retryer %q, want one of %s", name, strings.Join(RetryerNames(), ","))
}
