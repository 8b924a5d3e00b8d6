package kafka

import (
	"bytes"
	"maps"
	"strings"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"

	"github.com/outboxd/outbox/outbox"
)

// sameEvent compares the caller-owned fields of two events: what a record
// carries from the API to a partition's owner.
func sameEvent(a, b *outbox.Event) bool {
	return a.ID == b.ID && a.Key == b.Key && a.Destination == b.Destination && a.Topic == b.Topic && a.Method == b.Method &&
		maps.Equal(a.Headers, b.Headers) && bytes.Equal(a.Payload, b.Payload) && a.DeliverAt.Equal(b.DeliverAt) &&
		a.TraceParent == b.TraceParent && a.TraceState == b.TraceState
}

// encodeMapper is a mapper with the default header names and a default
// destination that a record produced by the API never relies on.
func encodeMapper() mapper {
	return newMapper(Config{Destination: "consumer-default"}.WithDefaults())
}

// The record an event is produced as maps back, on its owner, to the same
// event: every field an HTTP client can give survives the trip.
func TestEventRecordRoundTrip(t *testing.T) {
	m := encodeMapper()
	at := time.Date(2026, 12, 4, 20, 5, 1, 123456789, time.FixedZone("x", 3600))
	cases := map[string]outbox.Event{
		"minimal":     {ID: "a", Destination: "orders"},
		"everything":  {ID: "b", Key: "customer-7", Destination: "https://example.com/hook", Method: "PUT", Headers: map[string]string{"X-A": "1, 2", "Outbox-Id": "not the ID: another spelling"}, Payload: []byte(`{"n":1}`), DeliverAt: at, TraceParent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", TraceState: "k=v"},
		"binary key":  {ID: "c", Key: mapKey([]byte{0, 0xff, 'k'}), Destination: "orders", Payload: []byte{0, 1, 2}},
		"encoded key": {ID: "d", Key: mapKey([]byte("base64:looks encoded")), Destination: "orders"},
		"empty value": {ID: "e", Destination: "orders", Payload: []byte{}},
		"post":        {ID: "f", Destination: "orders", Method: "POST"},
		"topic":       {ID: "g", Key: "order-9", Topic: "order.paid", Payload: []byte(`{}`)},
	}
	for name, ev := range cases {
		msg, err := m.record(0, &ev)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		msg.Topic, msg.Partition, msg.Offset = "events", 3, 17
		got := m.mapRecord(&msg)
		if got.dead != "" {
			t.Fatalf("%s: the record maps to a dead letter: %s", name, got.dead)
		}
		want := ev
		want.DeliverAt = want.DeliverAt.UTC()
		if !sameEvent(&got.ev, &want) {
			t.Errorf("%s: sent %+v, the owner reads %+v", name, want, got.ev)
		}
	}
	if msg, _ := m.record(0, &outbox.Event{ID: "k", Key: "customer-7", Destination: "d"}); string(msg.Key) != "customer-7" {
		t.Errorf("record key %q, want the event's key as it is (external producers hash the same bytes)", msg.Key)
	}
	if msg, _ := m.record(0, &outbox.Event{ID: "k", Key: mapKey([]byte{1, 2}), Destination: "d"}); !bytes.Equal(msg.Key, []byte{1, 2}) {
		t.Errorf("record key %v, want the binary key's bytes", msg.Key)
	}
}

// What a record cannot give back is refused, naming the field, rather than
// reaching the owner as another event.
func TestEventRecordRefusesWhatCannotRoundTrip(t *testing.T) {
	m := encodeMapper()
	for _, c := range []struct {
		ev    outbox.Event
		field string
	}{
		{outbox.Event{ID: "a", Destination: "d", Headers: map[string]string{"outbox-id": "x"}}, "headers"},
		{outbox.Event{ID: "a", Destination: "d", Headers: map[string]string{"outbox-destination": "x"}}, "headers"},
		{outbox.Event{ID: "a", Destination: "d", Headers: map[string]string{"outbox-method": "PUT"}}, "headers"},
		{outbox.Event{ID: "a", Topic: "t", Headers: map[string]string{"outbox-topic": "u"}}, "headers"},
		{outbox.Event{ID: "a", Destination: "d", Headers: map[string]string{"outbox-deliver-at": "x"}}, "headers"},
		{outbox.Event{ID: "a", Destination: "d", Headers: map[string]string{"traceparent": "x"}}, "headers"},
		{outbox.Event{ID: "a", Destination: "d", Key: "base64:aGk="}, "key"}, // "hi" is printable: its key would be "hi"
		{outbox.Event{ID: "a", Destination: "d", Key: "base64:not base64"}, "key"},
		{outbox.Event{ID: "a", Destination: "d", Key: "base64:"}, "key"},
	} {
		_, err := m.record(4, &c.ev)
		ve, ok := err.(*outbox.ValidationError)
		if !ok || ve.Field != c.field || ve.Index != 4 {
			t.Errorf("%+v: %v; want a validation error for events[4].%s", c.ev, err, c.field)
		}
	}
}

// FuzzEventRecord encodes arbitrary events: the encoder never panics, and
// a valid event it encodes maps back to itself.
func FuzzEventRecord(f *testing.F) {
	f.Add("id-1", "key", "orders", "PUT", "X-A", "v", []byte("payload"), int64(1733342701123456789), "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
	f.Add("id-2", "base64:AP8=", "https://example.com/h", "", "outbox-id", "x", []byte{}, int64(0), "")
	f.Add("", "base64:aGk=", "", "get", "", "", []byte(nil), int64(-1), "bad")
	m := encodeMapper()
	f.Fuzz(func(t *testing.T, id, key, dest, method, hname, hval string, payload []byte, at int64, traceparent string) {
		ev := outbox.Event{ID: id, Key: key, Destination: dest, Method: method, Payload: payload, TraceParent: traceparent}
		if at > 0 {
			ev.DeliverAt = time.Unix(0, at).UTC()
		}
		if hname != "" {
			ev.Headers = map[string]string{hname: hval}
		}
		msg, err := m.record(0, &ev)
		if err != nil {
			return
		}
		valid := outbox.ValidText(id) && id != "" && outbox.ValidText(dest) && dest != "" && outbox.ValidText(key) &&
			(method == "" || outbox.ValidMethod(method))
		msg.Topic = "events"
		got := m.mapRecord(&msg)
		if !valid {
			return
		}
		if got.dead != "" {
			t.Fatalf("%+v encodes to a record that maps to a dead letter: %s", ev, got.dead)
		}
		if !sameEvent(&got.ev, &ev) {
			t.Fatalf("sent %+v, the owner reads %+v", ev, got.ev)
		}
	})
}

// FuzzMapRecord maps arbitrary records: mapRecord never panics, and an
// event it maps, encoded again, maps to the same event (so an event read
// from Kafka and produced again is the same event).
func FuzzMapRecord(f *testing.F) {
	f.Add([]byte("k"), []byte("v"), "outbox-id", []byte("id"), "X-A", []byte("1"), "outbox-method", []byte("PUT"))
	f.Add([]byte{0xff}, []byte(nil), "outbox-deliver-at", []byte("2026-12-04T20:05:01.5Z"), "X-A", []byte("2"), "traceparent", []byte("x"))
	f.Add([]byte("base64:x"), []byte("v"), "outbox-destination", []byte(""), "outbox-id", []byte("a\x00"), "tracestate", []byte("k=v"))
	m := encodeMapper()
	f.Fuzz(func(t *testing.T, key, value []byte, h1 string, v1 []byte, h2 string, v2 []byte, h3 string, v3 []byte) {
		msg := kafkago.Message{Topic: "events", Partition: 1, Offset: 9, Key: key, Value: value,
			Headers: []kafkago.Header{{Key: h1, Value: v1}, {Key: h2, Value: v2}, {Key: h3, Value: v3}}}
		got := m.mapRecord(&msg)
		if got.dead != "" {
			if !strings.HasPrefix(got.dead, "unmappable Kafka record") {
				t.Fatalf("dead reason %q", got.dead)
			}
			return
		}
		again, err := m.record(0, &got.ev)
		if err != nil {
			t.Fatalf("%+v maps to %+v, which does not encode again: %v", msg, got.ev, err)
		}
		again.Topic, again.Partition, again.Offset = "events", 2, 10
		back := m.mapRecord(&again)
		if back.dead != "" || !sameEvent(&back.ev, &got.ev) {
			t.Fatalf("%+v maps to %+v; encoded again it maps to %+v (dead %q)", msg, got.ev, back.ev, back.dead)
		}
	})
}
