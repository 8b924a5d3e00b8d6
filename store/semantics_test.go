package store

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestDeletesStayDeleted is the Kafka Streams report: records deleted after
// delivery came back in the next punctuation. Here a snapshot is taken, some
// of its records are deleted by compare-and-delete, and they stay gone in the
// next snapshot, after a reopen and in a store rebuilt from the changelog; a
// late delete with an old version never removes a newer write.
func TestDeletesStayDeleted(t *testing.T) {
	clk := newClock()
	path := filepath.Join(t.TempDir(), "outbox.db")
	s := openAt(t, path, Options{Now: clk.Now})
	var recs []*Record
	for i := range 50 {
		r := rec(fmt.Sprintf("evt-%03d", i), "payload")
		r.NextAttemptAt = clk.Now().Add(time.Duration(i) * time.Millisecond)
		recs = append(recs, r)
	}
	mustInsert(t, s, recs...)
	clk.Advance(time.Second)

	snap, err := s.Due(DueQuery{Now: clk.Now(), Limit: 20})
	if err != nil || len(snap) != 20 {
		t.Fatalf("Due = %d records, %v", len(snap), err)
	}
	deleted := map[string]bool{}
	var outs []Outcome
	for i, r := range snap {
		if i%2 == 0 {
			outs = append(outs, Outcome{Kind: OutcomeDelete, ID: r.ID, Version: r.Version})
			deleted[r.ID] = true
		}
	}
	res, err := s.Apply(t.Context(), outs, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r != Applied {
			t.Fatalf("outcome %d: %v", i, r)
		}
	}

	checkGone := func(s *Store, when string) {
		t.Helper()
		due, err := s.Due(DueQuery{Now: clk.Now(), Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		if len(due) != 50-len(deleted) {
			t.Errorf("%s: %d due records, want %d", when, len(due), 50-len(deleted))
		}
		for _, r := range due {
			if deleted[r.ID] {
				t.Errorf("%s: deleted record %s is back in the snapshot", when, r.ID)
			}
		}
		for id := range deleted {
			if r, st, err := s.Get(id); err != nil || st != StateDelivered || r != nil {
				t.Errorf("%s: Get(%s) = %v, %v, %v; want delivered", when, id, r, st, err)
			}
			if _, ok, err := s.Tombstone(id); !ok || err != nil {
				t.Errorf("%s: no tombstone for %s (%v)", when, id, err)
			}
			st, err := s.Insert(t.Context(), []*Record{rec(id, "payload")})
			if err != nil || st[0] != Duplicate {
				t.Errorf("%s: re-insert of %s: %v %v, want Duplicate", when, id, st, err)
			}
		}
	}
	checkGone(s, "next snapshot")

	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openAt(t, path, Options{Now: clk.Now})
	checkGone(s, "after reopen")

	entries, err := s.Changelog(0, 0)
	if err != nil {
		t.Fatal(err)
	}
	fresh := openTest(t, Options{Now: clk.Now})
	if err := fresh.Restore(t.Context(), entries); err != nil {
		t.Fatal(err)
	}
	checkGone(fresh, "restored from the changelog")

	// A late compare-and-delete carrying the version that was delivered
	// must not remove a newer write of the same record.
	kept := snap[1]
	newer, err := s.Update(t.Context(), kept.ID, func(r *Record) error { r.Payload = []byte("newer"); return nil })
	if err != nil {
		t.Fatal(err)
	}
	res, err = s.Apply(t.Context(), []Outcome{{Kind: OutcomeDelete, ID: kept.ID, Version: kept.Version}}, nil)
	if err != nil || res[0] != Stale || res[0].Err() != ErrStale {
		t.Fatalf("late delete: %v, %v; want Stale", res, err)
	}
	got, st, err := s.Get(kept.ID)
	if err != nil || st != StatePending || string(got.Payload) != "newer" || got.Version != newer.Version {
		t.Fatalf("after the late delete: %+v %v %v", got, st, err)
	}
	// A delete of a record that is already gone is stale too.
	res, err = s.Apply(t.Context(), []Outcome{{Kind: OutcomeDelete, ID: snap[0].ID, Version: snap[0].Version}}, nil)
	if err != nil || res[0] != Stale {
		t.Fatalf("second delete: %v, %v; want Stale", res, err)
	}
}

// TestNoLostUpdate is the room-leave report: concurrent "leave room"
// requests read the same state and the last write won. Each goroutine
// removes one user through Update; none may be lost.
func TestNoLostUpdate(t *testing.T) {
	for _, n := range []int{2, 100} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			s := openTest(t, Options{})
			users := make([]string, n)
			for i := range users {
				users[i] = fmt.Sprintf("user-%03d", i)
			}
			room := rec("room-1", strings.Join(users, ","))
			mustInsert(t, s, room)
			start := make(chan struct{})
			var wg sync.WaitGroup
			for _, u := range users {
				wg.Go(func() {
					<-start
					_, err := s.Update(t.Context(), room.ID, func(r *Record) error {
						members := slices.DeleteFunc(strings.Split(string(r.Payload), ","), func(m string) bool { return m == u || m == "" })
						r.Payload = []byte(strings.Join(members, ","))
						return nil
					})
					if err != nil {
						t.Errorf("leave %s: %v", u, err)
					}
				})
			}
			close(start)
			wg.Wait()
			got, _, err := s.Get(room.ID)
			if err != nil {
				t.Fatal(err)
			}
			if len(got.Payload) != 0 {
				t.Fatalf("room still holds %q", got.Payload)
			}
			hist, err := s.History(room.ID)
			if err != nil {
				t.Fatal(err)
			}
			updates := 0
			for _, e := range hist {
				if e.Op == OpUpdate {
					updates++
				}
			}
			if updates != n || len(hist) != n+1 {
				t.Fatalf("history has %d entries, %d updates; want %d updates after one enqueue", len(hist), updates, n)
			}
			if got.Version != hist[len(hist)-1].LSN {
				t.Fatalf("record version %d, last entry LSN %d", got.Version, hist[len(hist)-1].LSN)
			}
		})
	}
}

// TestChangelogMatchesState checks that replaying the changelog of a store
// that went through every kind of change rebuilds the same state.
func TestChangelogMatchesState(t *testing.T) {
	clk := newClock()
	s := openTest(t, Options{Now: clk.Now})
	ctx := t.Context()
	for i := range 30 {
		r := rec(fmt.Sprintf("e%02d", i), fmt.Sprint(i))
		r.Key = fmt.Sprintf("k%d", i%3)
		mustInsert(t, s, r)
	}
	deadIn := rec("unmappable", "?")
	deadIn.DeadReason = "no destination"
	mustInsert(t, s, deadIn)
	due, _ := s.Due(DueQuery{Now: clk.Now(), Limit: 30})
	var outs []Outcome
	for i, r := range due {
		switch i % 4 {
		case 0:
			outs = append(outs, Outcome{Kind: OutcomeDelete, ID: r.ID, Version: r.Version})
		case 1:
			outs = append(outs, Outcome{Kind: OutcomeReschedule, ID: r.ID, Version: r.Version, Attempts: 1, Deliveries: 1, NextAttemptAt: clk.Now().Add(time.Minute), LastStatus: 503})
		case 2:
			outs = append(outs, Outcome{Kind: OutcomeDead, ID: r.ID, Version: r.Version, Attempts: 1, Deliveries: 1, LastStatus: 400, Reason: "400 bad request"})
		}
	}
	if _, err := s.Apply(ctx, outs, []EndpointState{{Name: "orders", FailureStreak: 2}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Replay(ctx, due[2].ID, clk.Now()); err != nil {
		t.Fatal(err)
	}
	if err := s.Drop(ctx, due[3].ID, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpsertKey(ctx, "k1", func(cur *Record) (*Record, error) {
		return &Record{ID: "k1-latest", Destination: "orders", Payload: []byte("latest")}, nil
	}); err != nil {
		t.Fatal(err)
	}

	entries, err := s.Changelog(0, 10_000)
	if err != nil {
		t.Fatal(err)
	}
	fresh := openTest(t, Options{Now: clk.Now})
	// Restore in two calls, as a consumer of a stream would.
	half := len(entries) / 2
	if err := fresh.Restore(ctx, entries[:half]); err != nil {
		t.Fatal(err)
	}
	if err := fresh.Restore(ctx, entries[half:]); err != nil {
		t.Fatal(err)
	}
	for _, st := range []State{StatePending, StateDead} {
		a := listAll(t, s, st)
		b := listAll(t, fresh, st)
		if !slices.Equal(slices.Sorted(maps.Keys(a)), slices.Sorted(maps.Keys(b))) {
			t.Fatalf("%v: original %v, restored %v", st, slices.Sorted(maps.Keys(a)), slices.Sorted(maps.Keys(b)))
		}
		for id, r := range a {
			o := b[id]
			if !r.SameContent(o) || r.Attempts != o.Attempts || !r.NextAttemptAt.Equal(o.NextAttemptAt) || r.DeadReason != o.DeadReason {
				t.Fatalf("%s differs after restore:\n%+v\n%+v", id, r, o)
			}
		}
	}
	sa, _ := s.Stats()
	sb, _ := fresh.Stats()
	if sa.Pending != sb.Pending || sa.Dead != sb.Dead || sa.Tombstones != sb.Tombstones {
		t.Fatalf("stats differ: %+v vs %+v", sa, sb)
	}
}

func listAll(t *testing.T, s *Store, st State) map[string]*Record {
	t.Helper()
	out := map[string]*Record{}
	after := ""
	for {
		recs, next, err := s.List(ListQuery{State: st, After: after, Limit: 7})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			out[r.ID] = r
		}
		if next == "" {
			return out
		}
		after = next
	}
}
