package store

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

func sampleRecord() *Record {
	return &Record{
		ID: "0190f0c4-7f7e-7b8a-9d3e-1c2b3a4d5e6f", Key: "room-7", Destination: "https://example.com/hook",
		Endpoint: "example", Method: "POST",
		Headers:   map[string]string{"Content-Type": "application/json", "X-B": "2", "X-A": "1"},
		Payload:   []byte(`{"user":"ann"}`),
		CreatedAt: time.Date(2026, 1, 2, 3, 4, 5, 123456789, time.UTC),
		Attempts:  3, Deliveries: 5,
		NextAttemptAt: time.Date(2026, 1, 2, 3, 5, 0, 1, time.UTC),
		LastStatus:    503, LastError: "service unavailable", Version: 42,
		seq: 7,
	}
}

func TestRecordRoundTrip(t *testing.T) {
	for _, r := range []*Record{
		sampleRecord(),
		{ID: "x"},
		{ID: "dead", DeadAt: time.Unix(1, 2).UTC(), DeadReason: "410 gone", CreatedAt: time.Unix(0, 0).UTC()},
	} {
		b := EncodeRecord(r)
		got, err := DecodeRecord(b)
		if err != nil {
			t.Fatalf("DecodeRecord(%q): %v", r.ID, err)
		}
		if !reflect.DeepEqual(got, r) {
			t.Fatalf("round trip:\n got %#v\nwant %#v", got, r)
		}
		if !bytes.Equal(EncodeRecord(got), b) {
			t.Fatalf("re-encoding %q gives other bytes", r.ID)
		}
	}
}

func TestRecordEncodingIsDeterministic(t *testing.T) {
	// Headers come from a map: the bytes must not depend on iteration order.
	want := EncodeRecord(sampleRecord())
	for range 20 {
		if !bytes.Equal(EncodeRecord(sampleRecord()), want) {
			t.Fatal("two encodings of one record differ")
		}
	}
}

func TestRecordTimesAreUTCWithNanoseconds(t *testing.T) {
	loc := time.FixedZone("X", 5*3600)
	r := &Record{ID: "a", CreatedAt: time.Date(2026, 5, 6, 7, 8, 9, 999999999, loc)}
	got, err := DecodeRecord(EncodeRecord(r))
	if err != nil {
		t.Fatal(err)
	}
	if !got.CreatedAt.Equal(r.CreatedAt) || got.CreatedAt.Location() != time.UTC {
		t.Fatalf("CreatedAt = %v, want %v in UTC", got.CreatedAt, r.CreatedAt)
	}
}

func TestEntryRoundTrip(t *testing.T) {
	for _, e := range []*Entry{
		{LSN: 9, Op: OpEnqueue, ID: sampleRecord().ID, Version: 9, Time: time.Unix(100, 5).UTC(), Record: sampleRecord()},
		{LSN: 10, Op: OpDelete, ID: "gone", Version: 10, Time: time.Unix(101, 0).UTC(), Reason: "delivered"},
	} {
		if e.Record != nil {
			e.Record.ID = e.ID
		}
		got, err := DecodeEntry(EncodeEntry(e))
		if err != nil {
			t.Fatalf("DecodeEntry: %v", err)
		}
		if !reflect.DeepEqual(got, e) {
			t.Fatalf("round trip:\n got %#v\nwant %#v", got, e)
		}
	}
}

// The insert path builds a changelog entry in place around an already
// encoded record; it must be the very bytes EncodeEntry writes.
func TestEntryAroundMatchesEncodeEntry(t *testing.T) {
	r := sampleRecord()
	long := string(bytes.Repeat([]byte("i"), MaxIDLen))
	for _, e := range []*Entry{
		{LSN: 9, Op: OpEnqueue, ID: r.ID, Version: 9, Time: time.Unix(100, 5).UTC(), Record: r},
		{LSN: 1 << 62, Op: OpDead, ID: r.ID, Version: 1 << 62, Time: time.Date(2261, 12, 31, 0, 0, 0, 999999999, time.UTC),
			Reason: "too many attempts", Record: r},
		{LSN: 3, Op: OpEnqueue, ID: long, Version: 3, Record: &Record{ID: long}},
	} {
		frame := EncodeRecord(e.Record)
		head := entryHeadMax(e.ID, e.Reason)
		buf := make([]byte, head+len(frame)+frameTrailer)
		copy(buf[head:], frame)
		got, _ := entryAround(buf, head, len(frame), e, nil)
		if want := EncodeEntry(e); !bytes.Equal(got, want) {
			t.Fatalf("entry %d:\n got %x\nwant %x", e.LSN, got, want)
		}
		if !bytes.Equal(buf[head:head+len(frame)], frame) {
			t.Fatalf("entry %d: the record frame was changed", e.LSN)
		}
	}
}

func TestDecodeDetectsDamage(t *testing.T) {
	good := EncodeRecord(sampleRecord())
	cases := map[string][]byte{
		"empty":           nil,
		"short":           good[:5],
		"torn":            good[:len(good)-7],
		"trailing bytes":  append(bytes.Clone(good), 0),
		"entry as record": EncodeEntry(&Entry{LSN: 1, Op: OpDrop, ID: "x", Version: 1}),
	}
	for i := range len(good) {
		b := bytes.Clone(good)
		b[i] ^= 0x10
		cases["flipped byte "+string(rune('a'+i%26))+string(rune('0'+i/26%10))] = b
	}
	for name, b := range cases {
		if _, err := DecodeRecord(b); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: err = %v, want ErrCorrupt", name, err)
		}
	}
	if _, err := DecodeEntry(good); !errors.Is(err, ErrCorrupt) {
		t.Errorf("record as entry: err = %v, want ErrCorrupt", err)
	}
}

func TestDecodeRandomBytes(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		b := make([]byte, rng.IntN(300))
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		if _, err := DecodeRecord(b); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("random %x: err = %v, want ErrCorrupt", b, err)
		}
		if _, err := DecodeEntry(b); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("random %x: err = %v, want ErrCorrupt", b, err)
		}
	}
}

func TestDecodeNewerCodecVersion(t *testing.T) {
	b := EncodeRecord(sampleRecord())
	b[1] = codecVersion + 1
	b = reframe(b)
	if _, err := DecodeRecord(b); !errors.Is(err, ErrSchemaTooNew) {
		t.Fatalf("err = %v, want ErrSchemaTooNew", err)
	}
}

func TestDecodeToleratesAppendedFields(t *testing.T) {
	// A later codec version may append fields to a body; this build reads
	// the fields it knows and ignores the rest.
	r := sampleRecord()
	r.DeliverAt = time.Date(2026, 1, 3, 0, 0, 0, 0, time.UTC)
	r.TraceParent, r.TraceState = testTraceParent, "k=v"
	r.Topic = "order.paid" // the last field this build knows
	b := EncodeRecord(r)
	body := append(bytes.Clone(b[:len(b)-frameTrailer]), 0xAA, 0xBB)
	got, err := DecodeRecord(reframe(append(body, 0, 0, 0, 0)))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, r) {
		t.Fatalf("got %#v", got)
	}
}

// reframe fixes the length and checksum of a frame whose bytes were edited.
func reframe(b []byte) []byte {
	e := &encoder{b: bytes.Clone(b[:len(b)-frameTrailer])}
	return e.finish()
}

func FuzzDecodeRecord(f *testing.F) {
	f.Add(EncodeRecord(sampleRecord()))
	f.Add(EncodeRecord(&Record{ID: "x"}))
	f.Add(EncodeRecord(&Record{ID: "x\x1fe1", Topic: "order.paid", Endpoint: "e1", Destination: "e1"}))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		// The input as a whole value, and as the body of an intact frame (so
		// the field decoder is reached past the checksum).
		checkRecordDecode(t, b)
		checkRecordDecode(t, frameOf(kindRecord, b))
	})
}

// frameOf wraps body in an intact frame of the given kind.
func frameOf(kind byte, body []byte) []byte {
	e := newEncoder(kind, len(body))
	e.b = append(e.b, body...)
	return e.finish()
}

func checkRecordDecode(t *testing.T, b []byte) {
	{
		r, err := DecodeRecord(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrSchemaTooNew) {
				t.Fatalf("error %v is neither ErrCorrupt nor ErrSchemaTooNew", err)
			}
			return
		}
		again, err := DecodeRecord(EncodeRecord(r))
		if err != nil {
			t.Fatalf("re-decoding a decoded record: %v", err)
		}
		if !reflect.DeepEqual(again, r) {
			t.Fatalf("round trip of a decoded record differs:\n%#v\n%#v", again, r)
		}
	}
}

func FuzzDecodeEntry(f *testing.F) {
	r := sampleRecord()
	f.Add(EncodeEntry(&Entry{LSN: 1, Op: OpEnqueue, ID: r.ID, Version: 1, Time: time.Unix(5, 0), Record: r}))
	f.Add(EncodeEntry(&Entry{LSN: 2, Op: OpDelete, ID: r.ID, Version: 2, Reason: "delivered"}))
	f.Fuzz(func(t *testing.T, b []byte) {
		checkEntryDecode(t, b)
		checkEntryDecode(t, frameOf(kindEntry, b))
	})
}

func checkEntryDecode(t *testing.T, b []byte) {
	{
		e, err := DecodeEntry(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrSchemaTooNew) {
				t.Fatalf("error %v is neither ErrCorrupt nor ErrSchemaTooNew", err)
			}
			return
		}
		again, err := DecodeEntry(EncodeEntry(e))
		if err != nil {
			t.Fatalf("re-decoding a decoded entry: %v", err)
		}
		if !reflect.DeepEqual(again, e) {
			t.Fatalf("round trip of a decoded entry differs:\n%#v\n%#v", again, e)
		}
	}
}

// Endpoint states round-trip with their throttle episode and circuit
// breaker, and a state encoded before those fields existed decodes with
// none.
func TestEndpointRoundTripAndOlderLayout(t *testing.T) {
	at := time.Date(2026, 5, 6, 7, 8, 9, 10, time.UTC)
	ep := EndpointState{Name: "orders", Disabled: true, DisabledReason: "gone", DisabledAt: at,
		NotBefore: at.Add(time.Minute), FailureStreak: 3, LastStatus: 429, UpdatedAt: at,
		ThrottledAt: at.Add(time.Second), Throttles: 2,
		BreakerUntil: at.Add(time.Hour), BreakerOpenedAt: at.Add(time.Minute), BreakerOpens: 4}
	got, err := decodeEndpoint(encodeEndpoint(&ep))
	if err != nil || got != ep {
		t.Fatalf("round trip = %+v, %v; want %+v", got, err, ep)
	}

	// The first layout: the same fields up to UpdatedAt.
	e := newEncoder(kindEndpoint, 64)
	e.str(ep.Name)
	e.uvarint(1)
	e.str(ep.DisabledReason)
	e.time(ep.DisabledAt)
	e.time(ep.NotBefore)
	e.varint(int64(ep.FailureStreak))
	e.varint(int64(ep.LastStatus))
	e.time(ep.UpdatedAt)
	old, err := decodeEndpoint(e.finish())
	want := ep
	want.ThrottledAt, want.Throttles = time.Time{}, 0
	want.BreakerUntil, want.BreakerOpenedAt, want.BreakerOpens = time.Time{}, time.Time{}, 0
	if err != nil || old != want {
		t.Fatalf("older layout = %+v, %v; want %+v", old, err, want)
	}

	// The second layout: with the throttle episode, before the breaker.
	e = newEncoder(kindEndpoint, 64)
	e.str(ep.Name)
	e.uvarint(1)
	e.str(ep.DisabledReason)
	e.time(ep.DisabledAt)
	e.time(ep.NotBefore)
	e.varint(int64(ep.FailureStreak))
	e.varint(int64(ep.LastStatus))
	e.time(ep.UpdatedAt)
	e.time(ep.ThrottledAt)
	e.varint(int64(ep.Throttles))
	second, err := decodeEndpoint(e.finish())
	want.ThrottledAt, want.Throttles = ep.ThrottledAt, ep.Throttles
	if err != nil || second != want {
		t.Fatalf("second layout = %+v, %v; want %+v", second, err, want)
	}
}

// FuzzDecodeEndpoint: an endpoint state read from the file never panics,
// and what decodes re-encodes to a state that decodes the same.
func FuzzDecodeEndpoint(f *testing.F) {
	at := time.Date(2026, 5, 6, 7, 8, 9, 10, time.UTC)
	f.Add(encodeEndpoint(&EndpointState{Name: "orders"}))
	f.Add(encodeEndpoint(&EndpointState{Name: "orders", Disabled: true, DisabledReason: "gone", DisabledAt: at,
		NotBefore: at, FailureStreak: 7, LastStatus: 503, UpdatedAt: at, ThrottledAt: at, Throttles: 1,
		BreakerUntil: at.Add(time.Minute), BreakerOpenedAt: at, BreakerOpens: 3}))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		ep, err := decodeEndpoint(b)
		if err != nil {
			return
		}
		again, err := decodeEndpoint(encodeEndpoint(&ep))
		if err != nil {
			t.Fatalf("re-decoding a decoded endpoint: %v", err)
		}
		if !again.DisabledAt.Equal(ep.DisabledAt) || again.Name != ep.Name || again.BreakerOpens != ep.BreakerOpens ||
			!again.BreakerUntil.Equal(ep.BreakerUntil) || again.FailureStreak != ep.FailureStreak {
			t.Fatalf("round trip of a decoded endpoint differs:\n%+v\n%+v", again, ep)
		}
	})
}

func TestTopicFieldKeepsOlderLayouts(t *testing.T) {
	// Records written before the topic field existed (the seed corpus
	// holds some) decode without a topic and encode to the same bytes
	// again, so old files stay readable and unchanged; a record with a
	// topic but no schedule or trace context round-trips.
	for _, name := range []string{"full", "traced", "scheduled", "minimal"} {
		raw, err := os.ReadFile(filepath.Join("testdata", "fuzz", "FuzzDecodeRecord", name))
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
		q := strings.TrimSuffix(strings.TrimPrefix(lines[len(lines)-1], "[]byte("), ")")
		b, err := strconv.Unquote(q)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		r, err := DecodeRecord([]byte(b))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if r.Topic != "" {
			t.Fatalf("%s: topic %q from a record without one", name, r.Topic)
		}
		if got := EncodeRecord(r); !bytes.Equal(got, []byte(b)) {
			t.Fatalf("%s: re-encoding changed the bytes", name)
		}
	}
	r := &Record{ID: "evt" + GroupSep + "billing", Topic: "order.paid", Destination: "billing", Endpoint: "billing", Method: "POST"}
	got, err := DecodeRecord(EncodeRecord(r))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, r) {
		t.Fatalf("got %#v, want %#v", got, r)
	}
}
