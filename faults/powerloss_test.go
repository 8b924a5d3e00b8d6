//go:build fault && linux

package faults

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outboxd/outbox/internal/powerfs"
	"github.com/outboxd/outbox/internal/testkit"
	"github.com/outboxd/outbox/store"
)

// cutsFlag is how many power cuts each power-loss scenario makes; -seed
// (campaign_test.go) also draws their moments and options.
var cutsFlag = flag.Int("cuts", 4, "power cuts in each power-loss scenario")

// powerRun is one power-loss scenario: outboxd with its database on
// powerfs, under load, cut (SIGKILL, then powerfs.Cut) cuts times.
type powerRun struct {
	t    *testing.T
	bin  string
	fs   *powerfs.FS
	db   string
	addr string
	rcv  *receiver
	rng  *rand.Rand
	seed uint64

	loaders []*loader
	churn   *endpointChurn // nil without runtime endpoint changes
	dels    *deleter

	violations   []string
	pendingAfter []map[string]bool // pending IDs in the file after cut k
	cutStats     []powerfs.CutStats
}

// pcAnswer is how the receiver answers in the power-loss scenarios: 200
// for the events meant to be delivered, 500 for the others (they become
// dead letters after --max-attempts, or are deleted first).
func pcAnswer(id string) answer {
	if strings.HasPrefix(id, "pc-ok") || strings.HasPrefix(id, "pc-m-") {
		return answerOK
	}
	return answerFail
}

func newPowerRun(t *testing.T, bin string) *powerRun {
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	r := &powerRun{t: t, bin: bin, fs: powerfs.MountTest(t), addr: testkit.FreeAddr(t), rcv: newReceiver(t),
		rng: rand.New(rand.NewPCG(seed, seed>>7)), seed: seed}
	r.db = r.fs.Path("outboxd.db")
	r.rcv.set(pcAnswer)
	r.loaders = []*loader{
		newLoader(r.addr, "pc-ok-batch", 600, 20, 64),
		newLoader(r.addr, "pc-ok-single", 60, 1, 64),
		newLoader(r.addr, "pc-dead", 60, 5, 64),
		newLoader(r.addr, "pc-del", 60, 5, 64),
	}
	r.dels = &deleter{addr: r.addr, from: r.loaders[3], deleted: make(map[string]bool)}
	return r
}

func (r *powerRun) violate(format string, args ...any) {
	r.violations = append(r.violations, fmt.Sprintf(format, args...))
}

// start runs outboxd for run gen on the mount.
func (r *powerRun) start(gen int) *sidecar {
	args := []string{"--endpoint", "recv=" + r.rcv.url(gen), "--allow-private-networks",
		"--interval", "100ms", "--backoff-initial", "50ms", "--backoff-max", "200ms",
		"--max-attempts", "3", "--breaker-threshold", "-1", "--concurrency", "16"}
	return startBinary(r.t, r.bin, r.db, r.addr, args...)
}

// run drives the load and the cuts, then drains; its verdict is in
// r.violations and the summary it returns.
func (r *powerRun) run(cuts int) string {
	t := r.t
	t.Logf("power loss: %d cuts, -seed %d", cuts, r.seed)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, l := range r.loaders {
		wg.Go(func() { l.run(ctx) })
	}
	wg.Go(func() { r.dels.run(ctx) })
	if r.churn != nil {
		wg.Go(func() { r.churn.run(ctx) })
	}
	stopLoad := sync.OnceFunc(func() { cancel(); wg.Wait() })
	defer stopLoad()

	began := time.Now()
	for k := range cuts {
		s := r.start(k)
		if r.churn != nil {
			r.churn.checkAfterRestart(r, k)
		}
		wait := time.NewTimer(time.Duration(100+r.rng.IntN(1200)) * time.Millisecond)
		<-wait.C
		deletedBefore := r.dels.snapshot()
		s.kill()
		r.cut(k, deletedBefore)
	}
	stopLoad()
	loop := time.Since(began)
	final := r.start(cuts)
	if r.churn != nil {
		r.churn.checkAfterRestart(r, cuts)
	}
	drain := r.drain(final)
	final.stop()
	f := r.verdict()
	return fmt.Sprintf("%d cuts in %.0fs (-seed %d); %d events acknowledged, %d lost, %d deleted events back, %d redeliveries (%d not of an event pending after a cut), %d deletes acknowledged; %s; bbolt check after every cut and at the end: %s; final drain %.1fs; receiver answers: %s",
		cuts, loop.Seconds(), r.seed, f.acked, f.lost, f.resurrected, f.redelivered, f.unexplained, len(r.dels.snapshot()),
		r.cutSummary(), r.checkVerdict(), drain.Seconds(), r.rcv.answerCounts())
}

// cut drops what the killed process left unsynced, with options drawn
// from the run's seed, then checks the file the cut left.
func (r *powerRun) cut(k int, deletedBefore map[string]bool) {
	opts := powerfs.CutOptions{KeepPrefix: r.rng.IntN(2) == 0, Tear: r.rng.IntN(2) == 0, Rand: r.rng}
	st, err := r.fs.Cut(opts)
	if err != nil {
		r.t.Fatalf("cut %d: %v", k+1, err)
	}
	r.cutStats = append(r.cutStats, st)
	pend := r.inspect(fmt.Sprintf("after cut %d", k+1), store.StatePending)
	r.pendingAfter = append(r.pendingAfter, pend)
	for id := range deletedBefore {
		if pend[id] {
			r.violate("after cut %d: event %s, deleted (204) before the cut, is pending again", k+1, id)
		}
	}
}

// inspect copies the database file out of the mount (a process must not
// map files of a FUSE mount it serves), runs bbolt's check on the copy and
// returns the IDs of its events in state.
func (r *powerRun) inspect(when string, state store.State) map[string]bool {
	cp := filepath.Join(r.t.TempDir(), "copy.db")
	if err := copyFile(cp, r.db); err != nil {
		r.violate("%s: copying the database file: %v", when, err)
		return map[string]bool{}
	}
	defer os.Remove(cp)
	for _, p := range checkDB(cp) {
		r.violate("%s: bbolt check: %s", when, p)
	}
	ids, err := idsIn(cp, state)
	if err != nil {
		r.violate("%s: reading the events: %v", when, err)
	}
	return ids
}

// drain waits until nothing is pending or in flight.
func (r *powerRun) drain(s *sidecar) time.Duration {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	began := time.Now()
	var last stats
	if err := testkit.Poll(ctx, 50*time.Millisecond, func() (bool, error) {
		st, err := s.stats()
		last = st
		return err == nil && st.Pending == 0 && st.InFlight == 0, nil
	}); err != nil {
		r.violate("drain did not finish: %v (last stats %+v)", err, last)
	}
	return time.Since(began)
}

// figures are a run's counts for the results table.
type figures struct {
	acked, lost, resurrected, redelivered, unexplained int
}

// verdict compares the ledgers with the receiver and the final file.
func (r *powerRun) verdict() figures {
	var f figures
	dead := r.inspect("after the final graceful stop", store.StateDead)
	pending, _ := idsIn(r.copyFinal(), store.StatePending)
	got := r.rcv.delivered()
	deleted := r.dels.snapshot()
	var lost, back []string
	for _, l := range r.loaders {
		acked, _ := l.ledger()
		f.acked += len(acked)
		for id := range acked {
			switch {
			case deleted[id]:
				if dead[id] || pending[id] || len(got[id]) > 0 {
					back = append(back, id)
				}
			case strings.HasPrefix(id, "pc-ok"):
				if len(got[id]) == 0 {
					lost = append(lost, id)
				}
			default: // answered 500: must be a dead letter, or deleted by a request whose answer was lost
				if !dead[id] && !r.dels.tried(id) {
					lost = append(lost, id)
				}
			}
		}
	}
	if r.churn != nil {
		for id := range r.churn.ackedEvents() {
			f.acked++
			if len(got[id]) == 0 && !dead[id] {
				lost = append(lost, id)
			}
		}
	}
	f.redelivered, f.unexplained = r.redeliveries(got)
	f.lost, f.resurrected = len(lost), len(back)
	slices.Sort(lost)
	slices.Sort(back)
	if len(lost) > 0 {
		r.violate("%d acknowledged events lost (neither delivered nor dead), e.g. %s", len(lost), sample(lost))
	}
	if len(back) > 0 {
		r.violate("%d events deleted (204) came back (pending, dead or delivered at the end), e.g. %s", len(back), sample(back))
	}
	if len(pending) > 0 {
		r.violate("after the drain the file still holds %d pending events", len(pending))
	}
	r.rcv.mu.Lock()
	r.violations = append(r.violations, r.rcv.violations...)
	r.rcv.mu.Unlock()
	return f
}

// copyFinal is the final file, copied out of the mount.
func (r *powerRun) copyFinal() string {
	cp := filepath.Join(r.t.TempDir(), "final.db")
	if err := copyFile(cp, r.db); err != nil {
		r.t.Fatal(err)
	}
	return cp
}

// redeliveries counts second 200s, and those not explained by a cut: a
// second 200 is legitimate only if a cut came between the two and the
// event was still pending in the file that cut left (its delete had not
// reached the disk). Events to managed endpoints (whose URL names no run)
// are counted, not attributed.
func (r *powerRun) redeliveries(got map[string][]delivery) (total, unexplained int) {
	var bad []string
	for id, ds := range got {
		slices.SortFunc(ds, func(a, b delivery) int {
			if a.Gen != b.Gen {
				return a.Gen - b.Gen
			}
			return a.At.Compare(b.At)
		})
		for j := 1; j < len(ds); j++ {
			total++
			if ds[j].Gen == managedGen {
				continue
			}
			explained := false
			for m := ds[j-1].Gen; m < ds[j].Gen && m < len(r.pendingAfter); m++ {
				explained = explained || r.pendingAfter[m][id]
			}
			if !explained {
				bad = append(bad, fmt.Sprintf("%s (runs %d then %d)", id, ds[j-1].Gen+1, ds[j].Gen+1))
			}
		}
	}
	if len(bad) > 0 {
		slices.Sort(bad)
		r.violate("%d redeliveries of events that were not pending after a cut, e.g. %s", len(bad), sample(bad))
	}
	return total, len(bad)
}

func (r *powerRun) cutSummary() string {
	var kept, dropped, torn, names, removed int
	for _, st := range r.cutStats {
		kept, dropped, torn, names, removed = kept+st.Kept, dropped+st.Dropped, torn+st.Torn, names+st.Names, removed+st.Removed
	}
	return fmt.Sprintf("the cuts dropped %d pending writes, kept %d (random prefixes), tore %d, undid names in %d directories and removed %d unnamed files",
		dropped, kept, torn, names, removed)
}

// checkVerdict says whether bbolt's check passed on every file inspected.
func (r *powerRun) checkVerdict() string {
	bad := 0
	for _, v := range r.violations {
		if strings.Contains(v, "bbolt check") {
			bad++
		}
	}
	if bad == 0 {
		return "passed"
	}
	return fmt.Sprintf("%d problems", bad)
}

// idsIn opens a closed database file read-only and returns the IDs of its
// events in state.
func idsIn(path string, state store.State) (map[string]bool, error) {
	st, err := store.Open(path, store.Options{ReadOnly: true})
	if err != nil {
		return nil, err
	}
	defer st.Close()
	ids := make(map[string]bool)
	for after := ""; ; {
		recs, next, err := st.List(store.ListQuery{State: state, After: after, Limit: 1000})
		if err != nil {
			return nil, err
		}
		for _, rec := range recs {
			ids[rec.ID] = true
		}
		if next == "" {
			return ids, nil
		}
		after = next
	}
}

// startBinary is start (harness_test.go) for a given binary.
func startBinary(t *testing.T, bin, db, addr string, args ...string) *sidecar {
	t.Helper()
	if bin == "" {
		return start(t, db, addr, args...)
	}
	saved := *outboxdFlag
	*outboxdFlag = bin
	defer func() { *outboxdFlag = saved }()
	return start(t, db, addr, args...)
}

// ---- deletes ----

// deleter deletes some of the events a loader got acknowledged, and keeps
// which deletes were acknowledged (204) and which were tried.
type deleter struct {
	addr string
	from *loader

	mu       sync.Mutex
	deleted  map[string]bool
	attempts map[string]bool
}

func (d *deleter) run(ctx context.Context) {
	client := &http.Client{Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		acked, _ := d.from.ledger()
		for id := range acked { // one at random (map order)
			d.mu.Lock()
			done := d.deleted[id] || d.attempts[id]
			if d.attempts == nil {
				d.attempts = make(map[string]bool)
			}
			d.attempts[id] = true
			d.mu.Unlock()
			if !done {
				d.delete(client, id)
			}
			break
		}
	}
}

func (d *deleter) delete(client *http.Client, id string) {
	req, err := http.NewRequest(http.MethodDelete, "http://"+d.addr+"/v1/events/"+id, nil)
	if err != nil {
		panic(err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return
	}
	resp.Body.Close()
	if resp.StatusCode == http.StatusNoContent {
		d.mu.Lock()
		d.deleted[id] = true
		d.mu.Unlock()
	}
}

// snapshot returns a copy of the acknowledged deletes.
func (d *deleter) snapshot() map[string]bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[string]bool, len(d.deleted))
	for id := range d.deleted {
		out[id] = true
	}
	return out
}

// tried reports whether a delete of id was sent.
func (d *deleter) tried(id string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.attempts[id]
}

// ---- the scenarios ----

// TestPowerLoss: outboxd under load (batches and single events, deliveries,
// deletes, dead letters) on powerfs, cut -cuts times. Nothing acknowledged
// is lost, no deleted event comes back, redeliveries are of events pending
// after a cut only, and the file passes bbolt's check after every cut.
func TestPowerLoss(t *testing.T) {
	r := newPowerRun(t, "")
	summary := r.run(*cutsFlag)
	report(t, "**Power loss, single instance** (`-cuts %d`): %s.", *cutsFlag, summary)
	for _, v := range r.violations {
		t.Errorf("VIOLATION: %s", v)
	}
}

// TestPowerLossCatchesNoSync proves that the power-loss verdict is not
// vacuous: the same scenario against an outboxd built with the faultnosync
// tag, whose stores never fsync, must report what the cuts undid, that is
// acknowledged events lost or acknowledged deletes undone (deleted events
// back). Which of the two a run shows depends on where its cuts land.
func TestPowerLossCatchesNoSync(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "outboxd-nosync")
	out, err := exec.Command("go", "build", "-tags", "faultnosync", "-o", bin, "github.com/outboxd/outbox/cmd/outboxd").CombinedOutput()
	if err != nil {
		t.Fatalf("building outboxd with the faultnosync tag: %v\n%s", err, out)
	}
	r := newPowerRun(t, bin)
	summary := r.run(3)
	t.Logf("verdict: %s", summary)
	for _, v := range r.violations {
		t.Logf("reported: %s", v)
	}
	undone := func(s string) bool {
		return strings.Contains(s, "acknowledged events lost") || strings.Contains(s, "came back")
	}
	i := slices.IndexFunc(r.violations, undone)
	if i < 0 {
		t.Fatalf("the power-loss scenario did not report what a store without fsync lost; violations: %q", r.violations)
	}
	report(t, "**Power loss against a store that never fsyncs** (outboxd built with `-tags faultnosync`, 3 cuts): the suite reported %s.", r.violations[i])
}

// jsonBody encodes v for a request body.
func jsonBody(v any) *bytes.Reader {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return bytes.NewReader(b)
}
