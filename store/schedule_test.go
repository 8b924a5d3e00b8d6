package store

import (
	"bytes"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

// A record's not-before time round-trips; a record without one keeps the
// bytes of the first layout (nothing after DeadReason), and such bytes
// decode with no DeliverAt.
func TestRecordDeliverAtRoundTripAndOlderLayout(t *testing.T) {
	r := sampleRecord()
	r.DeliverAt = time.Date(2026, 1, 3, 4, 5, 6, 7, time.UTC)
	got, err := DecodeRecord(EncodeRecord(r))
	if err != nil || !reflect.DeepEqual(got, r) {
		t.Fatalf("round trip = %#v, %v; want %#v", got, err, r)
	}

	plain := sampleRecord()
	old := &encoder{b: []byte{kindRecord, codecVersion, 0, 0, 0, 0}}
	old.record(plain) // no DeliverAt: the first layout's fields only
	if b := old.finish(); !bytes.Equal(b, EncodeRecord(plain)) {
		t.Fatal("a record without DeliverAt is not encoded in the first layout")
	}
	scheduled := EncodeRecord(r)
	if len(scheduled) <= len(EncodeRecord(plain)) {
		t.Fatal("DeliverAt takes no bytes")
	}
	got, err = DecodeRecord(EncodeRecord(plain))
	if err != nil || !got.DeliverAt.IsZero() {
		t.Fatalf("first layout decodes DeliverAt %v, %v", got.DeliverAt, err)
	}
}

// A record inserted with a DeliverAt ahead is due at that time, not before,
// also after the file is reopened; one whose DeliverAt has passed is due at
// once. Re-inserting it with another DeliverAt is an idempotent no-op.
func TestInsertScheduled(t *testing.T) {
	clk := newClock()
	path := filepath.Join(t.TempDir(), "outbox.db")
	s := openAt(t, path, Options{Now: clk.Now})
	now := clk.Now()
	later := rec("later", "1")
	later.DeliverAt = now.Add(time.Hour)
	past := rec("past", "2")
	past.DeliverAt = now.Add(-time.Hour)
	mustInsert(t, s, later, past)

	due := func(s *Store, at time.Time) []string {
		t.Helper()
		recs, err := s.Due(DueQuery{Now: at})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, r := range recs {
			ids = append(ids, r.ID)
		}
		return ids
	}
	if got := due(s, now); !reflect.DeepEqual(got, []string{"past"}) {
		t.Fatalf("due now = %v, want [past]", got)
	}
	again := rec("later", "1")
	again.DeliverAt = now.Add(2 * time.Hour)
	if st := mustInsert(t, s, again); st[0] != AlreadyPresent {
		t.Fatalf("re-insert with another DeliverAt: %v, want AlreadyPresent", st)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = openAt(t, path, Options{Now: clk.Now})
	if got := due(s, now.Add(time.Hour-time.Nanosecond)); !reflect.DeepEqual(got, []string{"past"}) {
		t.Fatalf("after reopening, due just before DeliverAt = %v, want [past]", got)
	}
	if got := due(s, now.Add(time.Hour)); !reflect.DeepEqual(got, []string{"past", "later"}) {
		t.Fatalf("after reopening, due at DeliverAt = %v, want [past later]", got)
	}
	r, _, err := s.Get("later")
	if err != nil || !r.DeliverAt.Equal(now.Add(time.Hour)) || !r.NextAttemptAt.Equal(r.DeliverAt) {
		t.Fatalf("Get = %+v, %v", r, err)
	}
}

// Replay makes a dead letter due now, or at its DeliverAt while that is
// still ahead: nothing brings a record before its not-before time.
func TestReplayKeepsNotBefore(t *testing.T) {
	clk := newClock()
	s := openTest(t, Options{Now: clk.Now})
	now := clk.Now()
	d := rec("d", "1")
	d.DeadReason = "unmappable"
	d.DeliverAt = now.Add(time.Hour)
	mustInsert(t, s, d)
	r, err := s.Replay(t.Context(), "d", now)
	if err != nil || !r.NextAttemptAt.Equal(d.DeliverAt) {
		t.Fatalf("Replay = %+v, %v; want due at %v", r, err, d.DeliverAt)
	}
}

// A store rebuilt from the changelog (a restore from Kafka) keeps the
// schedule: the record's DeliverAt and its place in the due index.
func TestRestoreKeepsSchedule(t *testing.T) {
	clk := newClock()
	s := openTest(t, Options{Now: clk.Now})
	r := rec("s", "1")
	r.DeliverAt = clk.Now().Add(time.Hour)
	mustInsert(t, s, r)
	entries, err := s.Changelog(1, 100)
	if err != nil {
		t.Fatal(err)
	}
	fresh := openTest(t, Options{Now: clk.Now})
	if err := fresh.Restore(t.Context(), entries); err != nil {
		t.Fatal(err)
	}
	if due, err := fresh.Due(DueQuery{Now: clk.Now()}); err != nil || len(due) != 0 {
		t.Fatalf("restored store: due now %d, %v; want none", len(due), err)
	}
	got, _, err := fresh.Get("s")
	if err != nil || !got.DeliverAt.Equal(r.DeliverAt) || !got.NextAttemptAt.Equal(r.DeliverAt) {
		t.Fatalf("restored record %+v, %v", got, err)
	}
}
