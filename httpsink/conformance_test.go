package httpsink_test

import (
	"testing"
	"time"

	"github.com/outboxd/outbox/httpsink"
	"github.com/outboxd/outbox/internal/sinktest"
	"github.com/outboxd/outbox/outbox"
)

// The HTTP sink passes the behaviour suite every sink runs.
func TestSinkConformance(t *testing.T) {
	sinktest.Run(t, func(t *testing.T, url string) outbox.Sink {
		return newSink(t, httpsink.Config{
			Endpoints:         []httpsink.Endpoint{{Name: sinktest.Destination, URL: url, AllowPrivate: true}},
			InlineRetries:     -1, // the suite checks the outcome of one request
			InlineRetryBudget: time.Second,
		})
	})
}
