package store

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"
	"time"
)

const testTraceParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// A record's trace context round-trips, with or without a DeliverAt before
// it; a record without one keeps the bytes it had before the field existed;
// a TraceState without a TraceParent is not kept.
func TestRecordTraceContextRoundTrip(t *testing.T) {
	for _, at := range []time.Time{{}, time.Date(2026, 1, 3, 4, 5, 6, 7, time.UTC)} {
		r := sampleRecord()
		r.DeliverAt = at
		r.TraceParent, r.TraceState = testTraceParent, "vendor=x,other=y"
		b := EncodeRecord(r)
		got, err := DecodeRecord(b)
		if err != nil || !reflect.DeepEqual(got, r) {
			t.Fatalf("round trip = %#v, %v; want %#v", got, err, r)
		}
		plain := sampleRecord()
		plain.DeliverAt = at
		if len(EncodeRecord(plain)) >= len(b) {
			t.Fatal("the trace context takes no bytes")
		}
	}

	plain := sampleRecord()
	plain.TraceState = "orphan=1"
	old := &encoder{b: []byte{kindRecord, codecVersion, 0, 0, 0, 0}}
	old.record(sampleRecord())
	if !bytes.Equal(old.finish(), EncodeRecord(plain)) {
		t.Fatal("a record without TraceParent changed its bytes")
	}
	got, err := DecodeRecord(EncodeRecord(plain))
	if err != nil || got.TraceParent != "" || got.TraceState != "" {
		t.Fatalf("decoded %q %q, %v", got.TraceParent, got.TraceState, err)
	}
}

// A record written before the trace context existed (the seeds of the fuzz
// corpus, "scheduled" among them) decodes without one.
func TestRecordOlderLayoutHasNoTraceContext(t *testing.T) {
	b := readSeed(t, "scheduled")
	r, err := DecodeRecord(b)
	if err != nil {
		t.Fatal(err)
	}
	if r.TraceParent != "" || r.TraceState != "" || r.DeliverAt.IsZero() {
		t.Fatalf("decoded %q %q %v", r.TraceParent, r.TraceState, r.DeliverAt)
	}
	traced, err := DecodeRecord(readSeed(t, "traced"))
	if err != nil || traced.TraceParent != testTraceParent || traced.TraceState != "vendor=x" {
		t.Fatalf("traced seed: %+v, %v", traced, err)
	}
}

// The trace context survives the store: insert, a reschedule, and a
// reopen of the file.
func TestInsertKeepsTraceContext(t *testing.T) {
	clk := newClock()
	path := filepath.Join(t.TempDir(), "outbox.db")
	s := openAt(t, path, Options{Now: clk.Now})
	r := rec("traced", "1")
	r.TraceParent, r.TraceState = testTraceParent, "vendor=x"
	mustInsert(t, s, r)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openAt(t, path, Options{Now: clk.Now})
	got, st, err := s.Get("traced")
	if err != nil || st != StatePending {
		t.Fatalf("get: %v %v", st, err)
	}
	if got.TraceParent != testTraceParent || got.TraceState != "vendor=x" {
		t.Fatalf("after reopen: %q %q", got.TraceParent, got.TraceState)
	}
}

// readSeed reads a FuzzDecodeRecord seed (a "go test fuzz v1" file with one
// []byte value).
func readSeed(t *testing.T, name string) []byte {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "fuzz", "FuzzDecodeRecord", name))
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.Split(bytes.TrimSpace(raw), []byte("\n"))
	if len(lines) != 2 || !bytes.HasPrefix(lines[1], []byte("[]byte(")) {
		t.Fatalf("seed %s: unexpected format", name)
	}
	v := bytes.TrimSuffix(bytes.TrimPrefix(lines[1], []byte("[]byte(")), []byte(")"))
	s, err := strconv.Unquote(string(v))
	if err != nil {
		t.Fatalf("seed %s: %v", name, err)
	}
	return []byte(s)
}
