package kafka

import (
	"errors"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"

	"github.com/outboxd/outbox/store"
)

func sampleEntry(op store.Op) *store.Entry {
	ts := time.Date(2026, 12, 2, 12, 0, 0, 123456789, time.UTC)
	e := &store.Entry{LSN: 42, Op: op, ID: "kafka:in:3:17", Version: 42, Time: ts, Reason: "why"}
	if !op.Deleting() {
		e.Record = &store.Record{ID: e.ID, Key: "k", Destination: "dest", Endpoint: "dest", Method: "POST",
			Headers: map[string]string{"A": "1"}, Payload: []byte("payload"), CreatedAt: ts, NextAttemptAt: ts.Add(time.Minute),
			Attempts: 2, Deliveries: 3, LastStatus: 503, LastError: "unavailable", Version: 42}
		if op == store.OpDead {
			e.Record.DeadReason, e.Record.DeadAt = "gone", ts
		}
	}
	return e
}

// Every op survives the trip through a changelog topic record; deletes are
// tombstones (null value) that still say what they were.
func TestChangelogRecordRoundTrip(t *testing.T) {
	for op := store.OpEnqueue; op <= store.OpSupersede; op++ {
		e := sampleEntry(op)
		m := entryMessage(e)
		if string(m.Key) != e.ID || (op.Deleting() != (m.Value == nil)) {
			t.Fatalf("%v: key %q value %d bytes", op, m.Key, len(m.Value))
		}
		got, err := decodeChangelogRecord(m.Key, m.Value, m.Headers, e.Time)
		if err != nil {
			t.Fatalf("%v: %v", op, err)
		}
		if got.LSN != e.LSN || got.Op != op || got.ID != e.ID || !got.Time.Equal(e.Time) {
			t.Errorf("%v: decoded %+v", op, got)
		}
		if !op.Deleting() && (got.Record == nil || !got.Record.SameContent(e.Record) || got.Record.Attempts != 2) {
			t.Errorf("%v: record %+v", op, got.Record)
		}
	}
}

func TestDecodeChangelogRecordRejects(t *testing.T) {
	good := entryMessage(sampleEntry(store.OpEnqueue))
	for name, m := range map[string]kafkago.Message{
		"no key":        {Value: good.Value, Headers: good.Headers},
		"other key":     {Key: []byte("other"), Value: good.Value, Headers: good.Headers},
		"corrupt value": {Key: good.Key, Value: append(append([]byte(nil), good.Value[:len(good.Value)-1]...), good.Value[len(good.Value)-1]^1)},
		"bad lsn":       {Key: good.Key, Headers: []kafkago.Header{{Key: HeaderLSN, Value: []byte("x")}}},
		"unknown op":    {Key: good.Key, Headers: []kafkago.Header{{Key: HeaderOp, Value: []byte("explode")}}},
		"null enqueue":  {Key: good.Key, Headers: []kafkago.Header{{Key: HeaderOp, Value: []byte("enqueue")}}},
		"delete value":  {Key: good.Key, Value: store.EncodeEntry(sampleEntry(store.OpDelete))},
	} {
		if _, err := decodeChangelogRecord(m.Key, m.Value, m.Headers, time.Now()); !errors.Is(err, ErrBadChangelogRecord) {
			t.Errorf("%s: %v, want ErrBadChangelogRecord", name, err)
		}
	}
	// A bare tombstone (written by another tool) is a delete.
	e, err := decodeChangelogRecord([]byte("id"), nil, nil, time.Unix(5, 0))
	if err != nil || e.Op != store.OpDelete || e.ID != "id" {
		t.Errorf("bare tombstone: %+v %v", e, err)
	}
}

// FuzzDecodeChangelogRecord feeds arbitrary changelog topic records to the
// restore decoder: it must never panic, and what it accepts must encode back
// to a record that decodes to the same entry.
func FuzzDecodeChangelogRecord(f *testing.F) {
	for _, op := range []store.Op{store.OpEnqueue, store.OpDead, store.OpDelete} {
		m := entryMessage(sampleEntry(op))
		f.Add(m.Key, m.Value, op.String(), "42")
	}
	f.Add([]byte("id"), []byte{}, "", "")
	f.Fuzz(func(t *testing.T, key, value []byte, op, lsn string) {
		var hs []kafkago.Header
		if op != "" {
			hs = append(hs, kafkago.Header{Key: HeaderOp, Value: []byte(op)})
		}
		if lsn != "" {
			hs = append(hs, kafkago.Header{Key: HeaderLSN, Value: []byte(lsn)})
		}
		e, err := decodeChangelogRecord(key, value, hs, time.Unix(1, 0))
		if err != nil {
			if !errors.Is(err, ErrBadChangelogRecord) {
				t.Fatalf("error %v does not wrap ErrBadChangelogRecord", err)
			}
			return
		}
		if e.ID != string(key) {
			t.Fatalf("ID %q from key %q", e.ID, key)
		}
		if len(value) == 0 {
			return
		}
		m := entryMessage(e)
		again, err := decodeChangelogRecord(m.Key, m.Value, m.Headers, e.Time)
		if err != nil {
			t.Fatalf("re-encoded record refused: %v", err)
		}
		if again.ID != e.ID || again.Op != e.Op || !again.Record.SameContent(e.Record) {
			t.Fatalf("round trip changed %+v into %+v", e, again)
		}
	})
}
