package store

import (
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

func sampleAttempt() *Attempt {
	return &Attempt{Seq: 3, Delivery: 3, StartedAt: time.Date(2026, 3, 1, 12, 0, 0, 5, time.UTC),
		Duration: 42 * time.Millisecond, Action: "park", Status: 404,
		Headers: map[string]string{"Content-Type": "text/plain", "Retry-After": "5"}, Body: []byte("not yet")}
}

func TestAttemptRoundTrip(t *testing.T) {
	a := sampleAttempt()
	id, got, err := DecodeAttempt(encodeAttempt("evt-1", a))
	if err != nil || id != "evt-1" || !reflect.DeepEqual(got, a) {
		t.Fatalf("round trip = %q %+v %v; want %+v", id, got, err, a)
	}
	b := encodeAttempt("evt-1", a)
	b[len(b)/2] ^= 0xff
	if _, _, err := DecodeAttempt(b); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("bit flip: %v, want ErrCorrupt", err)
	}
}

func FuzzDecodeAttempt(f *testing.F) {
	f.Add(encodeAttempt("evt-1", sampleAttempt()))
	f.Add(encodeAttempt("x", &Attempt{Seq: 1}))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		checkAttemptDecode(t, b)
		checkAttemptDecode(t, frameOf(kindAttempt, b))
	})
}

func checkAttemptDecode(t *testing.T, b []byte) {
	id, a, err := DecodeAttempt(b)
	if err != nil {
		if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrSchemaTooNew) {
			t.Fatalf("error %v is neither ErrCorrupt nor ErrSchemaTooNew", err)
		}
		return
	}
	id2, again, err := DecodeAttempt(encodeAttempt(id, a))
	if err != nil || id2 != id || !reflect.DeepEqual(again, a) {
		t.Fatalf("round trip of a decoded attempt differs: %v\n%#v\n%#v", err, again, a)
	}
}

func attempt(action string, status int) *Attempt {
	return &Attempt{Action: action, Status: status, StartedAt: time.Unix(100, 0).UTC(), Duration: time.Millisecond}
}

// mustAttempts returns the actions and statuses of id's attempts, as
// "seq:action/status" strings.
func attemptsOf(t *testing.T, s *Store, id string) []string {
	t.Helper()
	as, err := s.Attempts(id)
	if err != nil {
		t.Fatalf("Attempts(%q): %v", id, err)
	}
	var out []string
	for _, a := range as {
		out = append(out, fmt.Sprintf("%d:%s/%d", a.Seq, a.Action, a.Status))
	}
	return out
}

// An outcome's attempt is logged with it; a stale outcome's attempt is
// logged while the event is known; an attempt outcome logs without
// touching the event; a delivered event keeps its attempts until its
// tombstone is trimmed, and they go with it.
func TestApplyLogsAttempts(t *testing.T) {
	clk := newClock()
	s := openTest(t, Options{Now: clk.Now})
	a, b := rec("a", ""), rec("b", "")
	mustInsert(t, s, a, b)
	in := attempt("park", 404)
	res, err := s.Apply(ctxT(t), []Outcome{
		{Kind: OutcomeReschedule, ID: "a", Version: a.Version, Deliveries: 1, NextAttemptAt: clk.Now(), Attempt: in},
		{Kind: OutcomeAttempt, ID: "b", Attempt: attempt("disable", 410)},
		{Kind: OutcomeAttempt, ID: "nobody", Attempt: attempt("disable", 410)},
	}, nil)
	if err != nil || fmt.Sprint(res) != "[applied applied stale]" {
		t.Fatalf("Apply = %v, %v", res, err)
	}
	if in.Seq != 0 {
		t.Fatal("Apply wrote the caller's attempt")
	}
	if rb, _, _ := s.Get("b"); rb.Version != b.Version {
		t.Fatal("an attempt outcome changed its event")
	}
	// Stale (old version): the request was made, so it is logged.
	res, err = s.Apply(ctxT(t), []Outcome{{Kind: OutcomeDelete, ID: "a", Version: a.Version, Attempt: attempt("success", 200)}}, nil)
	if err != nil || res[0] != Stale {
		t.Fatalf("stale Apply = %v, %v", res, err)
	}
	ra, _, _ := s.Get("a")
	if _, err := s.Apply(ctxT(t), []Outcome{{Kind: OutcomeDelete, ID: "a", Version: ra.Version, Attempt: attempt("success", 200)}}, nil); err != nil {
		t.Fatal(err)
	}
	if got := attemptsOf(t, s, "a"); fmt.Sprint(got) != "[1:park/404 2:success/200 3:success/200]" {
		t.Fatalf("attempts of a: %v", got)
	}
	if got := attemptsOf(t, s, "b"); fmt.Sprint(got) != "[1:disable/410]" {
		t.Fatalf("attempts of b: %v", got)
	}
	if _, err := s.Attempts("nobody"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("attempts of an unknown event: %v, want ErrNotFound", err)
	}
	checkClean(t, s)

	clk.Advance(time.Hour)
	if n, err := s.TrimTombstones(ctxT(t), clk.Now()); err != nil || n != 1 {
		t.Fatalf("TrimTombstones = %d, %v", n, err)
	}
	if _, err := s.Attempts("a"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("attempts of a trimmed event: %v, want ErrNotFound", err)
	}
	if err := s.view(func(tx *bolt.Tx) error {
		if k, _ := tx.Bucket(bucketAttempts).Cursor().Seek(attemptPrefix("a")); k != nil && strings.HasPrefix(string(k), string(attemptPrefix("a"))) {
			return fmt.Errorf("attempt key %x left", k)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if got := attemptsOf(t, s, "b"); len(got) != 1 {
		t.Fatalf("a pending event lost its attempts: %v", got)
	}
	checkClean(t, s)
}

// checkClean closes nothing: it checks a copy of the file through Check.
func checkClean(t *testing.T, s *Store) {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "copy.db")
	err := s.view(func(tx *bolt.Tx) error { return tx.CopyFile(dst, 0o600) })
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Check(dst, CheckOptions{})
	if err != nil || rep.Damaged() {
		t.Fatalf("Check: %v %v", err, rep.Problems)
	}
}

// An event keeps its last AttemptsPerEvent attempts, numbered on, and a
// replay continues the numbering.
func TestAttemptsCapped(t *testing.T) {
	s := openTest(t, Options{})
	r := rec("x", "")
	mustInsert(t, s, r)
	version := r.Version
	for i := range AttemptsPerEvent + 5 {
		res, err := s.Apply(ctxT(t), []Outcome{{Kind: OutcomeReschedule, ID: "x", Version: version, Deliveries: i + 1,
			Attempt: &Attempt{Delivery: i + 1, Action: "retry", Status: 500}}}, nil)
		if err != nil || res[0] != Applied {
			t.Fatalf("Apply %d = %v, %v", i, res, err)
		}
		cur, _, _ := s.Get("x")
		version = cur.Version
	}
	as, err := s.Attempts("x")
	if err != nil || len(as) != AttemptsPerEvent {
		t.Fatalf("kept %d attempts, %v; want %d", len(as), err, AttemptsPerEvent)
	}
	if as[0].Seq != 6 || as[len(as)-1].Seq != AttemptsPerEvent+5 || as[0].Delivery != 6 {
		t.Fatalf("kept attempts %d..%d (delivery %d), want the last ones", as[0].Seq, as[len(as)-1].Seq, as[0].Delivery)
	}
	checkClean(t, s)
}

// Apply refuses an attempt over the bounds, and an attempt outcome without
// an attempt, and writes nothing.
func TestApplyRefusesBadAttempts(t *testing.T) {
	s := openTest(t, Options{})
	r := rec("x", "")
	mustInsert(t, s, r)
	for name, o := range map[string]Outcome{
		"body":    {Kind: OutcomeDelete, ID: "x", Version: r.Version, Attempt: &Attempt{Body: make([]byte, MaxAttemptBody+1)}},
		"missing": {Kind: OutcomeAttempt, ID: "x"},
	} {
		if _, err := s.Apply(ctxT(t), []Outcome{o}, nil); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	if _, st, _ := s.Get("x"); st != StatePending {
		t.Fatalf("state %v after refused outcomes", st)
	}
}

// A file from before the attempt log gets its bucket at open; one whose
// application owns a bucket of that name is refused, naming it.
func TestAttemptsBucketOnOlderFiles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "old.db")
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	r := rec("x", "")
	mustInsert(t, s, r)
	_ = s.Close()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		if err := tx.DeleteBucket(bucketAttempts); err != nil {
			return err
		}
		return tx.Bucket(bucketMeta).Delete(metaAttempts)
	}); err != nil {
		t.Fatal(err)
	}
	_ = db.Close()

	ro, err := Open(path, Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("read-only open of an older file: %v", err)
	}
	if as, err := ro.Attempts("x"); err != nil || as != nil {
		t.Fatalf("Attempts of an older file: %v %v", as, err)
	}
	_ = ro.Close()
	if rep, err := Check(path, CheckOptions{}); err != nil || rep.Damaged() {
		t.Fatalf("Check of an older file: %v %v", err, rep.Problems)
	}
	s = openAt(t, path, Options{})
	if _, err := s.Apply(ctxT(t), []Outcome{{Kind: OutcomeAttempt, ID: "x", Attempt: attempt("park", 404)}}, nil); err != nil {
		t.Fatal(err)
	}
	if got := attemptsOf(t, s, "x"); len(got) != 1 {
		t.Fatalf("attempts after upgrade: %v", got)
	}
	_ = s.Close()

	// An application bucket of that name, without the store's marker.
	db, err = bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Delete(metaAttempts) })
	_ = db.Close()
	if _, err := Open(path, Options{}); !errors.Is(err, ErrNotDatabase) || !strings.Contains(err.Error(), `"attempts"`) {
		t.Fatalf("open with an application bucket named attempts: %v", err)
	}
}

// Compact keeps the attempt log, marker included.
func TestCompactKeepsAttempts(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.db")
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	mustInsert(t, s, rec("x", ""))
	if _, err := s.Apply(ctxT(t), []Outcome{{Kind: OutcomeAttempt, ID: "x", Attempt: attempt("park", 404)}}, nil); err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	if err := Compact(path); err != nil {
		t.Fatal(err)
	}
	s = openAt(t, path, Options{})
	if got := attemptsOf(t, s, "x"); fmt.Sprint(got) != "[1:park/404]" {
		t.Fatalf("attempts after Compact: %v", got)
	}
}

// Check reports an attempt of an event the store no longer knows (no trim
// would ever remove it) and one that does not decode, naming the ID.
func TestCheckFindsBadAttempts(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.db")
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	mustInsert(t, s, rec("x", ""))
	_ = s.Close()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketAttempts)
		if err := b.Put(attemptKey("ghost", 1), encodeAttempt("ghost", &Attempt{Seq: 1, Action: "retry"})); err != nil {
			return err
		}
		return b.Put(attemptKey("x", 1), []byte("junk"))
	}); err != nil {
		t.Fatal(err)
	}
	_ = db.Close()
	rep, err := Check(path, CheckOptions{})
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Check: %v, want ErrCorrupt", err)
	}
	var got []string
	for _, p := range rep.Problems {
		got = append(got, p.String())
	}
	all := strings.Join(got, "\n")
	if len(got) != 2 || !strings.Contains(all, `ID "ghost", attempt 1`) || !strings.Contains(all, "never be trimmed") ||
		!strings.Contains(all, `ID "x", attempt 1`) {
		t.Fatalf("problems:\n%s", all)
	}
}

// A dead letter keeps its attempts through a trim of tombstones, and a
// replay continues their numbering.
func TestAttemptsOfDeadAndReplayed(t *testing.T) {
	clk := newClock()
	s := openTest(t, Options{Now: clk.Now})
	r := rec("x", "")
	mustInsert(t, s, r)
	if _, err := s.Apply(ctxT(t), []Outcome{{Kind: OutcomeDead, ID: "x", Version: r.Version, Deliveries: 1, Attempt: attempt("dead", 400)}}, nil); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Hour)
	if _, err := s.TrimTombstones(ctxT(t), clk.Now()); err != nil {
		t.Fatal(err)
	}
	replayed, err := s.Replay(ctxT(t), "x", clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Apply(ctxT(t), []Outcome{{Kind: OutcomeDelete, ID: "x", Version: replayed.Version, Attempt: attempt("success", 200)}}, nil); err != nil {
		t.Fatal(err)
	}
	if got := attemptsOf(t, s, "x"); fmt.Sprint(got) != "[1:dead/400 2:success/200]" {
		t.Fatalf("attempts of a replayed event: %v", got)
	}
}
