package store

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestInsertStatuses(t *testing.T) {
	s := openTest(t, Options{})
	a := rec("a", "1")
	st := mustInsert(t, s, a)
	if st[0] != Inserted || a.Version == 0 {
		t.Fatalf("first insert: %v, version %d", st, a.Version)
	}
	again := rec("a", "1")
	if st := mustInsert(t, s, again); st[0] != AlreadyPresent || again.Version != a.Version {
		t.Fatalf("same content: %v version %d, want AlreadyPresent %d", st, again.Version, a.Version)
	}
	_, err := s.Insert(t.Context(), []*Record{rec("b", "ok"), rec("a", "other")})
	var ce *ConflictError
	if !errors.As(err, &ce) || ce.ID != "a" || !errors.Is(err, ErrConflict) {
		t.Fatalf("conflict: %v", err)
	}
	if _, _, err := s.Get("b"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a call with a conflict stored part of itself: %v", err)
	}
	if _, err := s.Insert(t.Context(), []*Record{rec("c", "1"), rec("c", "2")}); !errors.Is(err, ErrConflict) {
		t.Fatalf("same ID twice with other content in one call: %v", err)
	}
	if st := mustInsert(t, s, rec("d", "1"), rec("d", "1")); st[0] != Inserted || st[1] != AlreadyPresent {
		t.Fatalf("same record twice in one call: %v", st)
	}
	for _, bad := range []*Record{nil, {}, {ID: string(make([]byte, MaxIDLen+1))}} {
		if _, err := s.Insert(t.Context(), []*Record{bad}); !errors.Is(err, ErrInvalid) {
			t.Fatalf("bad record %v: %v", bad, err)
		}
	}
	dead := rec("e", "x")
	dead.DeadReason = "unmappable"
	mustInsert(t, s, dead)
	if r, state, err := s.Get("e"); err != nil || state != StateDead || r.DeadAt.IsZero() {
		t.Fatalf("dead insert: %+v %v %v", r, state, err)
	}
	if st := mustInsert(t, s, rec("e", "x")); st[0] != AlreadyPresent {
		t.Fatalf("re-insert of a dead record: %v", st)
	}
	stats, err := s.Stats()
	if err != nil || stats.Pending != 2 || stats.Dead != 1 || stats.LastLSN != 3 || stats.ChangelogEntries != 3 || stats.FileSize == 0 {
		t.Fatalf("Stats = %+v, %v", stats, err)
	}
}

func TestConcurrentInsertsShareCommits(t *testing.T) {
	s := openTest(t, Options{MaxBatch: 16})
	var wg sync.WaitGroup
	for g := range 32 {
		wg.Go(func() {
			for i := range 20 {
				if _, err := s.Insert(t.Context(), []*Record{rec(fmt.Sprintf("g%02d-%02d", g, i), "p")}); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	st, _ := s.Stats()
	if st.Pending != 640 || st.LastLSN != 640 || s.LastLSN() != 640 {
		t.Fatalf("Stats = %+v, LastLSN %d", st, s.LastLSN())
	}
	// A batch bigger than MaxBatch still commits atomically.
	big := make([]*Record, 100)
	for i := range big {
		big[i] = rec(fmt.Sprintf("big-%03d", i), "p")
	}
	mustInsert(t, s, big...)
	if st, _ := s.Stats(); st.Pending != 740 {
		t.Fatalf("Pending = %d", st.Pending)
	}
}

func TestCancelledContext(t *testing.T) {
	s := openTest(t, Options{})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := s.Insert(ctx, []*Record{rec("a", "")}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Insert with a cancelled context: %v", err)
	}
	if _, _, err := s.Get("a"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("work was queued for a cancelled context: %v", err)
	}
}

func TestClose(t *testing.T) {
	s := openTest(t, Options{})
	mustInsert(t, s, rec("a", ""))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := s.Insert(t.Context(), []*Record{rec("b", "")}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Insert after Close: %v", err)
	}
	if _, _, err := s.Get("a"); !errors.Is(err, ErrClosed) {
		t.Fatalf("Get after Close: %v", err)
	}
}

func TestCloseWaitsForQueuedWrites(t *testing.T) {
	s := openTest(t, Options{})
	var wg sync.WaitGroup
	errs := make(chan error, 50)
	for i := range 50 {
		wg.Go(func() {
			_, err := s.Insert(context.Background(), []*Record{rec(fmt.Sprint(i), "")})
			errs <- err
		})
	}
	s.Close()
	wg.Wait()
	close(errs)
	ok := 0
	for err := range errs {
		switch {
		case err == nil:
			ok++
		case !errors.Is(err, ErrClosed):
			t.Fatalf("Insert racing Close: %v", err)
		}
	}
	s2 := openAt(t, s.Path(), Options{})
	if st, _ := s2.Stats(); st.Pending != ok {
		t.Fatalf("%d inserts returned nil, %d stored", ok, st.Pending)
	}
}

func TestDue(t *testing.T) {
	clk := newClock()
	s := openTest(t, Options{Now: clk.Now})
	now := clk.Now()
	var recs []*Record
	for i := range 10 {
		r := rec(fmt.Sprintf("r%d", i), "")
		r.NextAttemptAt = now.Add(time.Duration(9-i) * time.Second) // r9 first
		r.Key = []string{"", "k1", "k2"}[i%3]
		recs = append(recs, r)
	}
	mustInsert(t, s, recs...)
	ids := func(rs []*Record) (out []string) {
		for _, r := range rs {
			out = append(out, r.ID)
		}
		return out
	}
	got, err := s.Due(DueQuery{Now: now.Add(4 * time.Second), Limit: 100})
	if err != nil || fmt.Sprint(ids(got)) != "[r9 r8 r7 r6 r5]" {
		t.Fatalf("Due = %v, %v", ids(got), err)
	}
	got, _ = s.Due(DueQuery{Now: now.Add(time.Hour), Limit: 3, SkipID: func(id []byte) bool { return string(id) == "r8" }})
	if fmt.Sprint(ids(got)) != "[r9 r7 r6]" {
		t.Fatalf("Due with SkipID = %v", ids(got))
	}
	got, _ = s.Due(DueQuery{Now: now.Add(time.Hour), Skip: func(r *Record) bool { return r.Key != "" }})
	if fmt.Sprint(ids(got)) != "[r9 r6 r3 r0]" {
		t.Fatalf("Due with Skip = %v", ids(got))
	}
	// Per-key order: only the oldest pending record of each key (k1: r1, k2: r2).
	got, _ = s.Due(DueQuery{Now: now.Add(time.Hour), HeadOfKeyOnly: true})
	if fmt.Sprint(ids(got)) != "[r9 r6 r3 r2 r1 r0]" {
		t.Fatalf("Due HeadOfKeyOnly = %v", ids(got))
	}
	got, _ = s.Due(DueQuery{Now: now.Add(time.Hour), Limit: 10, MaxScan: 2})
	if len(got) != 2 {
		t.Fatalf("MaxScan 2 returned %d", len(got))
	}
	// The copies are the caller's.
	got[0].Payload = append(got[0].Payload, 'x')
	if r, _, _ := s.Get(got[0].ID); len(r.Payload) != 0 {
		t.Fatal("a returned record shares memory with the store")
	}
	next, ok, err := s.NextDue()
	if err != nil || !ok || !next.Equal(now) {
		t.Fatalf("NextDue = %v %v %v, want %v", next, ok, err, now)
	}
	empty := openTest(t, Options{})
	if _, ok, err := empty.NextDue(); ok || err != nil {
		t.Fatalf("NextDue of an empty store: %v %v", ok, err)
	}
}

func TestApplyOutcomes(t *testing.T) {
	clk := newClock()
	s := openTest(t, Options{Now: clk.Now})
	a, b, c := rec("a", ""), rec("b", ""), rec("c", "")
	mustInsert(t, s, a, b, c)
	later := clk.Now().Add(time.Minute)
	res, err := s.Apply(t.Context(), []Outcome{
		{Kind: OutcomeReschedule, ID: "c", Version: c.Version, Attempts: 1, Deliveries: 2, NextAttemptAt: later, LastStatus: 503, LastError: "unavailable"},
		{Kind: OutcomeDead, ID: "b", Version: b.Version, Attempts: 1, Deliveries: 1, LastStatus: 400, Reason: "400 bad request"},
		{Kind: OutcomeDelete, ID: "a", Version: a.Version + 100},
	}, []EndpointState{{Name: "orders", NotBefore: later, FailureStreak: 3, LastStatus: 503}})
	if err != nil || fmt.Sprint(res) != "[applied applied stale]" {
		t.Fatalf("Apply = %v, %v", res, err)
	}
	rc, st, _ := s.Get("c")
	if st != StatePending || rc.Attempts != 1 || rc.Deliveries != 2 || !rc.NextAttemptAt.Equal(later) || rc.LastStatus != 503 || rc.LastError != "unavailable" || rc.Version <= c.Version {
		t.Fatalf("rescheduled: %+v %v", rc, st)
	}
	if due, _ := s.Due(DueQuery{Now: clk.Now()}); len(due) != 1 || due[0].ID != "a" {
		t.Fatalf("due after reschedule: %v", due)
	}
	rb, st, _ := s.Get("b")
	if st != StateDead || rb.DeadReason != "400 bad request" || rb.LastStatus != 400 || !rb.DeadAt.Equal(clk.Now()) {
		t.Fatalf("dead: %+v %v", rb, st)
	}
	ep, ok, err := s.Endpoint("orders")
	if err != nil || !ok || ep.FailureStreak != 3 || !ep.NotBefore.Equal(later) || !ep.UpdatedAt.Equal(clk.Now()) {
		t.Fatalf("Endpoint = %+v %v %v", ep, ok, err)
	}
	if err := s.PutEndpoint(t.Context(), EndpointState{Name: "billing", Disabled: true, DisabledReason: "410"}); err != nil {
		t.Fatal(err)
	}
	eps, err := s.Endpoints()
	if err != nil || len(eps) != 2 || eps[0].Name != "billing" || !eps[0].Disabled {
		t.Fatalf("Endpoints = %+v %v", eps, err)
	}
	if _, ok, _ := s.Endpoint("none"); ok {
		t.Fatal("unknown endpoint found")
	}
	stats, _ := s.Stats()
	if stats.Pending != 2 || stats.Dead != 1 || stats.Endpoints != 2 {
		t.Fatalf("Stats = %+v", stats)
	}
}

func TestUpdate(t *testing.T) {
	clk := newClock()
	s := openTest(t, Options{Now: clk.Now})
	r := rec("a", "1")
	mustInsert(t, s, r)
	later := clk.Now().Add(time.Hour)
	got, err := s.Update(t.Context(), "a", func(r *Record) error {
		r.Payload, r.Key, r.NextAttemptAt, r.Attempts = []byte("2"), "k", later, 99
		return nil
	})
	if err != nil || string(got.Payload) != "2" || got.Key != "k" || got.Attempts != 0 || got.Version != r.Version+1 {
		t.Fatalf("Update = %+v, %v", got, err)
	}
	if due, _ := s.Due(DueQuery{Now: clk.Now()}); len(due) != 0 {
		t.Fatal("the old due index entry is still there")
	}
	boom := errors.New("boom")
	if _, err := s.Update(t.Context(), "a", func(*Record) error { return boom }); err != boom {
		t.Fatalf("fn error: %v", err)
	}
	if _, err := s.Update(t.Context(), "missing", func(*Record) error { return nil }); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing: %v", err)
	}
	func() {
		defer func() {
			if p := recover(); p != "fn panicked" {
				t.Fatalf("recovered %v", p)
			}
		}()
		s.Update(t.Context(), "a", func(*Record) error { panic("fn panicked") })
	}()
	// The committer survived the panic.
	if got, _, err := s.Get("a"); err != nil || got.Version != r.Version+1 {
		t.Fatalf("after the panic: %+v %v", got, err)
	}
	mustInsert(t, s, rec("b", ""))
}

func TestUpsertKey(t *testing.T) {
	s := openTest(t, Options{})
	ctx := t.Context()
	first, err := s.UpsertKey(ctx, "user-1", func(cur *Record) (*Record, error) {
		if cur != nil {
			t.Fatalf("current = %+v, want nil", cur)
		}
		return &Record{ID: "v1", Destination: "d", Payload: []byte("state 1")}, nil
	})
	if err != nil || first.Key != "user-1" || first.Version == 0 {
		t.Fatalf("first upsert: %+v %v", first, err)
	}
	inPlace, err := s.UpsertKey(ctx, "user-1", func(cur *Record) (*Record, error) {
		cur.Payload = []byte("state 2")
		return cur, nil
	})
	if err != nil || inPlace.ID != "v1" || string(inPlace.Payload) != "state 2" {
		t.Fatalf("in place: %+v %v", inPlace, err)
	}
	replaced, err := s.UpsertKey(ctx, "user-1", func(cur *Record) (*Record, error) {
		return &Record{ID: "v2", Destination: "d", Payload: []byte("state 3")}, nil
	})
	if err != nil || replaced.ID != "v2" {
		t.Fatalf("replace: %+v %v", replaced, err)
	}
	if _, st, _ := s.Get("v1"); st != StateDelivered {
		t.Fatalf("superseded record is %v, want a tombstone", st)
	}
	h, _ := s.History("v1")
	if len(h) != 3 || h[2].Op != OpSupersede || h[2].Reason != "superseded by v2" {
		t.Fatalf("history of v1: %v", h)
	}
	if _, err := s.UpsertKey(ctx, "user-1", func(cur *Record) (*Record, error) {
		return &Record{ID: "v1", Destination: "d"}, nil
	}); !errors.Is(err, ErrConflict) {
		t.Fatalf("upsert to a tombstoned ID: %v", err)
	}
	if _, err := s.UpsertKey(ctx, "user-1", func(cur *Record) (*Record, error) {
		return &Record{ID: "v3", Key: "other"}, nil
	}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("upsert with another key: %v", err)
	}
	if st, _ := s.Stats(); st.Pending != 1 || st.Tombstones != 1 {
		t.Fatalf("Stats = %+v", st)
	}
}

func TestDropAndReplay(t *testing.T) {
	clk := newClock()
	s := openTest(t, Options{Now: clk.Now})
	ctx := t.Context()
	a, d := rec("a", ""), rec("d", "")
	d.DeadReason, d.Attempts, d.LastStatus = "404 for too long", 25, 404
	mustInsert(t, s, a, d)
	if _, err := s.Replay(ctx, "a", clk.Now()); !errors.Is(err, ErrNotDead) {
		t.Fatalf("replay of pending: %v", err)
	}
	if _, err := s.Replay(ctx, "zz", clk.Now()); !errors.Is(err, ErrNotFound) {
		t.Fatalf("replay of missing: %v", err)
	}
	dead, _, _ := s.List(ListQuery{State: StateDead})
	if len(dead) != 1 || dead[0].ID != "d" {
		t.Fatalf("dead letters: %v", dead)
	}
	later := clk.Now().Add(time.Minute)
	r, err := s.Replay(ctx, "d", later)
	if err != nil || r.Attempts != 0 || r.DeadReason != "" || !r.DeadAt.IsZero() || !r.NextAttemptAt.Equal(later) || r.LastStatus != 404 {
		t.Fatalf("Replay = %+v %v", r, err)
	}
	if _, st, _ := s.Get("d"); st != StatePending {
		t.Fatalf("replayed record is %v", st)
	}
	if err := s.Drop(ctx, "d", "operator"); err != nil {
		t.Fatal(err)
	}
	if err := s.Drop(ctx, "d", ""); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second drop: %v", err)
	}
	if _, _, err := s.List(ListQuery{State: StateDelivered}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("list of delivered: %v", err)
	}
	if st, _ := s.Stats(); st.Pending != 1 || st.Dead != 0 || st.Tombstones != 1 {
		t.Fatalf("Stats = %+v", st)
	}
}

func TestTrimTombstones(t *testing.T) {
	clk := newClock()
	s := openTest(t, Options{Now: clk.Now})
	for i := range 10 {
		r := rec(fmt.Sprint(i), "")
		mustInsert(t, s, r)
		if err := s.Drop(t.Context(), r.ID, ""); err != nil {
			t.Fatal(err)
		}
		clk.Advance(time.Hour)
	}
	n, err := s.TrimTombstones(t.Context(), clk.Now().Add(-5*time.Hour))
	if err != nil || n != 5 {
		t.Fatalf("TrimTombstones = %d, %v", n, err)
	}
	if _, ok, _ := s.Tombstone("4"); ok {
		t.Fatal("trimmed tombstone still there")
	}
	if at, ok, _ := s.Tombstone("5"); !ok || !at.Equal(clk.Now().Add(-5*time.Hour)) {
		t.Fatalf("kept tombstone: %v %v", at, ok)
	}
	// After the retention the ID is new again.
	if st := mustInsert(t, s, rec("4", "")); st[0] != Inserted {
		t.Fatalf("insert after trim: %v", st)
	}
	if st, _ := s.Stats(); st.Tombstones != 5 {
		t.Fatalf("Stats = %+v", st)
	}
}

func TestTrimChangelog(t *testing.T) {
	clk := newClock()
	s := openTest(t, Options{Now: clk.Now})
	ctx := t.Context()
	for i := range 20 {
		mustInsert(t, s, rec(fmt.Sprint(i), ""))
		clk.Advance(time.Minute)
	}
	if n, _ := s.TrimChangelog(ctx, TrimPolicy{}); n != 0 {
		t.Fatalf("zero policy trimmed %d", n)
	}
	n, err := s.TrimChangelog(ctx, TrimPolicy{MaxEntries: 15})
	if err != nil || n != 5 {
		t.Fatalf("by count: %d %v", n, err)
	}
	n, err = s.TrimChangelog(ctx, TrimPolicy{MaxAge: 10*time.Minute + time.Second})
	if err != nil || n != 5 {
		t.Fatalf("by age: %d %v", n, err)
	}
	es, _ := s.Changelog(0, 0)
	if len(es) != 10 || es[0].LSN != 11 {
		t.Fatalf("left %d entries from %d", len(es), es[0].LSN)
	}
	// With shipping on, nothing past the shipped LSN goes.
	if err := s.SetShippedLSN(ctx, 14); err != nil {
		t.Fatal(err)
	}
	if err := s.SetShippedLSN(ctx, 99); !errors.Is(err, ErrInvalid) {
		t.Fatalf("shipped past the last LSN: %v", err)
	}
	n, err = s.TrimChangelog(ctx, TrimPolicy{MaxEntries: 1})
	if err != nil || n != 4 {
		t.Fatalf("with floor: %d %v", n, err)
	}
	if lsn, _ := s.ShippedLSN(); lsn != 14 {
		t.Fatalf("ShippedLSN = %d", lsn)
	}
	st, _ := s.Stats()
	if st.ChangelogEntries != 6 || st.ShippedLSN != 14 || st.LastLSN != 20 {
		t.Fatalf("Stats = %+v", st)
	}
	es, _ = s.Changelog(0, 2)
	if len(es) != 2 || es[0].LSN != 15 {
		t.Fatalf("Changelog page: %v", es)
	}
}

// TestInsertAfterApplyEmptiedEvents: one group commit that first deletes
// every pending record (a punctuation whose deliveries all succeeded) and
// then inserts a new one. Deleting leaves the events tree with empty leaves
// until the commit rebalances it, and bbolt's Cursor.Last loops forever on a
// tree whose leaves are all empty: the committer hung for good, taking every
// writer with it (seen in the Kafka scale-out test).
func TestInsertAfterApplyEmptiedEvents(t *testing.T) {
	s := openTest(t, Options{})
	var recs []*Record
	for i := range 300 {
		recs = append(recs, rec(fmt.Sprintf("evt-%04d", i), strings.Repeat("p", 500)))
	}
	mustInsert(t, s, recs...)
	due, err := s.Due(DueQuery{Now: time.Now().Add(time.Hour), Limit: 1000})
	if err != nil || len(due) != len(recs) {
		t.Fatalf("Due = %d records, %v", len(due), err)
	}
	var outs []Outcome
	for _, r := range due {
		outs = append(outs, Outcome{Kind: OutcomeDelete, ID: r.ID, Version: r.Version})
	}

	// Hold the committer inside a transaction of its own so that the delete
	// and the insert queue up behind it and share the next commit.
	release := holdCommitter(t, s)
	type applied struct {
		res []OutcomeResult
		err error
	}
	applyDone := make(chan applied, 1)
	go func() {
		res, err := s.Apply(t.Context(), outs, nil)
		applyDone <- applied{res, err}
	}()
	waitQueued(t, s, 1)
	insertDone := make(chan error, 1)
	go func() {
		_, err := s.Insert(t.Context(), []*Record{rec("evt-new", "x")})
		insertDone <- err
	}()
	waitQueued(t, s, 2)
	release()

	select {
	case err := <-insertDone:
		if err != nil {
			t.Fatalf("Insert: %v", err)
		}
	case <-time.After(30 * time.Second):
		// Cleanup would wait for the hung committer forever: stop here,
		// with every goroutine's stack.
		panic("the committer hung on the insert that followed the deletes")
	}
	a := <-applyDone
	if a.err != nil {
		t.Fatal(a.err)
	}
	for i, r := range a.res {
		if r != Applied {
			t.Fatalf("outcome %d: %v", i, r)
		}
	}
	st, err := s.Stats()
	if err != nil || st.Pending != 1 {
		t.Fatalf("Stats = %+v, %v; want the one new record pending", st, err)
	}
	if _, state, err := s.Get("evt-new"); err != nil || state != StatePending {
		t.Fatalf("Get(evt-new) = %v, %v", state, err)
	}
}

// holdCommitter makes the committer wait inside a transaction of its own
// (an UpsertKey whose function blocks) until the returned release is
// called; release waits for that UpsertKey to return and checks that it
// failed with its function's error.
func holdCommitter(t *testing.T, s *Store) (release func()) {
	t.Helper()
	started, unblock := make(chan struct{}), make(chan struct{})
	errHold := errors.New("hold")
	held := make(chan error, 1)
	go func() {
		_, err := s.UpsertKey(t.Context(), "hold", func(*Record) (*Record, error) {
			close(started)
			<-unblock
			return nil, errHold
		})
		held <- err
	}()
	<-started
	return func() {
		t.Helper()
		close(unblock)
		if err := <-held; err != errHold {
			t.Fatalf("the holding UpsertKey = %v, want its function's error", err)
		}
	}
}

// waitQueued waits until n writes are queued for the committer.
func waitQueued(t *testing.T, s *Store, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); len(s.queue) < n; {
		if time.Now().After(deadline) {
			t.Fatalf("%d writes queued, want %d", len(s.queue), n)
		}
		runtime.Gosched()
	}
}

// TestCommitStats checks the committer's counters, and that Running shows a
// commit that does not finish, what outboxd's readiness probe reports when
// the disk stops answering.
func TestCommitStats(t *testing.T) {
	s := openTest(t, Options{})
	before := s.CommitStats()
	mustInsert(t, s, rec("evt-a", "x"), rec("evt-b", "x"), rec("evt-c", "x"))
	st := s.CommitStats()
	if st.Commits-before.Commits != 1 || st.Calls-before.Calls != 1 || st.Records-before.Records != 3 {
		t.Fatalf("after one Insert of 3 records: %+v, before %+v", st, before)
	}
	if st.Busy <= before.Busy || st.Running != 0 || st.Failed != 0 {
		t.Fatalf("after the Insert returned: %+v, want more busy time, none running, none failed", st)
	}

	// A commit that does not finish.
	release := holdCommitter(t, s)
	first := s.CommitStats().Running
	if first <= 0 {
		t.Fatalf("Running = %v inside a commit, want > 0", first)
	}
	for deadline := time.Now().Add(10 * time.Second); s.CommitStats().Running <= first; {
		if time.Now().After(deadline) {
			t.Fatalf("Running stays at %v while the commit hangs", first)
		}
		runtime.Gosched()
	}
	release()
	if st := s.CommitStats(); st.Running != 0 || st.Commits-before.Commits != 2 {
		t.Fatalf("after the held commit: %+v, want none running and 2 commits", st)
	}
}

// Retries of a backlog whose receiver is down do not grow the changelog
// with the retries: after an event's first keptReschedules attempts, each
// reschedule replaces the previous one, so an event keeps its enqueue
// entry, the outcomes of its first attempts and its latest reschedule; the
// file stops growing, and a restore from the changelog still finds every
// event as it is now.
func TestReschedulesReplaceTheirPreviousEntry(t *testing.T) {
	const events, rounds = 200, 30
	clk := newClock()
	s := openTest(t, Options{Now: clk.Now})
	var recs []*Record
	for i := range events {
		r := rec(fmt.Sprintf("e%03d", i), "")
		r.Payload = []byte(strings.Repeat("p", 2000))
		recs = append(recs, r)
	}
	mustInsert(t, s, recs...)
	var sizeAfterFirst int64
	for round := range rounds {
		var outs []Outcome
		for _, r := range recs {
			cur, _, err := s.Get(r.ID)
			if err != nil {
				t.Fatal(err)
			}
			outs = append(outs, Outcome{Kind: OutcomeReschedule, ID: r.ID, Version: cur.Version, Attempts: round + 1,
				Deliveries: round + 1, NextAttemptAt: clk.Now(), LastStatus: 503, LastError: "down"})
		}
		if _, err := s.Apply(t.Context(), outs, nil); err != nil {
			t.Fatal(err)
		}
		st, _ := s.Stats()
		kept := min(round+1, keptReschedules+1)
		if want := (1 + kept) * events; st.ChangelogEntries != want {
			t.Fatalf("round %d: %d changelog entries, want %d (an enqueue and %d reschedules per event)", round, st.ChangelogEntries, want, kept)
		}
		if round == keptReschedules+1 {
			sizeAfterFirst = st.FileSize
		}
		if round > keptReschedules+1 && st.FileSize > sizeAfterFirst {
			t.Fatalf("round %d: the file grew from %d to %d bytes with retries alone", round, sizeAfterFirst, st.FileSize)
		}
	}
	entries, err := s.Changelog(0, 0)
	if err != nil {
		t.Fatal(err)
	}
	fresh := openTest(t, Options{Now: clk.Now})
	if err := fresh.Restore(t.Context(), entries); err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		got, st, err := fresh.Get(r.ID)
		if err != nil || st != StatePending || got.Attempts != rounds {
			t.Fatalf("restored %s: %+v %v %v; want pending after %d attempts", r.ID, got, st, err, rounds)
		}
	}
}
