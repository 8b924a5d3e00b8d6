package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/outboxd/outbox/kafka"
	"github.com/outboxd/outbox/outbox"
	"github.com/outboxd/outbox/outbox/httpapi"
)

// In Kafka group mode, POST /v1/events does not store the events in this
// instance's files: it produces them to the ingest topic, and the owner of
// each partition ingests them as it ingests any record. The local store
// (--db) receives no new events then; it is still opened and served: it
// validates the events POSTed (it has the configuration and the sink every
// partition store has, so a bad event is a 400 here rather than a dead
// letter on its owner), and it delivers, lists and replays what an earlier
// version, or single-machine mode, left in it.

// produceRetryAfter is the Retry-After of a 503 answered because the
// brokers did not acknowledge a POST's events.
const produceRetryAfter = time.Second

// producingBackend is the API's Backend in group mode: the view over the
// local and partition stores for everything but Enqueue, which validates
// against the local outbox and produces.
type producingBackend struct {
	httpapi.Backend
	local *outbox.Outbox
	p     *kafka.Producer
}

// Enqueue validates events as the partition stores will, produces them, and
// returns their IDs once the brokers acknowledged every one. A produce that
// fails is an *httpapi.UnavailableError (503) with the reason.
func (b producingBackend) Enqueue(ctx context.Context, events ...outbox.Event) ([]string, error) {
	if err := b.local.Validate(events...); err != nil {
		return nil, err
	}
	ids, err := b.p.Produce(ctx, events...)
	var pe *kafka.ProduceError
	if errors.As(err, &pe) {
		return nil, &httpapi.UnavailableError{Reason: produceRefusal(pe), RetryAfter: produceRetryAfter, Err: err}
	}
	return ids, err
}

// produceRefusal is the 503's message for a produce that failed.
func produceRefusal(pe *kafka.ProduceError) string {
	where := "topic " + pe.Topic
	if pe.Partition >= 0 {
		where = fmt.Sprintf("topic %s partition %d", pe.Topic, pe.Partition)
	}
	msg := fmt.Sprintf("Kafka did not acknowledge the events (%s): %s; nothing was accepted, send them again", where, pe.Reason)
	if pe.Acknowledged > 0 {
		msg += fmt.Sprintf(" (%d of them, on other partitions, were acknowledged and will be delivered: events with ids are not delivered twice when sent again, events without get new ids)",
			pe.Acknowledged)
	}
	return msg
}

// startProducer makes the producer of POST /v1/events in group mode (with
// an ingest topic); otherwise it does nothing.
func (s *server) startProducer() error {
	if s.cfg.Kafka.Topic == "" {
		return nil
	}
	p, err := kafka.NewProducer(s.cfg.Kafka, s.log.With("component", "kafka"))
	if err != nil {
		return err
	}
	s.producer = p
	return nil
}

// backend is what the API serves in group mode: the view v over the
// stores, producing POSTed events when there is a producer.
func (s *server) backend(v httpapi.Backend) httpapi.Backend {
	if s.producer == nil {
		return v
	}
	return producingBackend{Backend: v, local: s.o, p: s.producer}
}
