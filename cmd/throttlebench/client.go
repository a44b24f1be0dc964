package main

import (
	"context"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/metrics"
)

// client is one client of a run: its own retryer, connections and
// dynamodb.Client, as a separate process of a fleet would have.
type client struct {
	ddb       *dynamodb.Client
	retryer   aws.Retryer // nil for the client's own default
	transport *http.Transport
}

// newClient returns a client of mode m for k goroutines, talking to
// endpoint; when sent is not nil it counts the requests the client sends.
// When meter is not nil and m is one of ours, the retryer records into
// meter; the dynamodb.Client records nothing either way, so that only the
// retryer's instruments cost.
func newClient(endpoint string, m mode, k int, sent *atomic.Int64, meter metrics.MeterProvider) client {
	c := client{transport: clientTransport(k)}
	switch {
	case meter != nil && m.metered != nil:
		c.retryer = m.metered(meter)
	case m.retryer != nil:
		c.retryer = m.retryer()
	}
	var transport http.RoundTripper = c.transport
	if sent != nil {
		transport = countingTransport{next: c.transport, sent: sent}
	}
	c.ddb = dynamodb.New(dynamodb.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(endpoint),
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: "throttlebench", SecretAccessKey: "throttlebench", Source: "throttlebench"}, nil
		}),
		HTTPClient: &http.Client{Transport: transport},
		Retryer:    c.retryer, // nil: the client's own default
	})
	return c
}

// clientTransport returns the HTTP transport of one run's client: enough idle
// connections for every goroutine to keep its own, so that no run measures
// connection churn.
func clientTransport(k int) *http.Transport {
	return &http.Transport{
		DialContext:           (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:          0, // no limit but the per-host one
		MaxIdleConnsPerHost:   max(k, 2),
		IdleConnTimeout:       90 * time.Second,
		ResponseHeaderTimeout: 30 * time.Second,
	}
}

// countingTransport counts the requests it sends.
type countingTransport struct {
	next http.RoundTripper
	sent *atomic.Int64
}

func (t countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	t.sent.Add(1)
	return t.next.RoundTrip(req)
}
