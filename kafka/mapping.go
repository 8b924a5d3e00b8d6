package kafka

import (
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"time"

	kafkago "github.com/segmentio/kafka-go"

	"github.com/outboxd/outbox/outbox"
)

// RecordID returns the event ID of a record without an ID header:
// "kafka:<topic>:<partition>:<offset>". It is the same every time the record
// is consumed, so a record read again after a crash or a rebalance is
// recognised as a duplicate.
func RecordID(topic string, partition int, offset int64) string {
	return "kafka:" + topic + ":" + strconv.Itoa(partition) + ":" + strconv.FormatInt(offset, 10)
}

// keyPrefixBase64 marks a record key that was not printable text and is
// carried base64-encoded (standard alphabet, padded) in Event.Key.
const keyPrefixBase64 = "base64:"

// mapped is one consumed record turned into an event. A non-empty dead
// reason means the record cannot be delivered as it is and is stored as a
// dead letter instead.
type mapped struct {
	offset int64
	ev     outbox.Event
	dead   string
}

// mapper turns records into events.
type mapper struct {
	defaultDest     string
	defaultTopic    string
	topicHeader     string
	destHeader      string
	idHeader        string
	deliverAtHeader string
	methodHeader    string
}

func newMapper(c Config) mapper {
	return mapper{defaultDest: c.Destination, destHeader: c.DestinationHeader, idHeader: c.IDHeader,
		deliverAtHeader: c.DeliverAtHeader, topicHeader: c.TopicHeader, defaultTopic: c.DefaultTopic,
		methodHeader: c.MethodHeader}
}

// The W3C Trace Context headers of a record: its producer's trace context.
const (
	traceParentHeader = "traceparent"
	traceStateHeader  = "tracestate"
)

// mapRecord maps one record: the ID from the ID header or the record's
// coordinates, key to Key, value to Payload, headers (but the ID,
// destination, topic, not-before, method and trace context headers) to
// Headers, the destination or the topic from its header (not both), else the
// default destination or, without one, the default topic, DeliverAt from its
// header (RFC 3339) when there is one, Method from its header when there is
// one (else the outbox's default, POST), TraceParent and TraceState from the
// traceparent and tracestate headers. Problems that make the record
// undeliverable set dead.
func (m mapper) mapRecord(msg *kafkago.Message) mapped {
	out := mapped{offset: msg.Offset}
	r := recordMapping{m: m, ev: &out.ev, n: len(msg.Headers)}
	r.ev.ID = RecordID(msg.Topic, msg.Partition, msg.Offset)
	r.ev.Payload = msg.Value
	r.ev.Key = mapKey(msg.Key)
	for _, h := range msg.Headers {
		r.header(h.Key, string(h.Value))
	}
	r.ev.Headers = r.headers
	r.route()
	if len(r.problems) > 0 {
		out.dead = "unmappable Kafka record " + coords(msg) + ": " + strings.Join(r.problems, "; ")
	}
	return out
}

// recordMapping is the state of one record's mapping: the event so far,
// the headers of each kind seen, and the problems found.
type recordMapping struct {
	m        mapper
	ev       *outbox.Event
	n        int // the record's headers
	problems []string
	headers  map[string]string

	idSeen, destSeen, topicSeen, atSeen, methodSeen bool
}

// problem notes what makes the record undeliverable.
func (r *recordMapping) problem(format string, args ...any) {
	r.problems = append(r.problems, fmt.Sprintf(format, args...))
}

// first reports whether the header name is the first of its kind (seen);
// a repeated one is a problem.
func (r *recordMapping) first(seen *bool, name string) bool {
	if *seen {
		r.problem("more than one %q header", name)
		return false
	}
	*seen = true
	return true
}

// header maps one header of the record.
func (r *recordMapping) header(key, value string) {
	m, ev := r.m, r.ev
	switch key {
	case m.idHeader:
		if r.first(&r.idSeen, m.idHeader) {
			r.id(value)
		}
	case m.destHeader:
		if r.first(&r.destSeen, m.destHeader) {
			ev.Destination = value
			if value == "" {
				r.problem("empty %q header", m.destHeader)
			}
		}
	case m.topicHeader:
		if r.first(&r.topicSeen, m.topicHeader) {
			ev.Topic = value
			if err := outbox.ValidateTopic(value); err != nil {
				r.problem("%q header %q: %v", m.topicHeader, value, err)
			}
		}
	case m.deliverAtHeader:
		if r.first(&r.atSeen, m.deliverAtHeader) {
			r.deliverAt(value)
		}
	case m.methodHeader:
		if r.first(&r.methodSeen, m.methodHeader) {
			r.method(value)
		}
	case traceParentHeader:
		// The producer's trace context: stored with the event, and
		// continued by each attempt's own traceparent. A malformed or
		// repeated one is ignored (the outbox drops what does not
		// parse): a tracing header never makes a record dead.
		if ev.TraceParent == "" {
			ev.TraceParent = value
		}
	case traceStateHeader:
		if ev.TraceState == "" {
			ev.TraceState = value
		}
	default:
		r.other(key, value)
	}
}

// id takes the event's ID from the ID header.
func (r *recordMapping) id(v string) {
	switch {
	case v == "":
		r.problem("empty %q header", r.m.idHeader)
	case !outbox.ValidText(v):
		r.problem("%q header is not printable UTF-8", r.m.idHeader)
	default:
		r.ev.ID = v
	}
}

// deliverAt takes the event's DeliverAt from its header.
func (r *recordMapping) deliverAt(v string) {
	at, err := time.Parse(time.RFC3339, v)
	if err != nil {
		r.problem("%q header is not an RFC 3339 time", r.m.deliverAtHeader)
		return
	}
	r.ev.DeliverAt = at.UTC()
}

// method takes the event's Method from its header.
func (r *recordMapping) method(v string) {
	if !outbox.ValidMethod(v) {
		r.problem("%q header is not an HTTP method the outbox delivers with", r.m.methodHeader)
		return
	}
	r.ev.Method = v
}

// other keeps a header of no special meaning among the event's Headers.
func (r *recordMapping) other(key, value string) {
	if r.headers == nil {
		r.headers = make(map[string]string, r.n)
	}
	if prev, ok := r.headers[key]; ok {
		// Repeated headers combine as repeated HTTP fields do.
		r.headers[key] = prev + ", " + value
	} else {
		r.headers[key] = value
	}
}

// route gives the event the destination or topic of its header (not both),
// else the default destination or, without one, the default topic.
func (r *recordMapping) route() {
	m := r.m
	switch {
	case r.destSeen && r.topicSeen:
		r.problem("both a %q and a %q header: an event has a destination or a topic, not both", m.destHeader, m.topicHeader)
	case r.destSeen || r.topicSeen:
	case m.defaultDest != "":
		r.ev.Destination = m.defaultDest
	case m.defaultTopic != "":
		r.ev.Topic = m.defaultTopic
	default:
		r.problem("no %q header (nor %q) and no default destination (kafka.destination) or topic (kafka.default_topic)", m.destHeader, m.topicHeader)
	}
}

// deadFallbacks returns the events to try, in order, to keep an unmappable
// record as a dead letter: the event as mapped, then one stripped of what the
// outbox may refuse (key, headers, an odd destination), then one without the
// payload. The ID is always the record's coordinates when the ID header was
// the problem, so the dead letter itself is never refused for its ID.
func deadFallbacks(msg *kafkago.Message, mp mapped) []outbox.Event {
	coordID := RecordID(msg.Topic, msg.Partition, msg.Offset)
	dest := mp.ev.Destination
	if dest == "" || !outbox.ValidText(dest) {
		dest = "kafka:" + msg.Topic
	}
	bare := outbox.Event{ID: coordID, Destination: dest, Payload: msg.Value}
	if mp.ev.Destination == "" && mp.ev.Topic != "" && outbox.ValidateTopic(mp.ev.Topic) == nil {
		// A topic event, dead before it was routed: its topic is kept.
		bare.Destination, bare.Topic = "", mp.ev.Topic
	}
	if mp.ev.ID != coordID && outbox.ValidText(mp.ev.ID) {
		bare.ID = mp.ev.ID
	}
	noPayload := bare
	noPayload.Payload = nil
	noID := noPayload
	noID.ID = coordID
	return []outbox.Event{bare, noPayload, noID}
}

// coords names a record for reasons and logs.
func coords(msg *kafkago.Message) string {
	return msg.Topic + "/" + strconv.Itoa(msg.Partition) + "@" + strconv.FormatInt(msg.Offset, 10)
}

// mapKey keeps a printable key as it is and carries any other key as
// "base64:" + its standard base64 encoding, so binary keys (Avro, Protobuf,
// integers) still order and coalesce by key.
func mapKey(k []byte) string {
	if len(k) == 0 {
		return ""
	}
	if s := string(k); outbox.ValidText(s) && !strings.HasPrefix(s, keyPrefixBase64) {
		return s
	}
	return keyPrefixBase64 + base64.StdEncoding.EncodeToString(k)
}
