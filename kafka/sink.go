package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"slices"
	"strconv"
	"sync/atomic"

	kafkago "github.com/segmentio/kafka-go"

	"github.com/outboxd/outbox/outbox"
)

// Headers a Sink adds to every record it produces.
const (
	// SinkIDHeader carries the event's ID, the same on every attempt:
	// consumers deduplicate on it.
	SinkIDHeader = DefaultIDHeader
	// SinkTopicHeader carries the event's topic (outbox.Event.Topic),
	// when it has one.
	SinkTopicHeader = DefaultTopicHeader
)

// SinkConfig configures a Sink.
type SinkConfig struct {
	// Kafka connects the Sink's Producer to the brokers: Brokers
	// (required), ClientID, TLS, SASL, DialTimeout, RetryBackoff,
	// RetryBackoffMax and ProduceTimeout (which bounds one delivery) apply,
	// with their defaults; the ingest and group settings are not used.
	Kafka Config
	// Topics maps each endpoint name to the Kafka topic its deliveries are
	// produced to. At least one.
	Topics map[string]string
	// Logger receives the Sink's logs. Default: discarded.
	Logger *slog.Logger
}

// Sink delivers events to Kafka topics: it implements outbox.Sink,
// outbox.EndpointResolver and outbox.EndpointLister, so an outbox whose
// Config.Sink it is (or routes to it) publishes its events to Kafka, and
// Outbox.Update is a transactional outbox to Kafka with no CDC.
//
// Each delivery is one record, produced to its endpoint's topic through
// the Sink's Producer and acknowledged by all in-sync replicas: the key is
// the event's Key (a "base64:..." key as the bytes it stands for), or its
// ID when it has none, so the record lands on the partition Kafka's
// default partitioner picks for that key; the value is the payload,
// verbatim; the headers are the event's own, then SinkIDHeader (the event
// ID, which consumers deduplicate on), SinkTopicHeader (the event's topic,
// when it has one) and the W3C traceparent and tracestate of the delivery's
// span. An event header of one of those names is replaced.
//
// Concurrent deliveries to one partition share produce requests (see
// Producer); the Sink is an outbox.Batcher, so the outbox lets each of its
// endpoints have MaxPerEndpoint deliveries in flight rather than adapting
// the number to a latency that grows with the batches. A
// delivery returns only once its record was acknowledged or refused, so
// with outbox.Config.Ordered, which starts one delivery per key at a time,
// a key's records are written in the order of its events. Delivery is at
// least once: a record whose acknowledgement was lost, or whose outcome
// was not committed before a crash, is produced again with the same ID.
//
// The policy table of a Sink maps what the brokers answer to actions:
// acknowledged is ActionSuccess; a refusal that sending again cannot
// change (topic authorisation failed, record too large, an invalid topic
// or record, and a topic or partition still unknown at the end of the
// produce timeout) is ActionDead, with the broker's reason in
// Result.Body; anything else (a leader moving, not enough in-sync
// replicas, a request timed out, a broker not reachable, a cancelled
// delivery) is ActionRetry, which counts against the endpoint's breaker
// as a receiver that does not answer does. Result.Status is always 0: no
// HTTP status is involved.
type Sink struct {
	p      *Producer
	topics map[string]string
	names  []string
	closed atomic.Bool
}

var (
	_ outbox.Sink             = (*Sink)(nil)
	_ outbox.EndpointResolver = (*Sink)(nil)
	_ outbox.EndpointLister   = (*Sink)(nil)
	_ outbox.Batcher          = (*Sink)(nil)
)

// ErrSinkClosed is the error of a delivery after Sink.Close.
var ErrSinkClosed = errors.New("kafka: sink closed")

// NewSink validates cfg and returns a Sink. It does not contact the
// brokers: the first delivery does. The error is a *ConfigError naming
// the field it refuses ("Brokers", or `Topics["audit"]`).
func NewSink(cfg SinkConfig) (*Sink, error) {
	if len(cfg.Topics) == 0 {
		return nil, badField("Topics", "at least one endpoint and its topic is required")
	}
	for name, topic := range cfg.Topics {
		field := "Topics[" + strconv.Quote(name) + "]"
		if name == "" {
			return nil, badField(field, "an endpoint name must not be empty")
		}
		if topic == "" {
			return nil, badField(field, "the topic must not be empty")
		}
		if err := checkTopic(topic); err != nil {
			return nil, badField(field, "%v", err)
		}
	}
	kc := cfg.Kafka
	kc.Topic = "" // not an ingest producer
	p, err := openProducer(kc, cfg.Logger)
	if err != nil {
		return nil, err
	}
	topics := maps.Clone(cfg.Topics)
	return &Sink{p: p, topics: topics, names: slices.Sorted(maps.Keys(topics))}, nil
}

// Close ends the deliveries under way (they return ActionRetry) and
// releases the Sink's connections. Deliveries after Close return
// ActionRetry with ErrSinkClosed. Close is safe to call twice.
func (s *Sink) Close() error {
	s.closed.Store(true)
	return s.p.Close()
}

// ResolveEndpoint implements outbox.EndpointResolver: destination must be
// one of the Sink's endpoint names.
func (s *Sink) ResolveEndpoint(destination string) (string, error) {
	if _, ok := s.topics[destination]; !ok {
		return "", fmt.Errorf("kafka: %q is not an endpoint of the Kafka sink", destination)
	}
	return destination, nil
}

// EndpointNames implements outbox.EndpointLister.
func (s *Sink) EndpointNames() []string { return slices.Clone(s.names) }

// Batches implements outbox.Batcher: concurrent deliveries to any of the
// Sink's endpoints share produce requests, so the outbox lets each have
// its MaxPerEndpoint deliveries in flight rather than adapting the number.
func (s *Sink) Batches(endpoint string) bool {
	_, ok := s.topics[endpoint]
	return ok
}

// Topic returns the Kafka topic of the endpoint name, and whether it is
// one of the Sink's.
func (s *Sink) Topic(endpoint string) (string, bool) {
	t, ok := s.topics[endpoint]
	return t, ok
}

// Deliver implements outbox.Sink: it produces d's record to its
// endpoint's topic and classifies the outcome with the policy table (see
// Sink). An endpoint the Sink does not know, or a key that cannot be a
// record key, is ActionDead.
func (s *Sink) Deliver(ctx context.Context, d *outbox.Delivery) outbox.Result {
	if s.closed.Load() {
		return outbox.Result{Action: outbox.ActionRetry, Err: ErrSinkClosed}
	}
	if d == nil {
		return outbox.Result{Action: outbox.ActionDead, Err: errors.New("kafka: nil delivery")}
	}
	topic, ok := s.topics[d.Endpoint]
	if !ok {
		topic, ok = s.topics[d.Destination]
	}
	if !ok {
		err := fmt.Errorf("kafka: endpoint %q has no topic in the Kafka sink", d.Endpoint)
		return outbox.Result{Action: outbox.ActionDead, Body: err.Error(), Err: err}
	}
	msg, err := sinkRecord(ctx, d)
	if err != nil {
		return outbox.Result{Action: outbox.ActionDead, Body: err.Error(), Err: err}
	}
	pe := s.p.send(ctx, topic, []kafkago.Message{msg})
	if pe == nil {
		return outbox.Result{Action: outbox.ActionSuccess}
	}
	if errors.Is(pe.Err, net.ErrClosed) && s.closed.Load() {
		return outbox.Result{Action: outbox.ActionRetry, Err: ErrSinkClosed}
	}
	return outbox.Result{Action: errorAction(pe.Err), Body: pe.Reason, Err: pe}
}

// sinkRecord is the record of one delivery (see Sink).
func sinkRecord(ctx context.Context, d *outbox.Delivery) (kafkago.Message, error) {
	key := []byte(d.ID)
	if d.Key != "" {
		k, ok := recordKey(d.Key)
		if !ok {
			return kafkago.Message{}, fmt.Errorf("kafka: key %q starts with %q but is not the base64 form of a binary key", d.Key, keyPrefixBase64)
		}
		key = k
	}
	tp, ts := traceOf(ctx)
	msg := kafkago.Message{Key: key, Value: d.Payload, Headers: make([]kafkago.Header, 0, len(d.Headers)+4)}
	add := func(name, value string) {
		msg.Headers = append(msg.Headers, kafkago.Header{Key: name, Value: []byte(value)})
	}
	for _, name := range slices.Sorted(maps.Keys(d.Headers)) {
		switch name {
		case SinkIDHeader, SinkTopicHeader, traceParentHeader, traceStateHeader:
			continue // the Sink's own
		}
		add(name, d.Headers[name])
	}
	add(SinkIDHeader, d.ID)
	for _, h := range [][2]string{{SinkTopicHeader, d.Topic}, {traceParentHeader, tp}, {traceStateHeader, ts}} {
		if h[1] != "" {
			add(h[0], h[1])
		}
	}
	return msg, nil
}

// deadErrors are the broker's answers that producing the same record again
// cannot change: the Sink's policy table makes them dead letters.
var deadErrors = []kafkago.Error{
	kafkago.TopicAuthorizationFailed,
	kafkago.MessageSizeTooLarge,
	kafkago.RecordListTooLarge,
	kafkago.UnknownTopicOrPartition,
	kafkago.InvalidTopic,
	kafkago.InvalidRecord,
}

// errorAction is the Sink's policy table: the action for a produce that
// failed with err (see Sink). A refusal in deadErrors is ActionDead, also
// when it was the last answer before the produce timeout (an unknown
// topic is retried until then, in case it is being created); anything
// else is ActionRetry.
func errorAction(err error) outbox.Action {
	var te *timeoutError
	if errors.As(err, &te) {
		if te.last == nil {
			return outbox.ActionRetry
		}
		err = te.last
	}
	var ke kafkago.Error
	if errors.As(err, &ke) && slices.Contains(deadErrors, ke) {
		return outbox.ActionDead
	}
	return outbox.ActionRetry
}
