package kafka

import (
	"encoding/base64"
	"strconv"
	"strings"
	"time"

	kafkago "github.com/segmentio/kafka-go"

	"github.com/outboxd/outbox/outbox"
)

// record is the inverse of mapRecord: it encodes the caller-owned fields of
// ev (index i of a call, for the error) as a record that mapRecord, with
// the same Config, maps back to the same event. The ID goes in the ID
// header, the destination in the destination header or the topic in the
// topic header (always one of the two, so the consumer's defaults do not
// matter), a DeliverAt in the
// not-before header (RFC 3339 with nanoseconds, UTC), a Method in the
// method header, TraceParent and TraceState in the W3C headers, the Key in
// the record key and the Payload in the value; Headers become record headers.
//
// ev must already be valid for the outbox (outbox.Outbox.Validate) and
// have its ID. What an event may carry but a record cannot give back
// is refused with a *outbox.ValidationError naming the field:
//   - a header named exactly as one of the headers above (Kafka header
//     names are case-sensitive; another spelling is an ordinary header);
//   - a key starting with "base64:" that is not the form mapRecord gives a
//     key that is not printable text ("base64:" and the standard, padded
//     base64 of such bytes): the record key would map to another Key.
func (m mapper) record(i int, ev *outbox.Event) (kafkago.Message, error) {
	bad := func(field, reason string) error {
		return &outbox.ValidationError{Index: i, Field: field, Reason: reason}
	}
	key, ok := recordKey(ev.Key)
	if !ok {
		return kafkago.Message{}, bad("key", "a key starting with \""+keyPrefixBase64+
			"\" is taken for the base64 form of a binary Kafka record key; it must be that form of bytes that are not printable text")
	}
	n := 2 + len(ev.Headers)
	msg := kafkago.Message{Key: key, Value: ev.Payload, Headers: make([]kafkago.Header, 0, n+4)}
	add := func(name, value string) {
		msg.Headers = append(msg.Headers, kafkago.Header{Key: name, Value: []byte(value)})
	}
	add(m.idHeader, ev.ID)
	if ev.Topic != "" {
		add(m.topicHeader, ev.Topic)
	} else {
		add(m.destHeader, ev.Destination)
	}
	if !ev.DeliverAt.IsZero() {
		add(m.deliverAtHeader, ev.DeliverAt.UTC().Format(time.RFC3339Nano))
	}
	if ev.Method != "" {
		add(m.methodHeader, ev.Method)
	}
	if ev.TraceParent != "" {
		add(traceParentHeader, ev.TraceParent)
	}
	if ev.TraceState != "" {
		add(traceStateHeader, ev.TraceState)
	}
	for name, value := range ev.Headers {
		switch name {
		case m.idHeader, m.destHeader, m.topicHeader, m.deliverAtHeader, m.methodHeader, traceParentHeader, traceStateHeader:
			return kafkago.Message{}, bad("headers", "header "+strconv.Quote(name)+
				" is the Kafka record header that carries an event field in Kafka mode; name it otherwise")
		}
		add(name, value)
	}
	return msg, nil
}

// recordKey returns the record key that mapKey maps to k, and false when
// there is none: nil for no key, the bytes of a printable key, the decoded
// bytes of "base64:..." when they are not printable text (or start with
// "base64:" themselves).
func recordKey(k string) ([]byte, bool) {
	if k == "" {
		return nil, true
	}
	rest, found := strings.CutPrefix(k, keyPrefixBase64)
	if !found {
		return []byte(k), true
	}
	b, err := base64.StdEncoding.Strict().DecodeString(rest)
	if err != nil || len(b) == 0 || mapKey(b) != k {
		return nil, false
	}
	return b, true
}
