package store

import (
	"errors"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// delivery is the record of the delivery of fan-out event id to endpoint.
func delivery(id, endpoint, payload string) *Record {
	return &Record{ID: id + GroupSep + endpoint, Topic: "order.paid", Destination: endpoint, Endpoint: endpoint,
		Method: "POST", Payload: []byte(payload)}
}

// TestGroupDedup: the deliveries of one event are deduplicated as a whole,
// against each other and against a single-destination event of that ID.
func TestGroupDedup(t *testing.T) {
	s := openTest(t, Options{})
	st := mustInsert(t, s, delivery("e1", "a", "p"), delivery("e1", "b", "p"))
	if st[0] != Inserted || st[1] != Inserted {
		t.Fatalf("first insert: %v", st)
	}
	// Again, and again with a third endpoint (subscribed since): nothing new.
	st = mustInsert(t, s, delivery("e1", "a", "p"), delivery("e1", "b", "p"), delivery("e1", "c", "p"))
	if !slices.Equal(st, []InsertStatus{AlreadyPresent, AlreadyPresent, AlreadyPresent}) {
		t.Fatalf("re-insert: %v", st)
	}
	if _, _, err := s.Get("e1" + GroupSep + "c"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a re-insert added a delivery: %v", err)
	}
	// Other content, or a single-destination event under the same ID: a
	// conflict, nothing stored.
	for _, recs := range [][]*Record{
		{delivery("e1", "c", "other")},
		{rec("e1", "p")},
		{rec("x", "1"), delivery("x", "a", "1")},
		{delivery("y", "a", "1"), delivery("y", "b", "2")},
	} {
		_, err := s.Insert(t.Context(), recs)
		var ce *ConflictError
		if !errors.As(err, &ce) {
			t.Fatalf("insert of %q: err = %v, want a conflict", recs[0].ID, err)
		}
	}
	for _, id := range []string{"x", "x" + GroupSep + "a", "y" + GroupSep + "a"} {
		if _, _, err := s.Get(id); !errors.Is(err, ErrNotFound) {
			t.Fatalf("%q stored by a conflicting call: %v", id, err)
		}
	}
	mustInsert(t, s, rec("plain", "p"))
	if _, err := s.Insert(t.Context(), []*Record{delivery("plain", "a", "p")}); !errors.Is(err, ErrConflict) {
		t.Fatalf("a delivery under a single-destination event's ID: %v", err)
	}

	// Deliver one, drop the other: the group is only tombstones, and a
	// re-insert is a duplicate, or a refused deletion.
	a, _, _ := s.Get("e1" + GroupSep + "a")
	if res, err := s.Apply(t.Context(), []Outcome{{Kind: OutcomeDelete, ID: a.ID, Version: a.Version}}, nil); err != nil || res[0] != Applied {
		t.Fatalf("apply: %v %v", res, err)
	}
	st = mustInsert(t, s, delivery("e1", "a", "p"), delivery("e1", "b", "p"))
	if st[0] != AlreadyPresent || st[1] != AlreadyPresent {
		t.Fatalf("re-insert with one delivered: %v", st)
	}
	if err := s.Drop(t.Context(), "e1"+GroupSep+"b", ""); err != nil {
		t.Fatal(err)
	}
	st = mustInsert(t, s, delivery("e1", "c", "p"))
	if st[0] != Deleted {
		t.Fatalf("re-insert of a deleted group: %v", st)
	}
	_, err := s.InsertWith(t.Context(), []*Record{delivery("e1", "a", "p")}, InsertOptions{RefuseDeleted: true})
	var de *DeletedError
	if !errors.As(err, &de) || de.ID != "e1" {
		t.Fatalf("refused deletion: %v", err)
	}
	checkGroupFile(t, s)
}

// TestGroupKeyOrderPerEndpoint: the key index orders a key's deliveries per
// endpoint, so the head delivery of one endpoint never hides another's.
func TestGroupKeyOrderPerEndpoint(t *testing.T) {
	s := openTest(t, Options{})
	var recs []*Record
	for _, id := range []string{"1", "2"} {
		for _, ep := range []string{"a", "b"} {
			r := delivery(id, ep, id)
			r.Key = "k"
			recs = append(recs, r)
		}
	}
	plain := rec("3", "x")
	plain.Key = "k"
	recs = append(recs, plain)
	mustInsert(t, s, recs...)
	want := []string{"1" + GroupSep + "a", "1" + GroupSep + "b", "3"}
	if got := headIDs(t, s); !slices.Equal(got, want) {
		t.Fatalf("heads = %q, want %q", got, want)
	}
	// b's head delivered: b's next one is its head; a's queue is as it was.
	b1, _, _ := s.Get("1" + GroupSep + "b")
	if _, err := s.Apply(t.Context(), []Outcome{{Kind: OutcomeDelete, ID: b1.ID, Version: b1.Version}}, nil); err != nil {
		t.Fatal(err)
	}
	want = []string{"1" + GroupSep + "a", "2" + GroupSep + "b", "3"}
	if got := headIDs(t, s); !slices.Equal(got, want) {
		t.Fatalf("heads = %q, want %q", got, want)
	}
	checkGroupFile(t, s)
}

// TestRouteUnrouted: an unrouted event is counted, and Route swaps it for
// its deliveries in one transaction; a stale version routes nothing.
func TestRouteUnrouted(t *testing.T) {
	s := openTest(t, Options{})
	created := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	u := &Record{ID: "e" + GroupSep, Topic: "order.paid", Method: "POST", Payload: []byte("p"), Key: "k",
		CreatedAt: created, NextAttemptAt: created.Add(72 * time.Hour)}
	mustInsert(t, s, u)
	if st, _ := s.Stats(); st.Unrouted != 1 || st.Pending != 1 {
		t.Fatalf("stats after an unrouted insert: %+v", st)
	}
	// Enqueued again, still unrouted: already present.
	again := *u
	if st := mustInsert(t, s, &again); st[0] != AlreadyPresent {
		t.Fatalf("re-insert: %v", st)
	}
	if err := s.Route(t.Context(), u.ID, u.Version+1, []*Record{delivery("e", "a", "p")}); !errors.Is(err, ErrStale) {
		t.Fatalf("route at a stale version: %v", err)
	}
	da, db := delivery("e", "a", "p"), delivery("e", "b", "p")
	da.Key, db.Key = "k", "k"
	if err := s.Route(t.Context(), u.ID, u.Version, []*Record{da, db}); err != nil {
		t.Fatal(err)
	}
	if st, _ := s.Stats(); st.Unrouted != 0 || st.Pending != 2 {
		t.Fatalf("stats after routing: %+v", st)
	}
	members, err := s.Group("e")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range members {
		got = append(got, m.ID+"="+m.State.String())
		if m.Record != nil && !m.Record.CreatedAt.Equal(created) {
			t.Fatalf("%q: created %v, want the event's %v", m.ID, m.Record.CreatedAt, created)
		}
	}
	want := []string{"e" + GroupSep + "=delivered", "e" + GroupSep + "a=pending", "e" + GroupSep + "b=pending"}
	if !slices.Equal(got, want) {
		t.Fatalf("group = %q, want %q", got, want)
	}
	// Replay and drop act on the whole group.
	if _, err := s.ReplayGroup(t.Context(), "e", time.Now()); !errors.Is(err, ErrNotDead) {
		t.Fatalf("replay of a pending group: %v", err)
	}
	r, _, _ := s.Get(da.ID)
	if _, err := s.Apply(t.Context(), []Outcome{{Kind: OutcomeDead, ID: r.ID, Version: r.Version, Reason: "gone"}}, nil); err != nil {
		t.Fatal(err)
	}
	if n, err := s.ReplayGroup(t.Context(), "e", time.Now()); err != nil || n != 1 {
		t.Fatalf("replay group: %d %v", n, err)
	}
	if n, err := s.DropGroup(t.Context(), "e", ""); err != nil || n != 2 {
		t.Fatalf("drop group: %d %v", n, err)
	}
	if _, err := s.DropGroup(t.Context(), "e", ""); !errors.Is(err, ErrNotFound) {
		t.Fatalf("drop of an empty group: %v", err)
	}
	checkGroupFile(t, s)
}

// checkGroupFile closes s and checks its file.
func checkGroupFile(t *testing.T, s *Store) {
	t.Helper()
	path := s.Path()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	rep, err := Check(path, CheckOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Problems) > 0 {
		t.Fatalf("check of %s: %+v", filepath.Base(path), rep.Problems)
	}
}

// RouteMany routes several unrouted records in one transaction; one at a
// stale version is left as it is and the others are routed, and routing
// again changes nothing.
func TestRouteMany(t *testing.T) {
	s := openTest(t, Options{})
	var rs []Routing
	for _, id := range []string{"e1", "e2", "e3"} {
		u := &Record{ID: id + GroupSep, Topic: "order.paid", Method: "POST", Payload: []byte("p")}
		mustInsert(t, s, u)
		rs = append(rs, Routing{ID: u.ID, Version: u.Version, Recs: []*Record{delivery(id, "a", "p"), delivery(id, "b", "p")}})
	}
	rs[1].Version++
	errs, err := s.RouteMany(t.Context(), rs)
	if err != nil {
		t.Fatal(err)
	}
	if errs[0] != nil || !errors.Is(errs[1], ErrStale) || errs[2] != nil {
		t.Fatalf("errors %v, want the second stale only", errs)
	}
	if st, _ := s.Stats(); st.Unrouted != 1 || st.Pending != 5 {
		t.Fatalf("stats after routing two of three: %+v", st)
	}
	rs[1].Version--
	errs, err = s.RouteMany(t.Context(), rs)
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(errs[0], ErrStale) || errs[1] != nil || !errors.Is(errs[2], ErrStale) {
		t.Fatalf("errors routing again %v, want the routed ones stale", errs)
	}
	if st, _ := s.Stats(); st.Unrouted != 0 || st.Pending != 6 {
		t.Fatalf("stats after routing all: %+v", st)
	}
}
