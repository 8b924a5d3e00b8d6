package store

import (
	"encoding/binary"
	"errors"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// wantState checks what Get says of id.
func wantState(t *testing.T, s *Store, id string, want State) {
	t.Helper()
	r, st, err := s.Get(id)
	if err != nil || st != want || (want >= StateDelivered && r != nil) {
		t.Errorf("Get(%s) = %v, %v, %v; want %v", id, r, st, err, want)
	}
}

// wantDeletedError checks that err is a *DeletedError for id at at.
func wantDeletedError(t *testing.T, err error, id string, at time.Time) {
	t.Helper()
	var de *DeletedError
	if !errors.As(err, &de) || !errors.Is(err, ErrDeleted) || de.ID != id || !de.DeletedAt.Equal(at) {
		t.Fatalf("err = %v, want a *DeletedError for %q dropped at %v", err, id, at)
	}
}

// A tombstone says why the record left: delivered (or superseded) or
// dropped by an operator. Insert skips both; InsertWith with RefuseDeleted
// refuses the whole call for a dropped ID and stores nothing of it.
func TestTombstoneSaysWhy(t *testing.T) {
	clk := newClock()
	s := openTest(t, Options{Now: clk.Now})
	ctx := t.Context()
	mustInsert(t, s, rec("delivered", "1"), rec("dropped", "2"), rec("dead-dropped", "3"))
	got, _, _ := s.Get("delivered")
	if res, err := s.Apply(ctx, []Outcome{{Kind: OutcomeDelete, ID: "delivered", Version: got.Version}}, nil); err != nil || res[0] != Applied {
		t.Fatalf("Apply = %v, %v", res, err)
	}
	clk.Advance(time.Minute)
	droppedAt := clk.Now()
	if err := s.Drop(ctx, "dropped", ""); err != nil {
		t.Fatal(err)
	}
	got, _, _ = s.Get("dead-dropped")
	if _, err := s.Apply(ctx, []Outcome{{Kind: OutcomeDead, ID: "dead-dropped", Version: got.Version, Reason: "400"}}, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.Drop(ctx, "dead-dropped", "dropped by operator"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpsertKey(ctx, "k", func(*Record) (*Record, error) { return rec("k-1", "a"), nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpsertKey(ctx, "k", func(*Record) (*Record, error) { return rec("k-2", "b"), nil }); err != nil {
		t.Fatal(err)
	}

	check := func(when string) {
		t.Helper()
		wantState(t, s, "delivered", StateDelivered)
		wantState(t, s, "k-1", StateDelivered) // superseded
		wantState(t, s, "dropped", StateDeleted)
		wantState(t, s, "dead-dropped", StateDeleted)
		if at, ok, err := s.Tombstone("dropped"); err != nil || !ok || !at.Equal(droppedAt) {
			t.Errorf("%s: Tombstone(dropped) = %v, %v, %v", when, at, ok, err)
		}
		sts := mustInsert(t, s, rec("delivered", "1"), rec("dropped", "2"), rec("k-1", "a"))
		if sts[0] != Duplicate || sts[1] != Deleted || sts[2] != Duplicate {
			t.Errorf("%s: Insert statuses %v, want [duplicate deleted duplicate]", when, sts)
		}
		_, err := s.InsertWith(ctx, []*Record{rec("new", "x"), rec("dropped", "2")}, InsertOptions{RefuseDeleted: true})
		wantDeletedError(t, err, "dropped", droppedAt)
		if _, _, err := s.Get("new"); !errors.Is(err, ErrNotFound) {
			t.Errorf("%s: a refused call stored a record: %v", when, err)
		}
		sts, err = s.InsertWith(ctx, []*Record{rec("delivered", "1")}, InsertOptions{RefuseDeleted: true})
		if err != nil || sts[0] != Duplicate {
			t.Errorf("%s: a delivered ID with RefuseDeleted: %v, %v; want a duplicate", when, sts, err)
		}
		if st, _ := s.Stats(); st.Tombstones != 4 || st.Pending != 1 {
			t.Errorf("%s: Stats = %+v, want 4 tombstones and 1 pending", when, st)
		}
	}
	check("open")
	path := s.Path()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openAt(t, path, Options{Now: clk.Now})
	check("reopened")

	// Trimmed with the retention, the ID is free again.
	clk.Advance(time.Hour)
	if n, err := s.TrimTombstones(ctx, clk.Now()); err != nil || n != 4 {
		t.Fatalf("TrimTombstones = %d, %v", n, err)
	}
	if sts, err := s.InsertWith(ctx, []*Record{rec("dropped", "2")}, InsertOptions{RefuseDeleted: true}); err != nil || sts[0] != Inserted {
		t.Fatalf("insert after the trim: %v, %v", sts, err)
	}
}

// A file written by an older build, whose tombstones carry no reason (an
// empty time index value), reads every tombstone as a delivery; and a drop
// written by this build keeps the tombstone value older builds read (8
// bytes), its reason only in the time index value they ignore.
func TestTombstoneOldEncoding(t *testing.T) {
	clk := newClock()
	s := openTest(t, Options{Now: clk.Now})
	ctx := t.Context()
	mustInsert(t, s, rec("old", "1"), rec("new", "2"))
	for _, id := range []string{"old", "new"} {
		if err := s.Drop(ctx, id, ""); err != nil {
			t.Fatal(err)
		}
	}
	path := s.Path()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		tombs, index := tx.Bucket(bucketTombs), tx.Bucket(bucketTombTime)
		for _, id := range []string{"old", "new"} {
			v := tombs.Get([]byte(id))
			if len(v) != 8 {
				t.Errorf("tombstone value of %s has %d bytes; older builds read exactly 8", id, len(v))
				continue
			}
			if why := index.Get(tombIndexKey(v, []byte(id))); string(why) != "o" {
				t.Errorf("time index value of %s = %q, want %q", id, why, "o")
			}
		}
		// What an older build writes when it drops "old".
		v := make([]byte, 8)
		binary.BigEndian.PutUint64(v, nanos(clk.Now()))
		if err := tombs.Put([]byte("old"), v); err != nil {
			return err
		}
		return index.Put(tombIndexKey(v, []byte("old")), nil)
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	s = openAt(t, path, Options{Now: clk.Now})
	wantState(t, s, "old", StateDelivered)
	wantState(t, s, "new", StateDeleted)
	sts, err := s.InsertWith(ctx, []*Record{rec("old", "1")}, InsertOptions{RefuseDeleted: true})
	if err != nil || sts[0] != Duplicate {
		t.Fatalf("old-format tombstone with RefuseDeleted: %v, %v; want a duplicate", sts, err)
	}
}

func TestDecodeTombstone(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 5, time.UTC)
	v := binary.BigEndian.AppendUint64(nil, nanos(at))
	for _, c := range []struct {
		name    string
		v, why  []byte
		indexed bool
		want    tombKind
		corrupt bool
	}{
		{name: "old encoding", v: v, why: nil, indexed: true, want: tombDelivered},
		{name: "empty value", v: v, why: []byte{}, indexed: true, want: tombDelivered},
		{name: "dropped", v: v, why: []byte("o"), indexed: true, want: tombDeleted},
		{name: "unknown reason", v: v, why: []byte("x"), indexed: true, corrupt: true},
		{name: "long reason", v: v, why: []byte("oo"), indexed: true, corrupt: true},
		{name: "not indexed", v: v, indexed: false, corrupt: true},
		{name: "short value", v: v[:7], indexed: true, corrupt: true},
		{name: "long value", v: append(append([]byte(nil), v...), 'o'), indexed: true, corrupt: true},
	} {
		got, err := decodeTombstone([]byte("id"), c.v, c.why, c.indexed)
		switch {
		case c.corrupt:
			if !errors.Is(err, ErrCorrupt) {
				t.Errorf("%s: %+v, %v; want ErrCorrupt", c.name, got, err)
			}
		case err != nil || got.kind != c.want || !got.deletedAt.Equal(at):
			t.Errorf("%s: %+v, %v; want kind %d at %v", c.name, got, err, c.want, at)
		}
	}
}

// Restore from the changelog writes the tombstone each deleting op left in
// the original: a drop stays a drop, dated when it happened.
func TestRestoreKeepsTombstoneReasons(t *testing.T) {
	clk := newClock()
	s := openTest(t, Options{Now: clk.Now})
	ctx := t.Context()
	mustInsert(t, s, rec("delivered", "1"), rec("dropped", "2"), rec("dropped-then-back", "3"))
	got, _, _ := s.Get("delivered")
	if _, err := s.Apply(ctx, []Outcome{{Kind: OutcomeDelete, ID: "delivered", Version: got.Version}}, nil); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Minute)
	droppedAt := clk.Now()
	for _, id := range []string{"dropped", "dropped-then-back"} {
		if err := s.Drop(ctx, id, ""); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.UpsertKey(ctx, "k", func(*Record) (*Record, error) { return rec("k-1", "a"), nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpsertKey(ctx, "k", func(*Record) (*Record, error) { return rec("k-2", "b"), nil }); err != nil {
		t.Fatal(err)
	}
	entries, err := s.Changelog(0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	// A later entry for the same ID wins over the drop: the record is back.
	entries = append(entries, &Entry{LSN: s.LastLSN() + 1, Op: OpEnqueue, ID: "dropped-then-back", Time: clk.Now(), Record: rec("dropped-then-back", "3")})

	clk.Advance(time.Hour) // the restore runs later; tombstones keep their times
	fresh := openTest(t, Options{Now: clk.Now})
	if err := fresh.Restore(ctx, entries); err != nil {
		t.Fatal(err)
	}
	wantState(t, fresh, "delivered", StateDelivered)
	wantState(t, fresh, "k-1", StateDelivered)
	wantState(t, fresh, "dropped", StateDeleted)
	wantState(t, fresh, "dropped-then-back", StatePending)
	_, err = fresh.InsertWith(ctx, []*Record{rec("dropped", "2")}, InsertOptions{RefuseDeleted: true})
	wantDeletedError(t, err, "dropped", droppedAt)
	if st, _ := fresh.Stats(); st.Tombstones != 3 {
		t.Errorf("restored Stats = %+v, want 3 tombstones", st)
	}
	// The restored store's own changelog keeps the op, so a restore from
	// it (a chain of restores) keeps the reason too.
	again, err := fresh.Changelog(0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	third := openTest(t, Options{Now: clk.Now})
	if err := third.Restore(ctx, again); err != nil {
		t.Fatal(err)
	}
	wantState(t, third, "dropped", StateDeleted)
	wantState(t, third, "delivered", StateDelivered)
}
