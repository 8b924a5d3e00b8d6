//go:build fault

package faults

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outboxd/outbox/internal/testkit"
	"github.com/outboxd/outbox/store"
	bolt "go.etcd.io/bbolt"
)

// crashLoop configures one crash-loop run.
type crashLoop struct {
	kills int
	// answer is how the receiver answers while the loop runs (it answers
	// 200 to everything during the final drain). Default: 200.
	answer func(id string) answer
	// inject, when set, runs after kill k has been checked and before the
	// restart: a test-only fault applied to the closed database file.
	inject func(t *testing.T, k int, db string)
}

// crashVerdict is what a crash loop found.
type crashVerdict struct {
	violations []string
	summary    string
	lost       int
}

// runCrashLoop runs outboxd under a steady load, SIGKILLs it at random
// moments c.kills times, checks the closed file after each kill, restarts
// it, and finally lets it drain against a healthy receiver. It returns every
// violation of the guarantees instead of failing, so that a test can also
// assert that an injected fault is caught.
func runCrashLoop(t *testing.T, c crashLoop) crashVerdict {
	t.Helper()
	dir := t.TempDir()
	db := filepath.Join(dir, "outboxd.db")
	addr := testkit.FreeAddr(t)
	rcv := newReceiver(t)
	if c.answer != nil {
		rcv.set(c.answer)
	}
	args := func(gen int) []string {
		return []string{
			"--endpoint", "recv=" + rcv.url(gen), "--allow-private-networks",
			"--interval", "100ms", "--backoff-initial", "50ms", "--backoff-max", "500ms",
			"--max-attempts", "100000", "--concurrency", "16",
		}
	}
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, seed>>1))
	t.Logf("crash loop: %d kills, seed %d", c.kills, seed)

	var v crashVerdict
	violate := func(format string, args ...any) {
		v.violations = append(v.violations, fmt.Sprintf(format, args...))
	}

	ld := newLoader(addr, "crash", 1000, 20, 64)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		ld.run(ctx)
	}()
	stopLoad := sync.OnceFunc(func() {
		cancel()
		wg.Wait()
	})
	defer stopLoad()

	began := time.Now()
	var pendingAfter []map[string]bool // pending IDs in the file after kill k
	var pendingCounts []int
	for k := range c.kills {
		s := start(t, db, addr, args(k)...)
		// A random moment: anywhere in the life of a loaded process, from
		// just after it became ready to well into steady delivery.
		wait := time.NewTimer(time.Duration(50+rng.IntN(1200)) * time.Millisecond)
		<-wait.C
		s.kill()
		for _, p := range checkDB(db) {
			violate("after kill %d: bbolt check: %s", k+1, p)
		}
		pend, err := pendingIDs(db)
		if err != nil {
			violate("after kill %d: reading pending events: %v", k+1, err)
			pend = map[string]bool{}
		}
		pendingAfter = append(pendingAfter, pend)
		pendingCounts = append(pendingCounts, len(pend))
		if c.inject != nil {
			c.inject(t, k, db)
		}
	}
	stopLoad()
	loopTime := time.Since(began)

	// Final run: heal the receiver and drain.
	rcv.set(func(string) answer { return answerOK })
	final := start(t, db, addr, args(c.kills)...)
	dctx, dcancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer dcancel()
	drainStart := time.Now()
	var last stats
	err := testkit.Poll(dctx, 50*time.Millisecond, func() (bool, error) {
		st, err := final.stats()
		if err != nil {
			return false, nil
		}
		last = st
		return st.Pending == 0 && st.InFlight == 0, nil
	})
	if err != nil {
		violate("drain did not finish: %v (last stats %+v)", err, last)
	}
	drainTime := time.Since(drainStart)
	if last.Dead != 0 {
		violate("%d events became dead letters although the receiver only answered 200 and 503", last.Dead)
	}
	final.stop()
	for _, p := range checkDB(db) {
		violate("after the final graceful stop: bbolt check: %s", p)
	}
	if pend, err := pendingIDs(db); err != nil || len(pend) != 0 {
		violate("after the drain the file still holds %d pending events (err %v)", len(pend), err)
	}

	acked, unknown := ld.ledger()
	got := rcv.delivered()
	var lost, phantoms, unexplained []string
	redelivered := 0
	for id := range acked {
		if len(got[id]) == 0 {
			lost = append(lost, id)
		}
	}
	for id, ds := range got {
		if !acked[id] && !unknown[id] {
			phantoms = append(phantoms, id)
		}
		slices.SortFunc(ds, func(a, b delivery) int {
			if a.Gen != b.Gen {
				return a.Gen - b.Gen
			}
			return a.At.Compare(b.At)
		})
		for j := 1; j < len(ds); j++ {
			redelivered++
			// A second 200 is legitimate only if a kill came after the
			// previous one and the event was still pending in the file that
			// kill left (the delete had not committed): it was in flight.
			explained := false
			for m := ds[j-1].Gen; m < ds[j].Gen && m < len(pendingAfter); m++ {
				if pendingAfter[m][id] {
					explained = true
					break
				}
			}
			if !explained {
				unexplained = append(unexplained, fmt.Sprintf("%s (runs %d then %d)", id, ds[j-1].Gen+1, ds[j].Gen+1))
			}
		}
	}
	slices.Sort(lost)
	slices.Sort(phantoms)
	slices.Sort(unexplained)
	if len(lost) > 0 {
		violate("%d acknowledged events lost (never delivered), e.g. %s", len(lost), sample(lost))
	}
	if len(phantoms) > 0 {
		violate("%d delivered events were never sent, e.g. %s", len(phantoms), sample(phantoms))
	}
	if len(unexplained) > 0 {
		violate("%d redeliveries of events that were not in flight at a kill, e.g. %s", len(unexplained), sample(unexplained))
	}
	rcv.mu.Lock()
	v.violations = append(v.violations, rcv.violations...)
	rcv.mu.Unlock()
	v.lost = len(lost)
	v.summary = fmt.Sprintf("%d SIGKILLs in %.0fs; load: %s; delivered %d distinct events, %d redeliveries "+
		"(all of events in flight at a kill: %v); events pending in the file after a kill: median %d, max %d; final drain %.1fs; receiver answers: %s",
		c.kills, loopTime.Seconds(), ld.summary(), len(got), redelivered, len(unexplained) == 0,
		medianInt(pendingCounts), slices.Max(pendingCounts), drainTime.Seconds(), rcv.answerCounts())
	return v
}

func medianInt(v []int) int {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

func sample(ids []string) string {
	if len(ids) > 5 {
		return strings.Join(ids[:5], ", ") + ", …"
	}
	return strings.Join(ids, ", ")
}

// TestCrashLoop: outboxd under load is SIGKILLed at random moments and
// restarted; nothing acknowledged is lost, redeliveries are only of events
// in flight at a kill, and the file passes bbolt's check after each kill.
func TestCrashLoop(t *testing.T) {
	v := runCrashLoop(t, crashLoop{kills: *killsFlag})
	report(t, "**Crash loop** (`-kills %d`): %s.", *killsFlag, v.summary)
	for _, p := range v.violations {
		t.Errorf("VIOLATION: %s", p)
	}
}

// TestCrashLoopCatchesInjectedLoss proves that the crash loop's verdict is
// not vacuous. Between two runs it rolls the database file back to the copy
// the first kill left: exactly what a disk that acknowledged fsync without
// persisting (or a restore from a stale backup) does to the process. Every
// event acknowledged in between is gone from the file; the suite must say
// so. The receiver answers 503 during the loop, so that those events are
// still pending (not already delivered) when the file is rolled back.
func TestCrashLoopCatchesInjectedLoss(t *testing.T) {
	const kills = 4
	snap := filepath.Join(t.TempDir(), "after-first-kill.db")
	v := runCrashLoop(t, crashLoop{
		kills:  kills,
		answer: func(string) answer { return answerUnavailable },
		inject: func(t *testing.T, k int, db string) {
			switch k {
			case 0:
				if err := copyFile(snap, db); err != nil {
					t.Fatal(err)
				}
			case kills - 1:
				if err := copyFile(db, snap); err != nil {
					t.Fatal(err)
				}
				t.Logf("injected: rolled the database back to its state after kill 1")
			}
		},
	})
	t.Logf("verdict: %s", v.summary)
	for _, p := range v.violations {
		t.Logf("reported: %s", p)
	}
	if v.lost == 0 || !slices.ContainsFunc(v.violations, func(s string) bool { return strings.Contains(s, "acknowledged events lost") }) {
		t.Fatalf("the crash loop did not report the events lost by rolling the file back; violations: %q", v.violations)
	}
	report(t, "**Injected loss** (rolling the file back to an earlier state between two runs): the suite reported %d acknowledged events lost.", v.lost)
}

// TestCheckCatchesCorruption proves that the per-kill file check is not
// vacuous: a database whose events-bucket root page is overwritten fails it.
func TestCheckCatchesCorruption(t *testing.T) {
	path := filepath.Join(t.TempDir(), "corrupt.db")
	st, err := store.Open(path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	var recs []*store.Record
	for i := range 2000 {
		recs = append(recs, &store.Record{ID: fmt.Sprintf("ev-%05d", i), Destination: "recv", Endpoint: "recv",
			Method: "POST", Payload: []byte(strings.Repeat("p", 200)), CreatedAt: now, NextAttemptAt: now})
	}
	if _, err := st.Insert(context.Background(), recs); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if p := checkDB(path); len(p) != 0 {
		t.Fatalf("a healthy file fails the check: %q", p)
	}

	// Find the root page of the largest bucket and overwrite it.
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	var root uint64
	var most int
	err = db.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error {
			if n := b.Stats().KeyN; n > most {
				most, root = n, uint64(b.Root())
			}
			return nil
		})
	})
	pageSize := db.Info().PageSize
	db.Close()
	if err != nil || root == 0 {
		t.Fatalf("finding a bucket root: %v (root %d)", err, root)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	garbage := make([]byte, pageSize)
	for i := range garbage {
		garbage[i] = 0xA5
	}
	if _, err := f.WriteAt(garbage, int64(root)*int64(pageSize)); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if p := checkDB(path); len(p) == 0 {
		t.Fatal("a file with an overwritten bucket root passes the check")
	} else {
		t.Logf("check reports: %s", p[0])
	}
}
