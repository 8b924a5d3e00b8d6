package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// endpointIndexes reads both buckets of the per-endpoint due index, and
// recomputes them from the pending records.
func endpointIndexes(t testing.TB, s *Store) (byEP, heads, wantByEP, wantHeads map[string]bool) {
	t.Helper()
	byEP, heads, wantByEP, wantHeads = map[string]bool{}, map[string]bool{}, map[string]bool{}, map[string]bool{}
	err := s.view(func(tx *bolt.Tx) error {
		for name, m := range map[string]map[string]bool{string(bucketDueByEndpoint): byEP, string(bucketDueEndpoints): heads} {
			if err := tx.Bucket([]byte(name)).ForEach(func(k, v []byte) error {
				if len(v) != 0 {
					return fmt.Errorf("%s: value %x under %x", name, v, k)
				}
				m[string(k)] = true
				return nil
			}); err != nil {
				return err
			}
		}
		first := map[string]uint64{}
		return tx.Bucket(bucketEvents).ForEach(func(k, v []byte) error {
			r, err := decodeStored(k, v)
			if err != nil {
				return err
			}
			wantByEP[string(epDueKey(nil, r.Endpoint, r.NextAttemptAt, r.ID))] = true
			if f, ok := first[r.Endpoint]; !ok || nanos(r.NextAttemptAt) < f {
				if ok {
					delete(wantHeads, string(headKey(f, []byte(r.Endpoint))))
				}
				first[r.Endpoint] = nanos(r.NextAttemptAt)
				wantHeads[string(headKey(first[r.Endpoint], []byte(r.Endpoint)))] = true
			}
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return byEP, heads, wantByEP, wantHeads
}

// checkEndpointIndex fails the test unless both indexes match what the
// pending records say, and Check finds the file sound.
func checkEndpointIndex(t testing.TB, s *Store, when string) {
	t.Helper()
	byEP, heads, wantByEP, wantHeads := endpointIndexes(t, s)
	if !maps.Equal(byEP, wantByEP) {
		t.Fatalf("%s: due_by_endpoint has %d entries %q, want %d %q", when, len(byEP), slices.Sorted(maps.Keys(byEP)), len(wantByEP), slices.Sorted(maps.Keys(wantByEP)))
	}
	if !maps.Equal(heads, wantHeads) {
		t.Fatalf("%s: due_endpoints = %q, want %q", when, slices.Sorted(maps.Keys(heads)), slices.Sorted(maps.Keys(wantHeads)))
	}
}

func recAt(id, ep string, at time.Time) *Record {
	r := rec(id, "x")
	r.Endpoint, r.Destination, r.NextAttemptAt = ep, ep, at
	return r
}

// TestEndpointIndexKeptExact walks a record through every write that
// moves it, and checks both indexes after each.
func TestEndpointIndexKeptExact(t *testing.T) {
	clk := newClock()
	path := filepath.Join(t.TempDir(), "outbox.db")
	s := openAt(t, path, Options{Now: clk.Now})
	ctx := t.Context()
	now := clk.Now()
	get := func(id string) *Record {
		t.Helper()
		r, _, err := s.Get(id)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	apply := func(o Outcome) {
		t.Helper()
		o.Version = get(o.ID).Version
		if res, err := s.Apply(ctx, []Outcome{o}, nil); err != nil || res[0] != Applied {
			t.Fatalf("Apply(%+v) = %v, %v", o, res, err)
		}
	}
	unrouted := recAt("u", "", now.Add(time.Second))
	mustInsert(t, s, recAt("a1", "a", now), recAt("a2", "a", now.Add(time.Minute)), recAt("b1", "b", now.Add(time.Hour)), unrouted)
	checkEndpointIndex(t, s, "insert")
	apply(Outcome{Kind: OutcomeReschedule, ID: "a1", Attempts: 1, NextAttemptAt: now.Add(2 * time.Minute)})
	checkEndpointIndex(t, s, "reschedule of the head past the next")
	apply(Outcome{Kind: OutcomeReschedule, ID: "b1", Attempts: 1, NextAttemptAt: now.Add(-time.Minute)})
	checkEndpointIndex(t, s, "reschedule earlier")
	apply(Outcome{Kind: OutcomeDelete, ID: "a2"})
	checkEndpointIndex(t, s, "delete of the head")
	apply(Outcome{Kind: OutcomeDead, ID: "b1", Reason: "gone"})
	checkEndpointIndex(t, s, "dead letter of an endpoint's last record")
	if _, err := s.Replay(ctx, "b1", now.Add(3*time.Minute)); err != nil {
		t.Fatal(err)
	}
	checkEndpointIndex(t, s, "replay")
	if _, err := s.Update(ctx, "a1", func(r *Record) error { r.NextAttemptAt = now.Add(-time.Hour); return nil }); err != nil {
		t.Fatal(err)
	}
	checkEndpointIndex(t, s, "update moving NextAttemptAt")
	if _, err := s.Update(ctx, "a1", func(r *Record) error { r.Endpoint = "c"; return nil }); err != nil {
		t.Fatal(err)
	}
	checkEndpointIndex(t, s, "update moving the endpoint")
	k := recAt("k1", "a", now.Add(time.Second))
	k.Key = "key"
	if _, err := s.UpsertKey(ctx, "key", func(*Record) (*Record, error) { return k, nil }); err != nil {
		t.Fatal(err)
	}
	k2 := recAt("k2", "d", now.Add(2*time.Second))
	if _, err := s.UpsertKey(ctx, "key", func(*Record) (*Record, error) { return k2, nil }); err != nil {
		t.Fatal(err)
	}
	checkEndpointIndex(t, s, "upserts (one superseding)")
	if err := s.Drop(ctx, "u", ""); err != nil {
		t.Fatal(err)
	}
	checkEndpointIndex(t, s, "drop")
	ev := delivery("fan", "", "p") // a fan-out event kept unrouted
	mustInsert(t, s, ev)
	checkEndpointIndex(t, s, "unrouted insert")
	if err := s.Route(ctx, ev.ID, ev.Version, []*Record{delivery("fan", "a", "p"), delivery("fan", "e", "p")}); err != nil {
		t.Fatal(err)
	}
	checkEndpointIndex(t, s, "route")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openAt(t, path, Options{Now: clk.Now})
	checkEndpointIndex(t, s, "reopen")
	_ = s.Close()
	if rep, err := Check(path, CheckOptions{}); err != nil || rep.Damaged() {
		t.Fatalf("Check: %v, %v", rep.Problems, err)
	}
}

// TestEndpointIndexRandomOperations runs random writes and compares both
// indexes with a recomputation from the records after each round.
func TestEndpointIndexRandomOperations(t *testing.T) {
	clk := newClock()
	s := openTest(t, Options{Now: clk.Now})
	ctx := t.Context()
	rng := rand.New(rand.NewPCG(1, 2))
	eps := []string{"", "a", "b", "c", "dd"}
	at := func() time.Time { return clk.Now().Add(time.Duration(rng.IntN(100)-50) * time.Second) }
	next := 0
	for round := range 60 {
		var recs []*Record
		for range rng.IntN(20) {
			next++
			recs = append(recs, recAt(fmt.Sprintf("e%05d", next), eps[rng.IntN(len(eps))], at()))
		}
		mustInsert(t, s, recs...)
		pending, _, err := s.List(ListQuery{State: StatePending, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		var outs []Outcome
		for _, r := range pending {
			o := Outcome{ID: r.ID, Version: r.Version, Attempts: r.Attempts + 1}
			switch rng.IntN(6) {
			case 0:
				o.Kind = OutcomeDelete
			case 1:
				o.Kind = OutcomeReschedule
				o.NextAttemptAt = at()
			case 2:
				o.Kind, o.Reason = OutcomeDead, "dead"
			case 3:
				if _, err := s.Update(ctx, r.ID, func(r *Record) error {
					r.Endpoint, r.NextAttemptAt = eps[rng.IntN(len(eps))], at()
					return nil
				}); err != nil {
					t.Fatal(err)
				}
				continue
			default:
				continue
			}
			outs = append(outs, o)
		}
		if _, err := s.Apply(ctx, outs, nil); err != nil {
			t.Fatal(err)
		}
		dead, _, err := s.List(ListQuery{State: StateDead, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range dead {
			if rng.IntN(3) == 0 {
				if _, err := s.Replay(ctx, r.ID, at()); err != nil {
					t.Fatal(err)
				}
			}
		}
		checkEndpointIndex(t, s, fmt.Sprintf("round %d", round))
	}
	entries, err := s.Changelog(0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	fresh := openTest(t, Options{Now: clk.Now})
	if err := fresh.Restore(ctx, entries); err != nil {
		t.Fatal(err)
	}
	checkEndpointIndex(t, fresh, "restored from the changelog")
	for _, st := range []*Store{s, fresh} {
		path := st.Path()
		_ = st.Close()
		if err := Compact(path); err != nil {
			t.Fatal(err)
		}
		if rep, err := Check(path, CheckOptions{}); err != nil || rep.Damaged() {
			t.Fatalf("Check of the compacted file: %v, %v", rep.Problems, err)
		}
	}
}

// TestDueByEndpoint: per endpoint, due records in time order up to the
// limit, More when due ones are left, the skips, and HeadOfKeyOnly.
func TestDueByEndpoint(t *testing.T) {
	clk := newClock()
	s := openTest(t, Options{Now: clk.Now})
	now := clk.Now()
	var recs []*Record
	for i := range 5 {
		recs = append(recs, recAt(fmt.Sprintf("a%d", i), "a", now.Add(-time.Duration(i)*time.Second)))
	}
	recs = append(recs, recAt("a-later", "a", now.Add(time.Hour)), recAt("b0", "b", now.Add(-time.Minute)),
		recAt("held0", "held", now.Add(-time.Hour)), recAt("u0", "", now))
	k1, k2 := recAt("k1", "k", now.Add(-2*time.Second)), recAt("k2", "k", now.Add(-3*time.Second))
	k1.Key, k2.Key = "x", "x" // k1 is the older of key x, but k2 is due first
	recs = append(recs, k1, k2)
	mustInsert(t, s, recs...)

	ids := func(rs []*Record) (out []string) {
		for _, r := range rs {
			out = append(out, r.ID)
		}
		return out
	}
	res, err := s.DueByEndpoint(DueByEndpointQuery{Now: now, Endpoints: []EndpointLimit{{Endpoint: "a", Limit: 3}, {Endpoint: "b", Limit: 3}, {Endpoint: "", Limit: 0}, {Endpoint: "none", Limit: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		ids  []string
		more bool
	}{{[]string{"a4", "a3", "a2"}, true}, {[]string{"b0"}, false}, {[]string{"u0"}, false}, {nil, false}}
	for i, w := range want {
		if got := ids(res[i].Records); !slices.Equal(got, w.ids) || res[i].More != w.more || res[i].Endpoint != []string{"a", "b", "", "none"}[i] {
			t.Fatalf("endpoint %d: %q more %v, want %q more %v", i, got, res[i].More, w.ids, w.more)
		}
	}
	res, err = s.DueByEndpoint(DueByEndpointQuery{Now: now, Endpoints: []EndpointLimit{{Endpoint: "a", Limit: 10}},
		SkipID: func(id []byte) bool { return string(id) == "a4" },
		Skip:   func(r *Record) bool { return r.ID == "a2" }})
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(res[0].Records); !slices.Equal(got, []string{"a3", "a1", "a0"}) || res[0].More {
		t.Fatalf("with skips: %q more %v", got, res[0].More)
	}
	res, err = s.DueByEndpoint(DueByEndpointQuery{Now: now, Endpoints: []EndpointLimit{{Endpoint: "a", Limit: 10}}, MaxScan: 2})
	if err != nil || len(res[0].Records) != 2 || !res[0].More {
		t.Fatalf("MaxScan 2: %+v, %v", res, err)
	}
	// A read that stops at its scan bound says where to resume, and a read
	// from there goes on with the entries it did not examine.
	res, err = s.DueByEndpoint(DueByEndpointQuery{Now: now, Endpoints: []EndpointLimit{{Endpoint: "a", Limit: 10, From: res[0].Resume}}, MaxScan: 2})
	if err != nil || !slices.Equal(ids(res[0].Records), []string{"a2", "a1"}) || !res[0].More {
		t.Fatalf("MaxScan 2 from the first read's Resume: %+v, %v; want a2 and a1", res, err)
	}
	res, err = s.DueByEndpoint(DueByEndpointQuery{Now: now, Endpoints: []EndpointLimit{{Endpoint: "a", Limit: 10, From: res[0].Resume}}, MaxScan: 2})
	if err != nil || !slices.Equal(ids(res[0].Records), []string{"a0"}) || res[0].More || res[0].Resume != nil {
		t.Fatalf("MaxScan 2 from the second read's Resume: %+v, %v; want a0 and the end", res, err)
	}
	res, err = s.DueByEndpoint(DueByEndpointQuery{Now: now, Endpoints: []EndpointLimit{{Endpoint: "k", Limit: 10}}, HeadOfKeyOnly: true})
	if err != nil || !slices.Equal(ids(res[0].Records), []string{"k1"}) {
		t.Fatalf("HeadOfKeyOnly: %+v, %v", res, err)
	}

	var heads []string
	if err := s.DueHeads(now, func(ep string, head time.Time) bool {
		heads = append(heads, fmt.Sprintf("%s@%s", ep, head.Sub(now)))
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if want := []string{"held@-1h0m0s", "b@-1m0s", "a@-4s", "k@-3s", "@0s"}; !slices.Equal(heads, want) {
		t.Fatalf("DueHeads = %q, want %q", heads, want)
	}
	n := 0
	if err := s.DueHeads(now, func(string, time.Time) bool { n++; return n < 2 }); err != nil || n != 2 {
		t.Fatalf("DueHeads stopped after %d calls (%v), want 2", n, err)
	}

	ki := openTest(t, Options{NoKeyIndex: true})
	if _, err := ki.DueByEndpoint(DueByEndpointQuery{Now: now, HeadOfKeyOnly: true}); !errors.Is(err, ErrNoKeyIndex) {
		t.Fatalf("HeadOfKeyOnly without the key index: %v", err)
	}
}

// oldLayout turns the closed store file at path into one of the layout
// before the per-endpoint due index: without its buckets, and with the
// schema of that time.
func oldLayout(t *testing.T, path string, keyIndex bool) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Update(func(tx *bolt.Tx) error {
		for _, name := range endpointBuckets {
			if err := tx.DeleteBucket(name); err != nil {
				return err
			}
		}
		return tx.Bucket(bucketMeta).Put(metaSchema, u64(layoutSchema(keyIndex, false)))
	}); err != nil {
		t.Fatal(err)
	}
}

func fileSchema(t *testing.T, path string) uint64 {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var v uint64
	_ = db.View(func(tx *bolt.Tx) error {
		v = binary.BigEndian.Uint64(tx.Bucket(bucketMeta).Get(metaSchema))
		return nil
	})
	return v
}

// TestEndpointIndexMigration: a file of the previous layout is readable
// read-only (Due works, the per-endpoint reads say why not), and a writable
// Open builds the index (across more than one build transaction) and
// records the new schema, with or without the key index; a build cut short
// is started over.
func TestEndpointIndexMigration(t *testing.T) {
	for _, noKeys := range []bool{false, true} {
		t.Run(fmt.Sprintf("NoKeyIndex=%v", noKeys), func(t *testing.T) {
			clk := newClock()
			path := filepath.Join(t.TempDir(), "outbox.db")
			s, err := Open(path, Options{Now: clk.Now, NoKeyIndex: noKeys})
			if err != nil {
				t.Fatal(err)
			}
			var recs []*Record
			for i := range endpointBuildChunk + 10 {
				recs = append(recs, recAt(fmt.Sprintf("e%06d", i), []string{"a", "b", ""}[i%3], clk.Now().Add(-time.Duration(i)*time.Millisecond)))
			}
			mustInsert(t, s, recs...)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			oldLayout(t, path, !noKeys)

			ro := openAt(t, path, Options{ReadOnly: true})
			if due, err := ro.Due(DueQuery{Now: clk.Now(), Limit: 5}); err != nil || len(due) != 5 {
				t.Fatalf("read-only Due of an old file: %d, %v", len(due), err)
			}
			if _, err := ro.DueByEndpoint(DueByEndpointQuery{Now: clk.Now(), Endpoints: []EndpointLimit{{Endpoint: "a", Limit: 1}}}); !errors.Is(err, ErrNoEndpointIndex) {
				t.Fatalf("read-only DueByEndpoint of an old file: %v", err)
			}
			if err := ro.DueHeads(clk.Now(), func(string, time.Time) bool { return true }); !errors.Is(err, ErrNoEndpointIndex) {
				t.Fatalf("read-only DueHeads of an old file: %v", err)
			}
			if rep, err := Check(path, CheckOptions{}); err != nil || rep.Damaged() {
				t.Fatalf("Check of an old file: %v, %v", rep.Problems, err)
			}
			_ = ro.Close()

			// A build cut short: the mark and half-filled buckets.
			db, err := bolt.Open(path, 0o600, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := db.Update(func(tx *bolt.Tx) error {
				if err := startEndpointBuild(tx); err != nil {
					return err
				}
				return tx.Bucket(bucketDueByEndpoint).Put(epDueKey(nil, "a", clk.Now(), "gone"), nil)
			}); err != nil {
				t.Fatal(err)
			}
			_ = db.Close()

			s = openAt(t, path, Options{Now: clk.Now, NoKeyIndex: noKeys})
			if got, want := fileSchemaOpen(t, s), layoutSchema(!noKeys, true); got != want {
				t.Fatalf("schema after the build = %d, want %d", got, want)
			}
			checkEndpointIndex(t, s, "after the build")
			mustInsert(t, s, recAt("new", "a", clk.Now().Add(-time.Hour)))
			checkEndpointIndex(t, s, "insert after the build")
			_ = s.Close()
			if rep, err := Check(path, CheckOptions{}); err != nil || rep.Damaged() {
				t.Fatalf("Check after the build: %v, %v", rep.Problems, err)
			}
		})
	}
}

func fileSchemaOpen(t *testing.T, s *Store) uint64 {
	t.Helper()
	var v uint64
	if err := s.view(func(tx *bolt.Tx) error { v = getU64(tx.Bucket(bucketMeta), metaSchema); return nil }); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestEndpointIndexFileIsRefusedByOlderBuilds: builds before the
// per-endpoint due index understand schemas up to schemaNoKeyIndex; the
// values that mark the new layout, with and without the key index, are
// above it, so such a build refuses the file (ErrSchemaTooNew) instead of
// writing records without their per-endpoint entries. A file of an older
// layout with buckets of those names that the store did not make is the
// application's, and refused too.
func TestEndpointIndexFileIsRefusedByOlderBuilds(t *testing.T) {
	const olderMax = schemaNoKeyIndex
	for _, v := range []uint64{layoutSchema(true, true), layoutSchema(false, true)} {
		if v <= olderMax {
			t.Fatalf("schema %d of the new layout is not above %d", v, olderMax)
		}
	}
	for _, noKeys := range []bool{false, true} {
		path := filepath.Join(t.TempDir(), "outbox.db")
		s := openAt(t, path, Options{NoKeyIndex: noKeys})
		_ = s.Close()
		if v := fileSchema(t, path); v <= olderMax {
			t.Fatalf("a new file (NoKeyIndex %v) has schema %d, which older builds accept", noKeys, v)
		}
	}

	path := filepath.Join(t.TempDir(), "outbox.db")
	s := openAt(t, path, Options{})
	_ = s.Close()
	oldLayout(t, path, true)
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = db.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucket(bucketDueEndpoints); return err })
	_ = db.Close()
	if _, err := Open(path, Options{}); !errors.Is(err, ErrNotDatabase) {
		t.Fatalf("Open of an old file with an application bucket %q: %v, want ErrNotDatabase", bucketDueEndpoints, err)
	}
}
