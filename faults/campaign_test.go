//go:build fault && linux

package faults

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/outboxd/outbox/internal/powerfs"
	"github.com/outboxd/outbox/internal/testkit"
)

var (
	seedFlag   = flag.Uint64("seed", 0, "seed of the campaign's schedule and of the power cuts' moments and options (0: a random seed, printed first)")
	faultsFlag = flag.Int("faults", 60, "faults in the seeded campaign")
)

// The seeded campaign: one seed draws a schedule of steps, each a fault
// from faultKinds held for a drawn time while a drawn workload from
// opKinds runs against a single outboxd whose database lives on
// internal/powerfs; the same seed draws the same schedule (a power cut's
// options included), and its hash is printed with the seed before
// anything runs.

// faultKind is one kind of fault the campaign draws. inject starts it;
// heal, after the step's hold, ends it (nil: nothing to end). Adding a
// kind is one row here.
type faultKind struct {
	name   string
	weight int
	inject func(c *campaign)
	heal   func(c *campaign)
}

var faultKinds = []faultKind{
	{"sigkill", 3, (*campaign).kill, (*campaign).restart},
	{powerCut, 2, (*campaign).cutPower, (*campaign).restart},
	{"receiver-2xx", 2, answering(answerOK), nil},
	{"receiver-404", 2, answering(answerNotYet), healReceiver},
	{"receiver-410", 1, answering(answerGone), healGone},
	{"receiver-429", 2, answering(answerThrottle), healReceiver},
	{"receiver-5xx", 2, answering(answerFail), healReceiver},
	{"receiver-422", 1, deadUnkeyed, healReceiver},
	{"receiver-hang", 1, answering(answerHang), healReceiver},
	{"receiver-reset", 2, answering(answerReset), healReceiver},
	{"net-latency", 2, linkFault(testkit.Faults{Latency: 200 * time.Millisecond}), healLinks},
	{"net-bandwidth", 1, linkFault(testkit.Faults{Bandwidth: 16 << 10}), healLinks},
	{"net-blackhole", 2, func(c *campaign) { c.toRcv.Set(testkit.Faults{BlackHole: true}) }, healLinks},
	{"net-reset", 2, func(c *campaign) { c.toRcv.Reset(); c.toAPI.Reset() }, nil},
}

// opKind is one kind of workload operation; n is drawn per operation.
type opKind struct {
	name   string
	weight int
	run    func(c *campaign, n int)
}

var opKinds = []opKind{
	{"enqueue", 3, (*campaign).enqueueSingles},
	{"batch", 3, (*campaign).enqueueBatch},
	{"ordered", 3, (*campaign).enqueueOrdered},
	{"managed", 2, (*campaign).enqueueManaged},
	{"delete", 1, (*campaign).deleteOne},
	{"replay", 1, (*campaign).replayDead},
	{"endpoint-change", 1, (*campaign).moveManaged},
}

// powerCut is the fault kind that SIGKILLs outboxd and cuts the power.
const powerCut = "power-cut"

// step is one fault of the schedule and the workload run while it holds.
type step struct {
	Fault string
	Hold  time.Duration
	Ops   []op
	Cut   cutPlan // a power cut's options; zero for the other kinds
}

// cutPlan is what a power cut keeps of the writes outboxd had not synced
// (powerfs.CutOptions), drawn with the schedule: Seed seeds the prefix
// lengths and tear points.
type cutPlan struct {
	KeepPrefix, Tear bool
	Seed             uint64
}

type op struct {
	Kind string
	N    int
}

// newSchedule draws n steps from seed.
func newSchedule(seed uint64, n int) []step {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	steps := make([]step, n)
	for i := range steps {
		f := draw(rng, faultKinds, func(k faultKind) int { return k.weight })
		s := step{Fault: f.name, Hold: time.Duration(100+rng.IntN(500)) * time.Millisecond}
		if f.name == powerCut {
			s.Cut = cutPlan{KeepPrefix: rng.IntN(2) == 0, Tear: rng.IntN(2) == 0, Seed: rng.Uint64()}
		}
		for range 1 + rng.IntN(3) {
			o := draw(rng, opKinds, func(k opKind) int { return k.weight })
			s.Ops = append(s.Ops, op{Kind: o.name, N: 1 + rng.IntN(40)})
		}
		steps[i] = s
	}
	return steps
}

// draw picks one of kinds with probability proportional to its weight.
func draw[K any](rng *rand.Rand, kinds []K, weight func(K) int) K {
	total := 0
	for _, k := range kinds {
		total += weight(k)
	}
	x := rng.IntN(total)
	for _, k := range kinds {
		if x -= weight(k); x < 0 {
			return k
		}
	}
	panic("unreachable")
}

// scheduleHash is the SHA-256 of the schedule's text, shortened.
func scheduleHash(steps []step) string {
	h := sha256.New()
	for i, s := range steps {
		fmt.Fprintf(h, "%d %s %s %v %+v\n", i, s.Fault, s.Hold, s.Ops, s.Cut)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// TestCampaignScheduleReplays: the schedule, a power cut's options
// included, is a function of the seed alone, so a seed printed by a
// failing run replays its schedule.
func TestCampaignScheduleReplays(t *testing.T) {
	a, b := newSchedule(42, 1000), newSchedule(42, 1000)
	if scheduleHash(a) != scheduleHash(b) {
		t.Fatal("two schedules drawn from seed 42 differ")
	}
	if scheduleHash(a) == scheduleHash(newSchedule(43, 1000)) {
		t.Fatal("seeds 42 and 43 draw the same schedule")
	}
	kinds := map[string]bool{}
	for _, s := range a {
		kinds[s.Fault] = true
	}
	if len(kinds) != len(faultKinds) {
		t.Fatalf("1000 steps drew %d of the %d fault kinds", len(kinds), len(faultKinds))
	}
	// A power cut's options are part of the schedule: the hash covers them.
	i := slices.IndexFunc(b, func(s step) bool { return s.Fault == powerCut })
	b[i].Cut.Tear = !b[i].Cut.Tear
	if scheduleHash(a) == scheduleHash(b) {
		t.Fatal("the schedule's hash does not cover a power cut's options")
	}
}

// TestCampaign runs the schedule of -seed (a random one by default) with
// -faults steps and checks the history at the end.
func TestCampaign(t *testing.T) {
	seed := *seedFlag
	if seed == 0 {
		seed = rand.Uint64()
	}
	steps := newSchedule(seed, *faultsFlag)
	hash := scheduleHash(steps)
	fmt.Printf("campaign: -seed %d -faults %d: schedule %s\n", seed, len(steps), hash)
	t.Logf("campaign: -seed %d -faults %d: schedule %s", seed, len(steps), hash)

	c := newCampaign(t, faultKinds)
	began := time.Now()
	for i, s := range steps {
		if c.run(i, s); c.stalled {
			break // the verdict below says what is stuck
		}
		if (i+1)%100 == 0 {
			t.Logf("campaign: %d of %d faults after %.0fs, %d acknowledged", i+1, len(steps), time.Since(began).Seconds(), len(c.acked))
		}
	}
	c.drain()
	c.check()
	for _, v := range c.violations {
		t.Errorf("VIOLATION (replay with -seed %d -faults %d): %s", seed, len(steps), v)
	}
	report(t, "**Seeded campaign** (`-seed %d -faults %d`, schedule %s, %.0fs): %s.",
		seed, len(steps), hash, time.Since(began).Seconds(), c.summary())
}

// campaign is the system under the schedule and the ledger of what the
// client was told.
type campaign struct {
	t            *testing.T
	fs           *powerfs.FS
	db, addr     string
	rcv          *receiver
	toRcv, toAPI *testkit.Link
	s            *sidecar
	kinds        []faultKind
	client       *http.Client
	runs         int
	seq          int
	managedAt    int              // which receiver path the managed endpoint delivers to
	cut          cutPlan          // the current step's
	cutStats     powerfs.CutStats // summed over the power cuts

	acked    map[string]bool
	unknown  map[string]bool
	deleted  map[string]bool
	order    []string            // acknowledged IDs, in order
	keyed    map[string][]string // key -> acknowledged IDs in enqueue order
	faults   map[string]int
	recovery map[string]time.Duration // worst per fault kind
	stalled  bool                     // deliveries did not resume after a heal

	violations []string
}

func newCampaign(t *testing.T, kinds []faultKind) *campaign {
	fs := powerfs.MountTest(t)
	c := &campaign{t: t, fs: fs, db: fs.Path("outboxd.db"), addr: testkit.FreeAddr(t), rcv: newReceiver(t), kinds: kinds,
		client: &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{}},
		acked:  map[string]bool{}, unknown: map[string]bool{}, deleted: map[string]bool{},
		keyed: map[string][]string{}, faults: map[string]int{}, recovery: map[string]time.Duration{},
		managedAt: 9000}
	c.toRcv = testkit.NewLink(t, strings.TrimPrefix(c.rcv.base, "http://"))
	c.toAPI = testkit.NewLink(t, c.addr)
	t.Cleanup(c.client.CloseIdleConnections)
	c.restart()
	if code, body := c.call(http.MethodPost, "/v1/endpoints/m", c.managedBody()); code != http.StatusCreated {
		t.Fatalf("creating the managed endpoint: %d %s", code, body)
	}
	return c
}

func (c *campaign) managedBody() string {
	return fmt.Sprintf(`{"url":"http://%s/gen/%d","timeout":"1s"}`, c.toRcv.Addr(), c.managedAt)
}

// ---- faults ----

func (c *campaign) kill() {
	c.s.kill()
	c.checkFile(fmt.Sprintf("after kill %d", c.runs))
}

// cutPower kills outboxd and cuts the power with the step's options: the
// file keeps what outboxd synced and, with KeepPrefix or Tear, a drawn
// part of what it had not. Nothing acknowledged was unsynced, so the
// ledger holds a power cut to the same account as a SIGKILL.
func (c *campaign) cutPower() {
	c.s.kill()
	st, err := c.fs.Cut(powerfs.CutOptions{Rand: rand.New(rand.NewPCG(c.cut.Seed, c.cut.Seed>>7)),
		KeepPrefix: c.cut.KeepPrefix, Tear: c.cut.Tear})
	if err != nil {
		c.t.Fatalf("power cut after run %d: %v", c.runs, err)
	}
	c.cutStats.Kept += st.Kept
	c.cutStats.Dropped += st.Dropped
	c.cutStats.Torn += st.Torn
	c.checkFile(fmt.Sprintf("after power cut (run %d)", c.runs))
}

// checkFile runs bbolt's check on a copy of the database file taken out
// of the mount: a process must not map files of a FUSE mount it serves.
func (c *campaign) checkFile(when string) {
	cp := filepath.Join(c.t.TempDir(), "copy.db")
	if err := copyFile(cp, c.db); err != nil {
		c.violate("%s: copying the database file: %v", when, err)
		return
	}
	defer os.Remove(cp)
	for _, p := range checkDB(cp) {
		c.violate("%s: bbolt check: %s", when, p)
	}
}

func (c *campaign) restart() {
	c.runs++
	c.s = start(c.t, c.db, c.addr, "--endpoint", "recv=http://"+c.toRcv.Addr()+"/gen/0,timeout=1s",
		"--allow-private-networks", "--ordered", "--interval", "50ms", "--park-interval", "300ms",
		"--backoff-initial", "50ms", "--backoff-max", "500ms", "--max-retry-after", "1s",
		"--max-attempts", "100000", "--max-age", "1h", "--concurrency", "16",
		"--breaker-cool-down", "200ms", "--breaker-max-cool-down", "1s")
}

func answering(a answer) func(*campaign) {
	return func(c *campaign) { c.rcv.set(func(string) answer { return a }) }
}

// deadUnkeyed dead-letters unkeyed events and makes keyed ones retry: a
// replayed dead letter is delivered after the later events of its key,
// which the order check would take for a broken order.
func deadUnkeyed(c *campaign) {
	c.rcv.set(func(id string) answer {
		if strings.HasPrefix(id, keyedPrefix) {
			return answerUnavailable
		}
		return answerDead
	})
}

func healReceiver(c *campaign) { c.rcv.set(func(string) answer { return answerOK }) }

// healGone answers 200 again and enables the endpoints a 410 disabled, as
// an operator would.
func healGone(c *campaign) {
	healReceiver(c)
	for _, name := range []string{"recv", "m"} {
		if code, body := c.call(http.MethodPost, "/v1/endpoints/"+name+"/enable", ""); code != http.StatusOK {
			c.violate("enabling %s after a 410: %d %s", name, code, body)
		}
	}
}

func linkFault(f testkit.Faults) func(*campaign) {
	return func(c *campaign) { c.toRcv.Set(f); c.toAPI.Set(f) }
}

func healLinks(c *campaign) { c.toRcv.Heal(); c.toAPI.Heal() }

// run applies step i: the fault, the workload, the rest of the hold, the
// heal, and then measures how long deliveries take to resume.
func (c *campaign) run(i int, s step) {
	k := c.kinds[slices.IndexFunc(c.kinds, func(k faultKind) bool { return k.name == s.Fault })]
	c.faults[k.name]++
	end := time.Now().Add(s.Hold)
	c.cut = s.Cut
	k.inject(c)
	for _, o := range s.Ops {
		opKinds[slices.IndexFunc(opKinds, func(k opKind) bool { return k.name == o.Kind })].run(c, o.N)
	}
	if d := time.Until(end); d > 0 {
		hold(d)
	}
	if k.heal != nil {
		k.heal(c)
	}
	c.measureRecovery(i, k.name)
}

// measureRecovery waits, when events are pending, for the next 200 (or
// for nothing to be pending) and keeps the worst wait per fault kind.
func (c *campaign) measureRecovery(i int, kind string) {
	st, err := c.s.stats()
	if err != nil || st.Pending == 0 {
		return
	}
	began, before := time.Now(), c.rcv.okCount()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// Resumed: a new 200, or nothing pending any more (the last ones were
	// answered before the heal, their outcomes committed after it).
	resumed := func() (bool, error) {
		if c.rcv.okCount() > before {
			return true, nil
		}
		st, err := c.s.stats()
		return err == nil && st.Pending == 0, nil
	}
	if err := testkit.Poll(ctx, 5*time.Millisecond, resumed); err != nil {
		_, evs := c.call(http.MethodGet, "/v1/events?state=pending&limit=3", "")
		_, eps := c.call(http.MethodGet, "/v1/stats", "")
		c.violate("step %d (%s): no delivery within 60s of the heal with %d events pending: %s; stats: %s", i, kind, st.Pending, evs, eps)
		c.stalled = true
		return
	}
	c.recovery[kind] = max(c.recovery[kind], time.Since(began))
}

// TestCampaignCatchesInjectedLoss proves that the campaign's verdict is not
// vacuous: two fault kinds of the test's own play a disk that lied about
// fsync, one keeping a copy of the file at a kill and one putting that
// copy back at a later kill. The events acknowledged in between, kept
// pending by a receiver answering 5xx, are gone; the campaign must report
// them lost.
func TestCampaignCatchesInjectedLoss(t *testing.T) {
	snap := filepath.Join(t.TempDir(), "snapshot.db")
	kinds := append(slices.Clone(faultKinds),
		faultKind{"kill-and-copy", 0, func(c *campaign) {
			c.kill()
			if err := copyFile(snap, c.db); err != nil {
				t.Fatal(err)
			}
		}, (*campaign).restart},
		faultKind{"kill-and-roll-back", 0, func(c *campaign) {
			c.kill()
			if err := copyFile(c.db, snap); err != nil {
				t.Fatal(err)
			}
		}, (*campaign).restart})
	c := newCampaign(t, kinds)
	fail := step{Fault: "receiver-5xx", Hold: 200 * time.Millisecond, Ops: []op{{"batch", 40}, {"ordered", 20}}}
	for i, s := range []step{{Fault: "kill-and-copy", Hold: 100 * time.Millisecond}, fail, fail, fail,
		{Fault: "kill-and-roll-back", Hold: 100 * time.Millisecond}} {
		c.run(i, s)
	}
	c.drain()
	c.check()
	if !slices.ContainsFunc(c.violations, func(v string) bool { return strings.Contains(v, "acknowledged events lost") }) {
		t.Fatalf("the campaign did not report the events lost by rolling the file back; violations: %q", c.violations)
	}
	report(t, "**Campaign, injected loss** (the file rolled back to an earlier kill's copy): the campaign reported: %s.", c.violations[0])
}

// ---- the workload ----

// call sends one API request through the API's Link; code 0 is no answer.
func (c *campaign) call(method, path, body string) (int, []byte) {
	req, err := http.NewRequest(method, "http://"+c.toAPI.Addr()+path, strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.client.Do(req)
	if err != nil {
		return 0, []byte(err.Error())
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, b
}

// keyedPrefix starts the IDs of the events that carry a key.
const keyedPrefix = "k-"

// event is the JSON of one event whose payload names its ID.
func (c *campaign) event(dest, key string) (string, string) {
	c.seq++
	id, k := fmt.Sprintf("c-%07d", c.seq), ""
	if key != "" {
		id, k = fmt.Sprintf("%s%07d", keyedPrefix, c.seq), fmt.Sprintf(`"key":%q,`, key)
	}
	return id, fmt.Sprintf(`{"id":%q,%s"destination":%q,"payload":{"id":%q}}`, id, k, dest, id)
}

// enqueue posts events (one object, or an array) and records the answer.
func (c *campaign) enqueue(ids []string, keys []string, body string) {
	code, b := c.call(http.MethodPost, "/v1/events", body)
	var out struct{ IDs []string }
	if code != http.StatusAccepted || json.Unmarshal(b, &out) != nil || !slices.Equal(out.IDs, ids) {
		for _, id := range ids {
			c.unknown[id] = true
		}
		return
	}
	for i, id := range ids {
		c.acked[id] = true
		c.order = append(c.order, id)
		if keys[i] != "" {
			c.keyed[keys[i]] = append(c.keyed[keys[i]], id)
		}
	}
}

func (c *campaign) enqueueSingles(n int) {
	for range min(n, 5) {
		id, ev := c.event("recv", "")
		c.enqueue([]string{id}, []string{""}, ev)
	}
}

func (c *campaign) enqueueBatch(n int)   { c.batch(n, "recv", false) }
func (c *campaign) enqueueOrdered(n int) { c.batch(n, "recv", true) }
func (c *campaign) enqueueManaged(n int) { c.batch(n, "m", false) }

// batch posts n events in one request; ordered ones carry one of eight
// keys.
func (c *campaign) batch(n int, dest string, ordered bool) {
	ids, keys, evs := make([]string, n), make([]string, n), make([]string, n)
	for i := range n {
		if ordered {
			keys[i] = fmt.Sprintf("key-%d", (c.seq+i)%8)
		}
		ids[i], evs[i] = c.event(dest, keys[i])
	}
	c.enqueue(ids, keys, "["+strings.Join(evs, ",")+"]")
}

// deleteOne deletes an acknowledged unkeyed event, chosen by n, if it is
// still there (204); a deleted event is no longer owed and must not come
// back.
func (c *campaign) deleteOne(n int) {
	if len(c.order) == 0 {
		return
	}
	id := c.order[(len(c.order)-1)*n/40]
	if c.deleted[id] || strings.HasPrefix(id, keyedPrefix) {
		return
	}
	if code, _ := c.call(http.MethodDelete, "/v1/events/"+id, ""); code == http.StatusNoContent {
		c.deleted[id] = true
	}
}

func (c *campaign) replayDead(int) { c.call(http.MethodPost, "/v1/dead/replay", "{}") }

// moveManaged points the managed endpoint at the receiver's other path.
func (c *campaign) moveManaged(int) {
	c.managedAt = 9000 + (c.managedAt+1)%2
	c.call(http.MethodPut, "/v1/endpoints/m", c.managedBody())
}

// ---- the verdict ----

func (c *campaign) violate(format string, args ...any) {
	if len(c.violations) < 100 {
		c.violations = append(c.violations, fmt.Sprintf(format, args...))
	}
}

// drain heals everything, replays the dead letters and waits until
// nothing is pending or dead.
func (c *campaign) drain() {
	healLinks(c)
	healGone(c)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var last stats
	err := testkit.Poll(ctx, 100*time.Millisecond, func() (bool, error) {
		st, err := c.s.stats()
		if err != nil {
			return false, nil
		}
		if last = st; st.Dead > 0 {
			c.replayDead(0)
		}
		return st.Pending == 0 && st.Dead == 0 && st.InFlight == 0, nil
	})
	if err != nil {
		c.violate("drain did not finish: %v (last stats %+v)", err, last)
	}
}

// check holds the history against the invariants.
func (c *campaign) check() {
	got := c.rcv.delivered()
	var lost []string
	for id := range c.acked {
		if !c.deleted[id] && len(got[id]) == 0 {
			lost = append(lost, id)
		}
	}
	slices.Sort(lost)
	if len(lost) > 0 {
		c.violate("%d acknowledged events lost, e.g. %s", len(lost), sample(lost))
	}
	for id := range c.deleted {
		if code, b := c.call(http.MethodGet, "/v1/events/"+id, ""); code == http.StatusOK && (bytes.Contains(b, []byte(`"pending"`)) || bytes.Contains(b, []byte(`"dead"`))) {
			c.violate("deleted event %s is back: %s", id, b)
		}
	}
	for key, ids := range c.keyed {
		for i := 1; i < len(ids); i++ {
			a, b := got[ids[i-1]], got[ids[i]]
			if len(a) > 0 && len(b) > 0 && b[0].At.Before(a[0].At) {
				c.violate("key %s: %s delivered before %s, enqueued earlier", key, ids[i], ids[i-1])
			}
		}
	}
	for id := range got {
		if !c.acked[id] && !c.unknown[id] {
			c.violate("event %s delivered but never enqueued", id)
		}
	}
	c.rcv.mu.Lock()
	for _, v := range c.rcv.violations {
		c.violate("%s", v)
	}
	c.rcv.mu.Unlock()
	c.s.stop()
	c.checkFile("after the final stop")
}

func (c *campaign) summary() string {
	got := c.rcv.delivered()
	redelivered := 0
	for _, ds := range got {
		redelivered += len(ds) - 1
	}
	var kinds []string
	for _, k := range c.kinds {
		if n := c.faults[k.name]; n > 0 {
			kinds = append(kinds, fmt.Sprintf("%s %d (worst recovery %s)", k.name, n, c.recovery[k.name].Round(time.Millisecond)))
		}
	}
	return fmt.Sprintf("%d acknowledged, %d with unknown fate, %d deleted, %d delivered, %d redeliveries, %d violations; faults: %s; the power cuts dropped %d unsynced writes, kept %d (random prefixes) and tore %d; receiver answers: %s",
		len(c.acked), len(c.unknown), len(c.deleted), len(got), redelivered, len(c.violations), strings.Join(kinds, ", "),
		c.cutStats.Dropped, c.cutStats.Kept, c.cutStats.Torn, c.rcv.answerCounts())
}
