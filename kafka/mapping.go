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
}

func newMapper(c Config) mapper {
	return mapper{defaultDest: c.Destination, destHeader: c.DestinationHeader, idHeader: c.IDHeader,
		deliverAtHeader: c.DeliverAtHeader, topicHeader: c.TopicHeader, defaultTopic: c.DefaultTopic}
}

// The W3C Trace Context headers of a record: its producer's trace context.
const (
	traceParentHeader = "traceparent"
	traceStateHeader  = "tracestate"
)

// mapRecord maps one record: the ID from the ID header or the record's
// coordinates, key to Key, value to Payload, headers (but the ID,
// destination, topic, not-before and trace context headers) to Headers, the
// destination or the topic from its header (not both), else the default
// destination or, without one, the default topic, DeliverAt from its header
// (RFC 3339) when there is one, TraceParent and TraceState from the
// traceparent and tracestate headers. Problems that make the record
// undeliverable set dead.
func (m mapper) mapRecord(msg *kafkago.Message) mapped {
	out := mapped{offset: msg.Offset}
	ev := &out.ev
	ev.ID = RecordID(msg.Topic, msg.Partition, msg.Offset)
	ev.Payload = msg.Value
	ev.Key = mapKey(msg.Key)

	var problems []string
	var idSeen, destSeen, topicSeen, atSeen bool
	var headers map[string]string
	for _, h := range msg.Headers {
		switch h.Key {
		case m.idHeader:
			if idSeen {
				problems = append(problems, fmt.Sprintf("more than one %q header", m.idHeader))
				continue
			}
			idSeen = true
			id := string(h.Value)
			if id == "" {
				problems = append(problems, fmt.Sprintf("empty %q header", m.idHeader))
				continue
			}
			if !outbox.ValidText(id) {
				problems = append(problems, fmt.Sprintf("%q header is not printable UTF-8", m.idHeader))
				continue
			}
			ev.ID = id
		case m.destHeader:
			if destSeen {
				problems = append(problems, fmt.Sprintf("more than one %q header", m.destHeader))
				continue
			}
			destSeen = true
			ev.Destination = string(h.Value)
			if ev.Destination == "" {
				problems = append(problems, fmt.Sprintf("empty %q header", m.destHeader))
			}
		case m.topicHeader:
			if topicSeen {
				problems = append(problems, fmt.Sprintf("more than one %q header", m.topicHeader))
				continue
			}
			topicSeen = true
			ev.Topic = string(h.Value)
			if err := outbox.ValidateTopic(ev.Topic); err != nil {
				problems = append(problems, fmt.Sprintf("%q header %q: %v", m.topicHeader, ev.Topic, err))
			}
		case m.deliverAtHeader:
			if atSeen {
				problems = append(problems, fmt.Sprintf("more than one %q header", m.deliverAtHeader))
				continue
			}
			atSeen = true
			at, err := time.Parse(time.RFC3339, string(h.Value))
			if err != nil {
				problems = append(problems, fmt.Sprintf("%q header is not an RFC 3339 time", m.deliverAtHeader))
				continue
			}
			ev.DeliverAt = at.UTC()
		case traceParentHeader:
			// The producer's trace context: stored with the event, and
			// continued by each attempt's own traceparent. A malformed or
			// repeated one is ignored (the outbox drops what does not
			// parse): a tracing header never makes a record dead.
			if ev.TraceParent == "" {
				ev.TraceParent = string(h.Value)
			}
		case traceStateHeader:
			if ev.TraceState == "" {
				ev.TraceState = string(h.Value)
			}
		default:
			if headers == nil {
				headers = make(map[string]string, len(msg.Headers))
			}
			if prev, ok := headers[h.Key]; ok {
				// Repeated headers combine as repeated HTTP fields do.
				headers[h.Key] = prev + ", " + string(h.Value)
			} else {
				headers[h.Key] = string(h.Value)
			}
		}
	}
	ev.Headers = headers
	switch {
	case destSeen && topicSeen:
		problems = append(problems, fmt.Sprintf("both a %q and a %q header: an event has a destination or a topic, not both", m.destHeader, m.topicHeader))
	case destSeen || topicSeen:
	case m.defaultDest != "":
		ev.Destination = m.defaultDest
	case m.defaultTopic != "":
		ev.Topic = m.defaultTopic
	default:
		problems = append(problems, fmt.Sprintf("no %q header (nor %q) and no default destination (kafka.destination) or topic (kafka.default_topic)", m.destHeader, m.topicHeader))
	}
	if len(problems) > 0 {
		out.dead = "unmappable Kafka record " + coords(msg) + ": " + strings.Join(problems, "; ")
	}
	return out
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
