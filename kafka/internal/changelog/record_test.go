package changelog

import (
	"bytes"
	"errors"
	"reflect"
	"strconv"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"

	"github.com/outboxd/outbox/outbox"
	"github.com/outboxd/outbox/store"
)

// sampleEntry is a changelog entry of op as the outbox hands it to the
// shipper. It is built from the store's own encoding, so that the tests
// below also hold the topic's wire format to what earlier builds shipped.
func sampleEntry(t testing.TB, op outbox.ChangelogOp) outbox.ChangelogEntry {
	t.Helper()
	se := sampleStoreEntry(store.Op(op))
	if op.Deleting() {
		return outbox.ChangelogEntry{LSN: se.LSN, Op: op, ID: se.ID, Version: se.Version, Time: se.Time, Reason: se.Reason}
	}
	e, err := outbox.DecodeChangelogEntry(store.EncodeEntry(se))
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func sampleStoreEntry(op store.Op) *store.Entry {
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
	for op := outbox.OpEnqueue; op <= outbox.OpSupersede; op++ {
		e := sampleEntry(t, op)
		m := EntryMessage(e)
		if string(m.Key) != e.ID || (op.Deleting() != (m.Value == nil)) {
			t.Fatalf("%v: key %q value %d bytes", op, m.Key, len(m.Value))
		}
		if !op.Deleting() && !bytes.Equal(m.Value, store.EncodeEntry(sampleStoreEntry(store.Op(op)))) {
			t.Fatalf("%v: the record's value is not the store's encoding of the entry", op)
		}
		got, err := DecodeRecord(m.Key, m.Value, m.Headers, e.Time)
		if err != nil {
			t.Fatalf("%v: %v", op, err)
		}
		if got.LSN != e.LSN || got.Op != op || got.ID != e.ID || !got.Time.Equal(e.Time) {
			t.Errorf("%v: decoded %+v", op, got)
		}
		gotEv, ok := got.Event()
		wantEv, _ := e.Event()
		if !op.Deleting() && (!ok || !reflect.DeepEqual(gotEv, wantEv) || gotEv.Attempts != 2) {
			t.Errorf("%v: record %+v", op, gotEv)
		}
	}
}

func TestDecodeChangelogRecordRejects(t *testing.T) {
	good := EntryMessage(sampleEntry(t, outbox.OpEnqueue))
	for name, m := range map[string]kafkago.Message{
		"no key":        {Value: good.Value, Headers: good.Headers},
		"other key":     {Key: []byte("other"), Value: good.Value, Headers: good.Headers},
		"corrupt value": {Key: good.Key, Value: append(append([]byte(nil), good.Value[:len(good.Value)-1]...), good.Value[len(good.Value)-1]^1)},
		"bad lsn":       {Key: good.Key, Headers: []kafkago.Header{{Key: HeaderLSN, Value: []byte("x")}}},
		"unknown op":    {Key: good.Key, Headers: []kafkago.Header{{Key: HeaderOp, Value: []byte("explode")}}},
		"null enqueue":  {Key: good.Key, Headers: []kafkago.Header{{Key: HeaderOp, Value: []byte("enqueue")}}},
		"delete value":  {Key: good.Key, Value: store.EncodeEntry(sampleStoreEntry(store.OpDelete))},
	} {
		if _, err := DecodeRecord(m.Key, m.Value, m.Headers, time.Now()); !errors.Is(err, ErrBadRecord) {
			t.Errorf("%s: %v, want ErrBadRecord", name, err)
		}
	}
	// A bare tombstone (written by another tool) is a delete.
	e, err := DecodeRecord([]byte("id"), nil, nil, time.Unix(5, 0))
	if err != nil || e.Op != outbox.OpDelete || e.ID != "id" {
		t.Errorf("bare tombstone: %+v %v", e, err)
	}
}

// FuzzDecodeRecord feeds arbitrary changelog topic records to the
// restore decoder: it must never panic, and what it accepts must encode back
// to a record that decodes to the same entry.
func FuzzDecodeRecord(f *testing.F) {
	for _, op := range []outbox.ChangelogOp{outbox.OpEnqueue, outbox.OpDead, outbox.OpDelete} {
		m := EntryMessage(sampleEntry(f, op))
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
		e, err := DecodeRecord(key, value, hs, time.Unix(1, 0))
		if err != nil {
			if !errors.Is(err, ErrBadRecord) {
				t.Fatalf("error %v does not wrap ErrBadRecord", err)
			}
			return
		}
		if e.ID != string(key) {
			t.Fatalf("ID %q from key %q", e.ID, key)
		}
		if len(value) == 0 {
			return
		}
		m := EntryMessage(e)
		again, err := DecodeRecord(m.Key, m.Value, m.Headers, e.Time)
		if err != nil {
			t.Fatalf("re-encoded record refused: %v", err)
		}
		ev, _ := e.Event()
		againEv, _ := again.Event()
		if again.ID != e.ID || again.Op != e.Op || !reflect.DeepEqual(againEv, ev) {
			t.Fatalf("round trip changed %+v into %+v", e, again)
		}
	})
}

// FuzzRecordEpoch feeds arbitrary epoch and op headers to the fencing
// decoder: it never panics; an epoch it accepts is the header's decimal
// value, and a malformed one wraps ErrBadRecord.
func FuzzRecordEpoch(f *testing.F) {
	f.Add("7", "enqueue")
	f.Add("0", opFence)
	f.Add("-1", "")
	f.Add("x", "delete")
	f.Add("99999999999999999999", "")
	f.Fuzz(func(t *testing.T, epoch, op string) {
		hs := []kafkago.Header{{Key: HeaderEpoch, Value: []byte(epoch)}, {Key: HeaderOp, Value: []byte(op)}}
		e, fence, err := RecordEpoch(hs)
		if err != nil {
			if !errors.Is(err, ErrBadRecord) {
				t.Fatalf("error %v does not wrap ErrBadRecord", err)
			}
			return
		}
		if n, perr := strconv.ParseInt(epoch, 10, 64); perr != nil || n != e || n < 0 {
			t.Fatalf("epoch %q read as %d", epoch, e)
		}
		if fence != (op == opFence) {
			t.Fatalf("op %q read as fence=%v", op, fence)
		}
	})
}
