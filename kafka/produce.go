package kafka

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/google/uuid"
	kafkago "github.com/segmentio/kafka-go"
	"go.opentelemetry.io/otel/propagation"

	"github.com/outboxd/outbox/outbox"
)

// ErrProduce is matched by every *ProduceError.
var ErrProduce = errors.New("kafka: produce not acknowledged")

// ProduceError reports events of a Producer.Produce call that the brokers
// did not acknowledge: they refused the produce (the topic is gone, the
// client is not authorised, a record is too large...), could not be
// reached, or did not answer within Config.ProduceTimeout.
//
// Events of the call on other partitions may have been acknowledged
// (Acknowledged counts them): they are ingested by their owners. Events
// not acknowledged may still have been written (a request whose answer was
// lost): sending the same events again, with the same IDs, is safe, since
// their owners drop a repeated ID as a duplicate.
type ProduceError struct {
	// Topic is the topic produced to.
	Topic string
	// Partition is the first partition whose events were not acknowledged,
	// or -1 when the topic's partitions could not be found.
	Partition int
	// Events is the number of events of the call not acknowledged.
	Events int
	// Acknowledged is the number of events of the call the brokers
	// acknowledged.
	Acknowledged int
	// Reason says what went wrong, in words for the operator and the
	// API's client (no credentials).
	Reason string
	// Err is the underlying error.
	Err error
}

// Error implements error.
func (e *ProduceError) Error() string {
	where := e.Topic
	if e.Partition >= 0 {
		where = fmt.Sprintf("%s partition %d", e.Topic, e.Partition)
	}
	return fmt.Sprintf("kafka: producing %d events to topic %s: %s", e.Events, where, e.Reason)
}

// Unwrap returns ErrProduce and Err.
func (e *ProduceError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrProduce}
	}
	return []error{ErrProduce, e.Err}
}

// Producer produces events to a group's ingest topic (Config.Topic) as
// records the group's ingest maps back to the same events: outboxd's
// POST /v1/events in group mode. Every event gets its final ID before it is
// produced (a UUIDv7 when it has none), carried in the ID header, so the
// partition's owner stores it under that ID, and a repeated ID is a
// duplicate there as for any record.
//
// The events of one call are partitioned by KeyBalancer (Kafka's default
// partitioner on the key; by ID without a key) and produced as one produce
// request per partition, concurrently, each acknowledged by all in-sync
// replicas (acks=all). A call returns nil only once every request was
// acknowledged. Retriable broker errors (a leader moving, a broker
// restarting, a connection refused) are retried with the Config's backoff
// until Config.ProduceTimeout; anything else (an unknown or unauthorised
// topic after its retries, a record too large) ends the call with a
// *ProduceError.
//
// A Producer is safe for concurrent use. Close releases its connections.
type Producer struct {
	cfg    Config
	m      mapper
	log    *slog.Logger
	conns  *conns
	client *kafkago.Client
	bal    KeyBalancer

	produced atomic.Uint64
	refused  atomic.Uint64
	failing  atomic.Bool
	closed   atomic.Bool
}

// NewProducer validates cfg, which must name the ingest Topic, and returns a
// Producer for it. It does not contact the brokers: the first Produce does.
// logger may be nil (logs are discarded).
func NewProducer(cfg Config, logger *slog.Logger) (*Producer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.WithDefaults()
	if cfg.Topic == "" {
		return nil, &ConfigError{Field: "Topic", Reason: "a Producer needs the ingest topic"}
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	cn, err := cfg.conns()
	if err != nil {
		return nil, err
	}
	return &Producer{
		cfg: cfg, m: newMapper(cfg), log: logger, conns: cn,
		client: &kafkago.Client{Addr: kafkago.TCP(cfg.brokers()...), Transport: cn.transport},
		bal:    KeyBalancer{IDHeader: cfg.IDHeader},
	}, nil
}

// Close releases the Producer's connections. Produce calls under way fail;
// Close is safe to call twice.
func (p *Producer) Close() error {
	p.closed.Store(true)
	p.conns.close()
	return nil
}

// ProducerStats are a Producer's counters since it was made.
type ProducerStats struct {
	// Produced is the number of events the brokers acknowledged.
	Produced uint64
	// Refused is the number of events of calls that failed with a
	// *ProduceError and were not acknowledged.
	Refused uint64
}

// Stats returns the Producer's counters.
func (p *Producer) Stats() ProducerStats {
	return ProducerStats{Produced: p.produced.Load(), Refused: p.refused.Load()}
}

// Produce gives every event without an ID a UUIDv7, encodes the events as
// records, and produces them; it returns their IDs in order once the
// brokers acknowledged every one. An event without a TraceParent takes the
// trace context of ctx's span, as outbox.Outbox.Enqueue does.
//
// The events must be valid for the owners' outboxes (check them with
// outbox.Outbox.Validate on an outbox configured as the owners are): an
// event that an owner refuses becomes a dead letter there. An event that
// cannot be carried in a record (see the Config's header names) is
// refused with a *outbox.ValidationError and nothing is produced. A
// failure to produce is a *ProduceError; ctx ending first is ctx's error
// in one.
func (p *Producer) Produce(ctx context.Context, events ...outbox.Event) ([]string, error) {
	if len(events) == 0 {
		return nil, nil
	}
	if p.closed.Load() {
		return nil, &ProduceError{Topic: p.cfg.Topic, Partition: -1, Events: len(events),
			Reason: "the producer is closed", Err: net.ErrClosed}
	}
	tp, ts := traceOf(ctx)
	ids := make([]string, len(events))
	msgs := make([]kafkago.Message, len(events))
	for i := range events {
		ev := events[i]
		if ev.ID == "" {
			id, err := uuid.NewV7()
			if err != nil {
				return nil, fmt.Errorf("kafka: generate ID: %w", err)
			}
			ev.ID = id.String()
		}
		if ev.TraceParent == "" {
			ev.TraceParent, ev.TraceState = tp, ts
		}
		msg, err := p.m.record(i, &ev)
		if err != nil {
			return nil, err
		}
		ids[i], msgs[i] = ev.ID, msg
	}

	ctx, cancel := context.WithTimeout(ctx, p.cfg.ProduceTimeout)
	defer cancel()
	parts, err := p.partitions(ctx)
	if err != nil {
		return nil, p.fail(&ProduceError{Topic: p.cfg.Topic, Partition: -1, Events: len(events),
			Reason: p.reason(ctx, err, "finding the topic's partitions"), Err: err})
	}
	byPart := make(map[int][]kafkago.Message, min(len(parts), len(msgs)))
	for i := range msgs {
		n := p.bal.Balance(msgs[i], parts...)
		byPart[n] = append(byPart[n], msgs[i])
	}
	errs := make(map[int]error, len(byPart))
	if len(byPart) == 1 {
		for n, ms := range byPart {
			if err := p.producePartition(ctx, n, ms); err != nil {
				errs[n] = err
			}
		}
	} else {
		var (
			mu sync.Mutex
			wg sync.WaitGroup
		)
		for n, ms := range byPart {
			wg.Go(func() {
				if err := p.producePartition(ctx, n, ms); err != nil {
					mu.Lock()
					errs[n] = err
					mu.Unlock()
				}
			})
		}
		wg.Wait()
	}
	if len(errs) == 0 {
		p.produced.Add(uint64(len(msgs)))
		if p.failing.CompareAndSwap(true, false) {
			p.log.Info("kafka: producing to the ingest topic works again", "topic", p.cfg.Topic)
		}
		return ids, nil
	}
	failed := slices.Sorted(func(yield func(int) bool) {
		for n := range errs {
			if !yield(n) {
				return
			}
		}
	})
	pe := &ProduceError{Topic: p.cfg.Topic, Partition: failed[0], Err: errs[failed[0]],
		Reason: p.reason(ctx, errs[failed[0]], "")}
	for n, ms := range byPart {
		if errs[n] != nil {
			pe.Events += len(ms)
		} else {
			pe.Acknowledged += len(ms)
		}
	}
	p.produced.Add(uint64(pe.Acknowledged))
	return nil, p.fail(pe)
}

// fail counts and logs a failed call.
func (p *Producer) fail(pe *ProduceError) error {
	p.refused.Add(uint64(pe.Events))
	if p.failing.CompareAndSwap(false, true) {
		p.log.Warn("kafka: producing to the ingest topic failed; POST /v1/events is answered 503 until it works again",
			"topic", p.cfg.Topic, "err", pe)
	} else {
		p.log.Debug("kafka: producing to the ingest topic failed", "topic", p.cfg.Topic, "err", pe)
	}
	return pe
}

// reason words err for a *ProduceError: what the broker said, or that no
// answer came within the produce timeout (with the last error seen).
func (p *Producer) reason(ctx context.Context, err error, doing string) string {
	if doing != "" {
		doing += ": "
	}
	var te *timeoutError
	switch {
	case errors.As(err, &te) && te.last != nil:
		return fmt.Sprintf("%snot acknowledged within %s (kafka.produce_timeout); last error: %v", doing, p.cfg.ProduceTimeout, te.last)
	case errors.As(err, &te):
		return fmt.Sprintf("%sthe brokers did not answer within %s (kafka.produce_timeout)", doing, p.cfg.ProduceTimeout)
	case errors.Is(err, context.Canceled) && ctx.Err() != nil:
		return doing + "the request was cancelled before the brokers acknowledged"
	}
	return doing + err.Error()
}

// timeoutError is a produce that ran out of time; last is the error of
// the last attempt that failed before, if any.
type timeoutError struct {
	err  error
	last error
}

func (e *timeoutError) Error() string { return e.err.Error() }
func (e *timeoutError) Unwrap() error { return e.err }

// partitions returns the ingest topic's partitions, [0, n), from the
// transport's metadata cache (refreshed every 10s), retrying retriable
// errors until ctx ends.
func (p *Producer) partitions(ctx context.Context) ([]int, error) {
	var parts []int
	err := p.retry(ctx, func() error {
		md, err := p.client.Metadata(ctx, &kafkago.MetadataRequest{Topics: []string{p.cfg.Topic}})
		if err != nil {
			return err
		}
		for _, t := range md.Topics {
			if t.Name != p.cfg.Topic {
				continue
			}
			if t.Error != nil {
				return t.Error
			}
			if len(t.Partitions) == 0 {
				return kafkago.UnknownTopicOrPartition
			}
			parts = make([]int, len(t.Partitions))
			for i := range parts {
				parts[i] = i
			}
			return nil
		}
		return kafkago.UnknownTopicOrPartition
	})
	return parts, err
}

// producePartition produces msgs to partition n in one produce request
// (again for each retry), acknowledged by all in-sync replicas.
func (p *Producer) producePartition(ctx context.Context, n int, msgs []kafkago.Message) error {
	return p.retry(ctx, func() error {
		now := time.Now()
		recs := make([]kafkago.Record, len(msgs))
		for i := range msgs {
			recs[i] = kafkago.Record{Time: now, Key: kafkago.NewBytes(msgs[i].Key),
				Value: kafkago.NewBytes(msgs[i].Value), Headers: msgs[i].Headers}
		}
		res, err := p.client.Produce(ctx, &kafkago.ProduceRequest{
			Topic: p.cfg.Topic, Partition: n, RequiredAcks: kafkago.RequireAll,
			Records: kafkago.NewRecordReader(recs...),
		})
		if err != nil {
			return err
		}
		if res.Error != nil {
			return res.Error
		}
		for i, rerr := range res.RecordErrors {
			return fmt.Errorf("record %d of the batch refused: %w", i, rerr)
		}
		return nil
	})
}

// retry runs op until it succeeds, fails with an error not worth retrying,
// or ctx ends (then a *timeoutError carrying the last error).
func (p *Producer) retry(ctx context.Context, op func() error) error {
	b := newBackoff(p.cfg)
	var last error
	for {
		err := op()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				if !errors.Is(err, context.DeadlineExceeded) {
					last = err
				}
				return &timeoutError{err: ctx.Err(), last: last}
			}
			return ctx.Err()
		}
		if p.closed.Load() || !retriable(err) {
			return err
		}
		last = err
		t := time.NewTimer(b.NextBackOff())
		select {
		case <-ctx.Done():
			t.Stop()
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return &timeoutError{err: ctx.Err(), last: last}
			}
			return ctx.Err()
		case <-t.C:
		}
	}
}

// retriable reports whether a produce that failed with err may succeed if
// sent again: a broker error Kafka marks retriable, or a connection that
// failed.
func retriable(err error) bool {
	var ke kafkago.Error
	if errors.As(err, &ke) {
		return ke.Temporary()
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// traceOf returns the W3C traceparent and tracestate of ctx's span, or
// empty strings.
func traceOf(ctx context.Context) (traceparent, tracestate string) {
	c := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, c)
	return c["traceparent"], c["tracestate"]
}

// KeyBalancer is the kafka-go Balancer the Producer partitions with, for
// other kafka-go producers that must agree with it. A record with a key
// goes where Kafka's default partitioner puts it: the murmur2 hash of the
// key bytes, as the Java client and kafka-go's Murmur2Balancer compute it,
// modulo the partition count; so an event POSTed with key K and a record
// produced with key K by any such producer land on the same partition, and
// per-key order holds across both. A record without a key goes by the
// murmur2 hash of its ID header, so the same event sent twice lands on the
// same partition, where it is a duplicate; one with neither goes to a
// random partition.
type KeyBalancer struct {
	// IDHeader is the record header holding the event ID. Default
	// "outbox-id".
	IDHeader string
}

// Balance implements kafkago.Balancer.
func (b KeyBalancer) Balance(msg kafkago.Message, partitions ...int) int {
	if len(msg.Key) > 0 {
		return kafkago.Murmur2Balancer{Consistent: true}.Balance(msg, partitions...)
	}
	name := b.IDHeader
	if name == "" {
		name = DefaultIDHeader
	}
	for _, h := range msg.Headers {
		if h.Key == name && len(h.Value) > 0 {
			return kafkago.Murmur2Balancer{Consistent: true}.Balance(kafkago.Message{Key: h.Value}, partitions...)
		}
	}
	return kafkago.Murmur2Balancer{}.Balance(kafkago.Message{}, partitions...)
}

var _ kafkago.Balancer = KeyBalancer{}
