package kafka

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/google/uuid"
	kafkago "github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
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
// partitioner on the key; by ID without a key); each partition's records
// of the call go out whole in one produce request, the partitions
// concurrently, each acknowledged by all in-sync replicas (acks=all). A
// partition has one request in flight at a time: the calls that queued
// behind it share the next one, in the order they queued, so concurrent
// calls are batched without a linger timer and a partition's records keep
// the order of their calls. A call returns nil only once every one of its
// requests was acknowledged. Retriable broker errors (a leader moving, a broker
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

	qmu    sync.Mutex
	queues map[partKey]*partQueue
	shut   bool // Close has begun: no sender starts
	// senders are the partitions' senders; stop, cancelled by Close, ends
	// their requests.
	senders   sync.WaitGroup
	stop      context.Context
	cancelAll context.CancelFunc

	produced atomic.Uint64
	refused  atomic.Uint64
	failing  atomic.Bool
	closed   atomic.Bool
}

// NewProducer validates cfg, which must name the ingest Topic, and returns a
// Producer for it. It does not contact the brokers: the first Produce does.
// logger may be nil (logs are discarded).
func NewProducer(cfg Config, logger *slog.Logger) (*Producer, error) {
	if cfg.Topic == "" {
		return nil, &ConfigError{Field: "Topic", Reason: "a Producer needs the ingest topic"}
	}
	return openProducer(cfg, logger)
}

// openProducer is NewProducer without the ingest topic, which a Sink's
// Producer has no use for: it produces to the topics of its endpoints.
func openProducer(cfg Config, logger *slog.Logger) (*Producer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.WithDefaults()
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	cn, err := cfg.conns()
	if err != nil {
		return nil, err
	}
	// kafka-go's transport keeps a failed metadata refresh (a broker not
	// reachable at the first request) until its next refresh, and a
	// deleted or re-created topic as it was: refresh often enough that a
	// POST does not fail for longer than a produce timeout after the
	// brokers are back.
	cn.transport.MetadataTTL = producerMetadataTTL
	stop, cancel := context.WithCancel(context.Background())
	return &Producer{
		cfg: cfg, m: newMapper(cfg), log: logger, conns: cn,
		client: &kafkago.Client{Addr: kafkago.TCP(cfg.brokers()...), Transport: cn.transport},
		bal:    KeyBalancer{IDHeader: cfg.IDHeader},
		queues: map[partKey]*partQueue{}, stop: stop, cancelAll: cancel,
	}, nil
}

// Close ends the produce requests under way (their calls fail), waits for
// the Producer's goroutines and releases its connections. Close is safe to
// call twice.
func (p *Producer) Close() error {
	p.closed.Store(true)
	p.qmu.Lock()
	p.shut = true
	p.qmu.Unlock()
	p.cancelAll()
	p.senders.Wait()
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
	ids, msgs, err := p.records(ctx, events)
	if err != nil {
		return nil, err
	}

	if pe := p.send(ctx, p.cfg.Topic, msgs); pe != nil {
		p.produced.Add(uint64(pe.Acknowledged))
		return nil, p.fail(pe)
	}
	p.produced.Add(uint64(len(msgs)))
	if p.failing.CompareAndSwap(true, false) {
		p.log.Info("kafka: producing to the ingest topic works again", "topic", p.cfg.Topic)
	}
	return ids, nil
}

// send produces msgs to topic, partitioned by the Producer's KeyBalancer,
// within Config.ProduceTimeout, and returns nil once every one was
// acknowledged, or a *ProduceError.
func (p *Producer) send(ctx context.Context, topic string, msgs []kafkago.Message) *ProduceError {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.ProduceTimeout)
	defer cancel()
	defer context.AfterFunc(p.stop, cancel)() // Close ends the call
	parts, err := p.partitions(ctx, topic)
	if err != nil {
		return &ProduceError{Topic: topic, Partition: -1, Events: len(msgs),
			Reason: p.reason(ctx, topic, err, "finding the topic's partitions"), Err: err}
	}
	byPart := make(map[int][]kafkago.Message, min(len(parts), len(msgs)))
	for i := range msgs {
		n := p.bal.Balance(msgs[i], parts...)
		byPart[n] = append(byPart[n], msgs[i])
	}
	errs := p.await(ctx, topic, p.submit(ctx, topic, byPart))
	if len(errs) == 0 {
		return nil
	}
	return p.failure(ctx, topic, byPart, errs)
}

// records turns events into records, giving an event without an ID a
// UUIDv7 and one without a trace context that of ctx's span. It returns
// the events' IDs and their records.
func (p *Producer) records(ctx context.Context, events []outbox.Event) ([]string, []kafkago.Message, error) {
	tp, ts := traceOf(ctx)
	ids := make([]string, len(events))
	msgs := make([]kafkago.Message, len(events))
	for i := range events {
		ev := events[i]
		if ev.ID == "" {
			id, err := uuid.NewV7()
			if err != nil {
				return nil, nil, fmt.Errorf("kafka: generate ID: %w", err)
			}
			ev.ID = id.String()
		}
		if ev.TraceParent == "" {
			ev.TraceParent, ev.TraceState = tp, ts
		}
		msg, err := p.m.record(i, &ev)
		if err != nil {
			return nil, nil, err
		}
		ids[i], msgs[i] = ev.ID, msg
	}
	return ids, msgs, nil
}

// submit queues each partition's records as one call of its queue.
func (p *Producer) submit(ctx context.Context, topic string, byPart map[int][]kafkago.Message) map[int]*produceCall {
	calls := make(map[int]*produceCall, len(byPart))
	for n, ms := range byPart {
		c := &produceCall{ctx: ctx, msgs: ms, done: make(chan error, 1)}
		calls[n] = c
		p.queue(topic, n).submit(p, c)
	}
	return calls
}

// await waits for the calls until ctx ends, and returns the error of each
// partition whose call failed or was not acknowledged in time.
func (p *Producer) await(ctx context.Context, topic string, calls map[int]*produceCall) map[int]error {
	errs := make(map[int]error, len(calls))
	for n, c := range calls {
		select {
		case err := <-c.done:
			if err != nil {
				errs[n] = err
			}
		case <-ctx.Done():
			// Still queued or in flight: not acknowledged in time.
			select {
			case err := <-c.done:
				if err != nil {
					errs[n] = err
				}
			default:
				if errors.Is(ctx.Err(), context.DeadlineExceeded) {
					errs[n] = &timeoutError{err: ctx.Err(), last: p.queue(topic, n).lastError()}
				} else {
					errs[n] = ctx.Err()
				}
			}
		}
	}
	return errs
}

// failure describes a call some of whose partitions failed: the error of
// the lowest of them, and how many events were refused and acknowledged.
func (p *Producer) failure(ctx context.Context, topic string, byPart map[int][]kafkago.Message, errs map[int]error) *ProduceError {
	failed := slices.Sorted(maps.Keys(errs))
	pe := &ProduceError{Topic: topic, Partition: failed[0], Err: errs[failed[0]],
		Reason: p.reason(ctx, topic, errs[failed[0]], "")}
	for n, ms := range byPart {
		if errs[n] != nil {
			pe.Events += len(ms)
		} else {
			pe.Acknowledged += len(ms)
		}
	}
	return pe
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
func (p *Producer) reason(ctx context.Context, topic string, err error, doing string) string {
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
	case errors.Is(err, protocol.ErrNoTopic):
		return doing + "the topic " + topic + " does not exist: the brokers' metadata does not list it (" + err.Error() + ")"
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

// partitions returns topic's partitions, [0, n), from the transport's
// metadata cache (refreshed every producerMetadataTTL), retrying retriable
// errors until ctx ends.
func (p *Producer) partitions(ctx context.Context, topic string) ([]int, error) {
	var parts []int
	err := p.retry(ctx, func() error {
		md, err := p.client.Metadata(ctx, &kafkago.MetadataRequest{Topics: []string{topic}})
		if err != nil {
			return err
		}
		for _, t := range md.Topics {
			if t.Name != topic {
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
	}, nil)
	return parts, err
}

// produceCall is one Produce call's records for one partition, waiting for
// its partition's sender.
type produceCall struct {
	ctx  context.Context // the call's: a call it ended is not sent
	msgs []kafkago.Message
	done chan error // buffered: the sender never waits for the caller
}

// partQueue holds the calls waiting to be produced to one partition. One
// sender at a time produces them: each of its produce requests carries
// every call that queued while the previous one was in flight (up to
// maxRequestBytes, a call's records never split), so that under load
// concurrent calls share requests, as a linger would gather them without
// its wait, and a partition's records are written in the order their
// calls queued.
type partQueue struct {
	topic   string
	n       int
	mu      sync.Mutex
	pending []*produceCall
	busy    bool // a sender runs
	// last is the error of the last failed attempt, nil once one
	// succeeds: the reason given to a call that runs out of time.
	last atomic.Pointer[error]
}

func (q *partQueue) lastError() error {
	if e := q.last.Load(); e != nil {
		return *e
	}
	return nil
}

// producerMetadataTTL is how often, at most, a Producer's transport
// refreshes the cluster's metadata (at a random time within it).
const producerMetadataTTL = 2 * time.Second

// maxRequestBytes bounds the records of the calls one produce request
// gathers (a single call larger than that goes alone, whole): Kafka's
// default max.message.bytes is about 1 MiB.
const maxRequestBytes = 1 << 20

// partKey names one partition of one topic.
type partKey struct {
	topic string
	n     int
}

// queue returns the queue of topic's partition n.
func (p *Producer) queue(topic string, n int) *partQueue {
	p.qmu.Lock()
	defer p.qmu.Unlock()
	k := partKey{topic, n}
	q := p.queues[k]
	if q == nil {
		q = &partQueue{topic: topic, n: n}
		p.queues[k] = q
	}
	return q
}

// submit queues c and starts the partition's sender unless one runs.
func (q *partQueue) submit(p *Producer, c *produceCall) {
	q.mu.Lock()
	q.pending = append(q.pending, c)
	start := !q.busy
	q.busy = true
	q.mu.Unlock()
	if !start {
		return
	}
	p.qmu.Lock()
	if p.shut {
		// Closed: the sends fail at once (p.stop is cancelled).
		p.qmu.Unlock()
		q.send(p)
		return
	}
	p.senders.Add(1)
	p.qmu.Unlock()
	go func() {
		defer p.senders.Done()
		q.send(p)
	}()
}

// send produces the queued calls until none is left.
func (q *partQueue) send(p *Producer) {
	for {
		q.mu.Lock()
		var calls []*produceCall
		size := 0
		k := 0
		for ; k < len(q.pending); k++ {
			c := q.pending[k]
			if c.ctx.Err() != nil {
				continue // its caller has stopped waiting
			}
			b := messagesSize(c.msgs)
			if len(calls) > 0 && size+b > maxRequestBytes {
				break
			}
			calls = append(calls, c)
			size += b
		}
		q.pending = append(q.pending[:0], q.pending[k:]...)
		if len(calls) == 0 && len(q.pending) == 0 {
			q.busy = false
			q.mu.Unlock()
			return
		}
		q.mu.Unlock()
		if len(calls) == 0 {
			continue
		}
		p.produceCalls(q, calls)
	}
}

// produceCalls produces calls in one request and answers each. When the
// broker refuses the request, which may be for one call's records alone
// (a record too large, say), each call is sent again on its own, so that
// it gets its own answer and the calls that shared the request are not
// refused with it.
func (p *Producer) produceCalls(q *partQueue, calls []*produceCall) {
	err := p.producePartition(q, calls)
	if err != nil && len(calls) > 1 && refusal(err) {
		for _, c := range calls {
			if c.ctx.Err() != nil {
				c.done <- c.ctx.Err()
				continue
			}
			c.done <- p.producePartition(q, []*produceCall{c})
		}
		return
	}
	for _, c := range calls {
		c.done <- err
	}
}

// refusal reports whether err is a broker's answer that a retry of the
// same records would not change.
func refusal(err error) bool {
	var ke kafkago.Error
	return errors.As(err, &ke) && !ke.Temporary()
}

// messagesSize approximates the bytes msgs take in a request.
func messagesSize(msgs []kafkago.Message) int {
	n := 0
	for i := range msgs {
		n += len(msgs[i].Key) + len(msgs[i].Value) + 16
		for _, h := range msgs[i].Headers {
			n += len(h.Key) + len(h.Value) + 4
		}
	}
	return n
}

// producePartition produces the calls' records to partition n in one
// produce request (again for each retry), acknowledged by all in-sync
// replicas, until the latest of the calls' deadlines or Close.
func (p *Producer) producePartition(q *partQueue, calls []*produceCall) error {
	var deadline time.Time
	var msgs []kafkago.Message
	for _, c := range calls {
		if d, ok := c.ctx.Deadline(); ok && d.After(deadline) {
			deadline = d
		}
		msgs = append(msgs, c.msgs...)
	}
	if len(calls) == 1 {
		msgs = calls[0].msgs
	}
	if deadline.IsZero() {
		deadline = time.Now().Add(p.cfg.ProduceTimeout)
	}
	ctx, cancel := context.WithDeadline(p.stop, deadline)
	defer cancel()
	n := q.n
	err := p.retry(ctx, func() error {
		now := time.Now()
		recs := make([]kafkago.Record, len(msgs))
		for i := range msgs {
			recs[i] = kafkago.Record{Time: now, Key: kafkago.NewBytes(msgs[i].Key),
				Value: kafkago.NewBytes(msgs[i].Value), Headers: msgs[i].Headers}
		}
		res, err := p.client.Produce(ctx, &kafkago.ProduceRequest{
			Topic: q.topic, Partition: n, RequiredAcks: kafkago.RequireAll,
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
	}, func(err error) { q.last.Store(&err) })
	if err == nil {
		q.last.Store(nil)
	}
	return err
}

// retry runs op until it succeeds, fails with an error not worth retrying,
// or ctx ends (then a *timeoutError carrying the last error).
func (p *Producer) retry(ctx context.Context, op func() error, note func(error)) error {
	b := newBackoff(p.cfg)
	var last error
	for {
		err := op()
		if err == nil {
			return nil
		}
		if note != nil && ctx.Err() == nil {
			note(err)
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
	if errors.Is(err, protocol.ErrNoLeader) {
		return true // a leader election under way
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
