package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/metrics"
	"github.com/truora/minidyn/server"
)

// backend is the DynamoDB-compatible server the example talks to.
type backend struct {
	// URL is the server's endpoint.
	URL string
	// Name describes it in the report.
	Name string
	// Embedded is true for the in-process minidyn server, which sends no
	// CRC32 header.
	Embedded bool
	// AWS is the configuration clients are built from.
	AWS   aws.Config
	close func()
}

func (b *backend) Close() {
	if b.close != nil {
		b.close()
	}
}

// newBackend starts the embedded server when endpoint is empty, and
// otherwise points at endpoint.
func newBackend(ctx context.Context, endpoint string) (*backend, error) {
	b := &backend{URL: endpoint, Name: endpoint}
	if endpoint == "" {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("listen on loopback: %w", err)
		}
		srv := &http.Server{Handler: server.NewServer(), ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = srv.Serve(ln) }()
		b.URL = "http://" + ln.Addr().String()
		b.Name = "embedded minidyn at " + b.URL
		b.Embedded = true
		b.close = func() { _ = srv.Close() }
	}
	var opts []func(*config.LoadOptions) error
	if isLoopback(b.URL) && os.Getenv("AWS_ACCESS_KEY_ID") == "" {
		// Local servers want some SigV4 credentials, any will do.
		opts = append(opts, config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("local", "local", "")))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		b.Close()
		return nil, fmt.Errorf("load AWS configuration: %w", err)
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	b.AWS = cfg
	return b, nil
}

// client returns a DynamoDB client for endpoint with retryer, recording
// its metrics into meters; a nil retryer keeps the SDK's default, nil
// meters record nothing.
func (b *backend) client(endpoint string, retryer aws.Retryer, meters metrics.MeterProvider) *dynamodb.Client {
	return dynamodb.NewFromConfig(b.AWS, func(o *dynamodb.Options) {
		o.BaseEndpoint = aws.String(endpoint)
		o.DisableValidateResponseChecksum = b.Embedded
		if retryer != nil {
			o.Retryer = retryer
		}
		if meters != nil {
			o.MeterProvider = meters
		}
	})
}

func isLoopback(endpoint string) bool {
	u, err := url.Parse(endpoint)
	if err != nil {
		return false
	}
	host := u.Hostname()
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
