package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/outboxd/outbox/internal/testkit"
)

// busyStore returns the path of a closed store that went through every kind
// of change: inserts with and without a key, deliveries, reschedules, dead
// letters, a replay, a drop, a coalescing upsert, endpoint states, a trim of
// tombstones and of the changelog, a restore and a shipped LSN, and attempts
// in the attempt log (some trimmed with their tombstones).
func busyStore(t *testing.T, opts Options) string {
	t.Helper()
	clock := newClock()
	opts.Now = clock.Now
	opts.NoSync = true
	s := openTest(t, opts)
	ctx := t.Context()
	recs := make([]*Record, 2000)
	for i := range recs {
		recs[i] = rec(fmt.Sprintf("evt-%05d", i), strings.Repeat("p", 300))
		if i%3 == 0 {
			recs[i].Key = fmt.Sprintf("key-%d", i%11)
		}
	}
	mustInsert(t, s, recs...)
	dead := rec("born-dead", "x")
	dead.DeadReason = "bad request"
	mustInsert(t, s, dead)
	stored, _, err := s.List(ListQuery{State: StatePending, Limit: 2000})
	if err != nil {
		t.Fatal(err)
	}
	var outs []Outcome
	for i, r := range stored {
		switch i % 5 {
		case 0, 1:
			outs = append(outs, Outcome{Kind: OutcomeDelete, ID: r.ID, Version: r.Version})
		case 2:
			outs = append(outs, Outcome{Kind: OutcomeReschedule, ID: r.ID, Version: r.Version, Attempts: 1, Deliveries: 1,
				NextAttemptAt: clock.Now().Add(time.Duration(i) * time.Second), LastStatus: 503, LastError: "status 503"})
		case 3:
			if i%15 == 3 {
				outs = append(outs, Outcome{Kind: OutcomeDead, ID: r.ID, Version: r.Version, Attempts: 1, Deliveries: 1, LastStatus: 400, Reason: "status 400"})
			}
		}
	}
	for i := range outs { // each with its attempt, as the outbox writes them
		outs[i].Attempt = &Attempt{Delivery: 1, StartedAt: clock.Now(), Action: "retry", Status: 503,
			Headers: map[string]string{"Content-Type": "text/plain"}, Body: []byte("unavailable")}
	}
	eps := []EndpointState{{Name: "orders", FailureStreak: 2, LastStatus: 503, NotBefore: clock.Now().Add(time.Minute)},
		{Name: "billing", Disabled: true, DisabledReason: "410", DisabledAt: clock.Now()}}
	if _, err := s.Apply(ctx, outs, eps); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Replay(ctx, "born-dead", clock.Now()); err != nil {
		t.Fatal(err)
	}
	if err := s.Drop(ctx, "evt-00004", "dropped by operator"); err != nil {
		t.Fatal(err)
	}
	if !opts.NoKeyIndex {
		if _, err := s.UpsertKey(ctx, "key-3", func(cur *Record) (*Record, error) {
			n := rec("upserted", "new state")
			n.Key = "key-3"
			return n, nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Update(ctx, "evt-00007", func(r *Record) error { r.Payload = []byte("changed"); return nil }); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Hour)
	if _, err := s.Apply(ctx, []Outcome{{Kind: OutcomeDelete, ID: "evt-00009", Version: stored[9].Version}}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.TrimTombstones(ctx, clock.Now().Add(-time.Minute)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.TrimChangelog(ctx, TrimPolicy{MaxEntries: 2500}); err != nil {
		t.Fatal(err)
	}
	entries, err := s.Changelog(0, 100)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetShippedLSN(ctx, entries[50].LSN); err != nil {
		t.Fatal(err)
	}
	if err := s.Restore(ctx, []*Entry{{LSN: 1, Op: OpEnqueue, ID: "restored", Record: rec("restored", "r")},
		{LSN: 2, Op: OpDelete, ID: "restored-gone", Time: clock.Now()}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return s.Path()
}

func mustCheck(t *testing.T, path string) *CheckReport {
	t.Helper()
	rep, err := Check(path, CheckOptions{})
	if rep == nil {
		t.Fatalf("Check: no report, %v", err)
	}
	return rep
}

// A file the store wrote, through every kind of change, passes the check
// with every bucket read; so does the copy a crash leaves (no freelist).
func TestCheckHealthyFiles(t *testing.T) {
	for _, tc := range []struct {
		name string
		path func(t *testing.T) string
	}{
		{"busy", func(t *testing.T) string { return busyStore(t, Options{}) }},
		{"busy without key index", func(t *testing.T) string { return busyStore(t, Options{NoKeyIndex: true}) }},
		{"new", func(t *testing.T) string {
			s := openTest(t, Options{})
			s.Close()
			return s.Path()
		}},
		{"after a crash", func(t *testing.T) string {
			p := filepath.Join(t.TempDir(), "crashed.db")
			if err := os.WriteFile(p, uncleanImage(t, 500, false), 0o600); err != nil {
				t.Fatal(err)
			}
			return p
		}},
		{"compacted", func(t *testing.T) string {
			p := busyStore(t, Options{})
			if err := Compact(p); err != nil {
				t.Fatal(err)
			}
			return p
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := tc.path(t)
			before, _ := os.ReadFile(path)
			rep, err := Check(path, CheckOptions{})
			if err != nil {
				t.Fatalf("Check: %v\n%v", err, rep)
			}
			if rep.Damaged() || len(rep.Skipped) > 0 || rep.Pages == 0 || rep.PageSize == 0 {
				t.Fatalf("report of a healthy file: %+v", rep)
			}
			if len(rep.Buckets) != len(allBuckets)+1+len(endpointBuckets) { // and the attempt log, the per-endpoint due index
				t.Fatalf("buckets %+v, want the store's %d", rep.Buckets, len(allBuckets)+1+len(endpointBuckets))
			}
			for _, b := range rep.Buckets {
				if !b.Checked {
					t.Errorf("bucket %s not checked", b.Name)
				}
			}
			s := openAt(t, path, Options{ReadOnly: true})
			st, err := s.Stats()
			if err != nil {
				t.Fatal(err)
			}
			s.Close()
			if got := keysRead(rep, "events"); got != st.Pending {
				t.Errorf("report reads %d events, Stats says %d pending", got, st.Pending)
			}
			if got := keysRead(rep, "changelog"); got != st.ChangelogEntries {
				t.Errorf("report reads %d changelog entries, Stats says %d", got, st.ChangelogEntries)
			}
			if after, _ := os.ReadFile(path); string(after) != string(before) {
				t.Error("Check changed the file")
			}
		})
	}
}

func keysRead(rep *CheckReport, name string) int {
	for _, b := range rep.Buckets {
		if b.Name == name {
			return b.Keys
		}
	}
	return -1
}

// 32 bytes overwritten in a live leaf of the events bucket, in its header,
// its element table or its values (the first or the last): Check names the bucket and the page, and
// for a damaged value the record's ID; the store's own reads meet the same
// damage only when they reach that page.
func TestCheckFindsDamagedLeafPage(t *testing.T) {
	clean := filledStore(t, 3000)
	ps, leaves := testkit.LeafPages(t, clean, string(bucketEvents))
	if len(leaves) < 5 {
		t.Fatalf("%d leaves; the test needs a middle one", len(leaves))
	}
	leaf := leaves[len(leaves)/2]
	img, err := os.ReadFile(clean)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		off  int
		want []string
	}{
		{"page header", 0, []string{"identifies itself as page"}},
		{"element table", pageHeaderSize, []string{"outside the page"}},
		{"values", ps / 2, []string{"checksum mismatch", `ID "`}},
		{"last value", testkit.LastValueEnd(t, clean, ps, leaf) - 32, []string{"checksum mismatch", `ID "`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "damaged.db")
			if err := os.WriteFile(path, img, 0o600); err != nil {
				t.Fatal(err)
			}
			testkit.Overwrite(t, path, ps, leaf, tc.off, testkit.Junk(32))
			rep, err := Check(path, CheckOptions{})
			if !errors.Is(err, ErrCorrupt) || rep == nil || !rep.Damaged() {
				t.Fatalf("Check: %v, report %+v; want ErrCorrupt", err, rep)
			}
			first := rep.Problems[0]
			if first.Bucket != "events" || !strings.Contains(err.Error(), path) {
				t.Errorf("first problem %v (error %v), want one in the events bucket naming the file", first, err)
			}
			text := first.String()
			if first.Page != leaf || !strings.Contains(text, fmt.Sprintf("page %d", leaf)) {
				t.Errorf("problem %q (page %d) does not name page %d", text, first.Page, leaf)
			}
			for _, w := range tc.want {
				if !strings.Contains(text, w) {
					t.Errorf("problem %q does not say %q", text, w)
				}
			}
		})
	}
}

// Two damaged leaves of one bucket are both reported, and the values in
// the pages around them are still read and checked.
func TestCheckReadsAroundDamagedPages(t *testing.T) {
	path := filledStore(t, 3000)
	ps, leaves := testkit.LeafPages(t, path, string(bucketEvents))
	a, b := leaves[1], leaves[len(leaves)-2]
	testkit.Overwrite(t, path, ps, a, 0, testkit.Junk(32))
	testkit.Overwrite(t, path, ps, b, ps/2, testkit.Junk(32))
	rep, err := Check(path, CheckOptions{})
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Check: %v", err)
	}
	var sawA, sawB bool
	for _, p := range rep.Problems {
		sawA = sawA || (p.Bucket == "events" && strings.Contains(p.String(), fmt.Sprintf("page %d identifies itself", a)))
		sawB = sawB || (p.Bucket == "events" && p.Page == b && strings.Contains(p.What, "checksum mismatch"))
	}
	if !sawA || !sawB {
		t.Errorf("problems %v; want page %d (header) and page %d (a value) both named", rep.Problems, a, b)
	}
	if n := keysRead(rep, "events"); n < 2500 || n >= 3000 {
		t.Errorf("%d events read around the damage, want all but one page of them", n)
	}
	if len(rep.Skipped) == 0 {
		t.Error("bbolt's check was run over damaged pages")
	}
}

// Each cross-bucket invariant that Check verifies is reported when only it
// is broken (written through bbolt, so the pages are sound).
func TestCheckFindsBrokenInvariants(t *testing.T) {
	for _, tc := range []struct {
		name, bucket, want string
		breakIt            func(tx *bolt.Tx) error
	}{
		{"a due entry lost", "events", "no due index entry", func(tx *bolt.Tx) error {
			c := tx.Bucket(bucketDue).Cursor()
			k, _ := c.First()
			return tx.Bucket(bucketDue).Delete(k)
		}},
		{"a due entry for nothing", "due", "which is not pending", func(tx *bolt.Tx) error {
			return tx.Bucket(bucketDue).Put(dueKey(time.Now(), "ghost"), nil)
		}},
		{"a due entry at the wrong time", "due", "due at", func(tx *bolt.Tx) error {
			k, _ := tx.Bucket(bucketDue).Cursor().First()
			id := string(k[8:])
			return tx.Bucket(bucketDue).Put(dueKey(time.Now().Add(time.Hour), id), nil)
		}},
		{"pending and dead", "events", "also a dead letter", func(tx *bolt.Tx) error {
			k, v := tx.Bucket(bucketEvents).Cursor().First()
			r, _ := DecodeRecord(v)
			r.DeadReason = "x"
			return tx.Bucket(bucketDead).Put(k, EncodeRecord(r))
		}},
		{"a counter off", "meta", "count_pending", func(tx *bolt.Tx) error {
			return tx.Bucket(bucketMeta).Put(metaPending, u64(7))
		}},
		{"a record under another ID", "events", "holds record", func(tx *bolt.Tx) error {
			b := tx.Bucket(bucketEvents)
			_, v := b.Cursor().Last()
			k, _ := b.Cursor().First()
			return b.Put(k, append([]byte(nil), v...))
		}},
		{"a version from the future", "events", "above the last LSN", func(tx *bolt.Tx) error {
			return tx.Bucket(bucketMeta).Put(metaLastLSN, u64(3))
		}},
		{"a torn tombstone", "tombstones", "has 3 bytes", func(tx *bolt.Tx) error {
			return tx.Bucket(bucketTombs).Put([]byte("evt-x"), []byte{1, 2, 3})
		}},
		{"a tombstone never trimmed", "tombstones", "never be trimmed", func(tx *bolt.Tx) error {
			return tx.Bucket(bucketTombs).Put([]byte("evt-y"), u64(nanos(time.Now())))
		}},
		{"a damaged endpoint state", "endpoints", "checksum mismatch", func(tx *bolt.Tx) error {
			v := encodeEndpoint(&EndpointState{Name: "orders"})
			v[len(v)-1] ^= 1
			return tx.Bucket(bucketEndpoints).Put([]byte("orders"), v)
		}},
		{"a damaged changelog entry", "changelog", "LSN 1", func(tx *bolt.Tx) error {
			b := tx.Bucket(bucketChangelog)
			k, v := b.Cursor().First()
			v = append([]byte(nil), v...)
			v[len(v)/2] ^= 0xff
			return b.Put(append([]byte(nil), k...), v)
		}},
		{"a missing bucket", "dead", "missing", func(tx *bolt.Tx) error {
			return tx.DeleteBucket(bucketDead)
		}},
		{"a per-endpoint due entry lost", "events", "no per-endpoint due index entry", func(tx *bolt.Tx) error {
			k, _ := tx.Bucket(bucketDueByEndpoint).Cursor().First()
			return tx.Bucket(bucketDueByEndpoint).Delete(k)
		}},
		{"a per-endpoint due entry for nothing", "due_by_endpoint", "which is not pending", func(tx *bolt.Tx) error {
			return tx.Bucket(bucketDueByEndpoint).Put(epDueKey(nil, "orders", time.Now(), "ghost"), nil)
		}},
		{"a per-endpoint due entry at the wrong time", "due_by_endpoint", "the pending record is for endpoint", func(tx *bolt.Tx) error {
			k, _ := tx.Bucket(bucketDueByEndpoint).Cursor().First()
			ep, _, id, _ := splitEpDue(k)
			return tx.Bucket(bucketDueByEndpoint).Put(epDueKey(nil, string(ep), time.Now().Add(time.Hour), string(id)), nil)
		}},
		{"an endpoint head lost", "due_endpoints", "no head entry", func(tx *bolt.Tx) error {
			k, _ := tx.Bucket(bucketDueEndpoints).Cursor().First()
			return tx.Bucket(bucketDueEndpoints).Delete(k)
		}},
		{"an endpoint head for nothing", "due_endpoints", "has no pending record", func(tx *bolt.Tx) error {
			return tx.Bucket(bucketDueEndpoints).Put(headKey(nanos(time.Now()), []byte("ghost")), nil)
		}},
		{"an endpoint head at the wrong time", "due_endpoints", "earliest record is due at", func(tx *bolt.Tx) error {
			b := tx.Bucket(bucketDueEndpoints)
			k, _ := b.Cursor().First()
			k = bytes.Clone(k)
			if err := b.Delete(k); err != nil {
				return err
			}
			return b.Put(headKey(binary.BigEndian.Uint64(k)+1, k[8:]), nil)
		}},
		{"a missing per-endpoint bucket", "due_endpoints", "missing", func(tx *bolt.Tx) error {
			return tx.DeleteBucket(bucketDueEndpoints)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filledStore(t, 50)
			db, err := bolt.Open(path, 0o600, nil)
			if err != nil {
				t.Fatal(err)
			}
			err = db.Update(tc.breakIt)
			db.Close()
			if err != nil {
				t.Fatal(err)
			}
			rep, err := Check(path, CheckOptions{})
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Check: %v, want ErrCorrupt", err)
			}
			found := false
			for _, p := range rep.Problems {
				found = found || (p.Bucket == tc.bucket && strings.Contains(p.String(), tc.want))
			}
			if !found {
				t.Errorf("no problem in %s saying %q: %v", tc.bucket, tc.want, rep.Problems)
			}
		})
	}
}

// The report lists at most MaxProblems problems and counts the others.
func TestCheckBoundsTheProblemsListed(t *testing.T) {
	path := filledStore(t, 300)
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error { // every due entry lost
		if err := tx.DeleteBucket(bucketDue); err != nil {
			return err
		}
		_, err := tx.CreateBucket(bucketDue)
		return err
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Check(path, CheckOptions{MaxProblems: 5})
	if !errors.Is(err, ErrCorrupt) || len(rep.Problems) != 5 || rep.Omitted < 295 {
		t.Fatalf("Check: %v; %d problems listed, %d omitted; want 5 listed, 295 or more omitted", err, len(rep.Problems), rep.Omitted)
	}
	if !strings.Contains(err.Error(), fmt.Sprintf("%d problems", len(rep.Problems)+rep.Omitted)) {
		t.Errorf("error %q does not give the number of problems", err)
	}
}

// Files that are not stores, or cannot be read now, are errors, not reports.
func TestCheckRefusesWhatItCannotCheck(t *testing.T) {
	s := openTest(t, Options{})
	if _, err := Check(s.Path(), CheckOptions{LockTimeout: 50 * time.Millisecond}); !errors.Is(err, ErrLocked) {
		t.Errorf("Check of an open store: %v, want ErrLocked", err)
	}
	s.Close()
	if _, err := Check(filepath.Join(t.TempDir(), "missing.db"), CheckOptions{}); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Check of a missing file: %v", err)
	}
	empty := filepath.Join(t.TempDir(), "empty.db")
	_ = os.WriteFile(empty, nil, 0o600)
	if _, err := Check(empty, CheckOptions{}); !errors.Is(err, ErrNotDatabase) {
		t.Errorf("Check of an empty file: %v, want ErrNotDatabase", err)
	}
	// A truncated file is damage, with a report.
	path := filledStore(t, 2000)
	b, _ := os.ReadFile(path)
	_ = os.WriteFile(path, b[:highWater(t, path)/2], 0o600)
	rep, err := Check(path, CheckOptions{})
	if !errors.Is(err, ErrCorrupt) || rep == nil || !strings.Contains(rep.Problems[0].What, "truncated") {
		t.Errorf("Check of a truncated file: %v, %+v", err, rep)
	}
}

// FuzzCheck damages bytes of a store's file (cleanly closed, or as a crash
// left it) and checks it: Check never crashes, and a file it passes is one
// whose every record, dead letter and changelog entry the store reads.
func FuzzCheck(f *testing.F) {
	imgs := [2][]byte{uncleanImage(f, 300, false)}
	{
		dir := f.TempDir()
		s, err := Open(filepath.Join(dir, "clean.db"), Options{NoSync: true})
		if err != nil {
			f.Fatal(err)
		}
		recs := make([]*Record, 300)
		for i := range recs {
			recs[i] = rec(fmt.Sprintf("evt-%05d", i), strings.Repeat("p", 500))
		}
		if _, err := s.Insert(f.Context(), recs); err != nil {
			f.Fatal(err)
		}
		if err := s.Close(); err != nil {
			f.Fatal(err)
		}
		if imgs[1], err = os.ReadFile(s.Path()); err != nil {
			f.Fatal(err)
		}
	}
	ps := int(newestMeta(f, imgs[0]).pageSize)
	f.Add(uint32(2*ps), []byte{0xff, 0xff})
	f.Add(uint32(2*ps+9), []byte{0x20})
	f.Add(uint32(3*ps+10), []byte{0xff, 0xff})
	f.Add(uint32(4*ps+17), []byte{0, 0, 0, 0x40})
	f.Add(uint32(5*ps+2000), testkit.Junk(32))
	f.Add(uint32(0), testkit.Junk(8))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, off uint32, data []byte) {
		img := imgs[off&1]
		b := append([]byte(nil), img...)
		copy(b[int(off/2)%len(b):], data)
		p := filepath.Join(dir, "fuzz.db")
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		rep, err := Check(p, CheckOptions{LockTimeout: 50 * time.Millisecond})
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrNotDatabase) {
				t.Fatalf("Check: %v, want ErrCorrupt or ErrNotDatabase", err)
			}
			if errors.Is(err, ErrCorrupt) && (rep == nil || !rep.Damaged()) {
				t.Fatalf("Check: %v without a report of the damage", err)
			}
			return
		}
		s, err := Open(p, Options{ReadOnly: true, LockTimeout: 50 * time.Millisecond})
		if err != nil {
			t.Fatalf("Check passed a file that Open refuses: %v", err)
		}
		defer s.Close()
		for _, state := range []State{StatePending, StateDead} {
			for after := ""; ; {
				_, next, err := s.List(ListQuery{State: state, After: after, Limit: 1000})
				if err != nil {
					t.Fatalf("Check passed a file whose %v records do not read: %v", state, err)
				}
				if next == "" {
					break
				}
				after = next
			}
		}
		if _, err := s.Changelog(0, 1<<20); err != nil {
			t.Fatalf("Check passed a file whose changelog does not read: %v", err)
		}
		if _, err := s.Due(DueQuery{Now: time.Now().Add(24 * time.Hour), Limit: 1 << 20}); err != nil {
			t.Fatalf("Check passed a file whose due index does not read: %v", err)
		}
	})
}

// Compact refuses a damaged file and leaves it as it was: its copy would
// carry the damage over the original (or stop at a damaged page in a panic
// of bbolt's copy).
func TestCompactRefusesDamagedFile(t *testing.T) {
	path := filledStore(t, 3000)
	ps, leaves := testkit.LeafPages(t, path, string(bucketEvents))
	for _, off := range []int{0, ps / 2} {
		testkit.Overwrite(t, path, ps, leaves[len(leaves)/2], off, testkit.Junk(32))
		before, _ := os.ReadFile(path)
		err := Compact(path)
		var oe *OpenError
		if !errors.Is(err, ErrCorrupt) || !errors.As(err, &oe) || oe.Path != path || !strings.Contains(err.Error(), "damaged") {
			t.Fatalf("Compact of a damaged file: %v, want an *OpenError matching ErrCorrupt", err)
		}
		if after, _ := os.ReadFile(path); string(after) != string(before) {
			t.Fatal("a refused Compact changed the file")
		}
	}
}
