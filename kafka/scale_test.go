package kafka

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/outboxd/outbox/internal/testkit"
	"github.com/outboxd/outbox/outbox"
)

// Two engines in one consumer group share a 6-partition topic of 10,000
// records: every record is delivered, under the ID derived from its
// coordinates, and the group's committed offsets reach the end of every
// partition.
func TestScaleOutTwoEnginesOneGroup(t *testing.T) {
	const parts, n = 6, 10_000
	c := newCluster(t, kfakeSeed(parts, "in")...)
	brokers := c.ListenAddrs()
	all := newRecorder("all")
	var runners []*Runner
	var sinks []*recorder
	for i := range 2 {
		sink := newRecorder(fmt.Sprintf("engine%d", i))
		sink.shared = all
		o := openOutbox(t, dbPath(t, sink.name), sink, nil)
		cfg := testConfig(brokers, "in")
		cfg.BatchSize = 500
		runners = append(runners, startRunner(t, o, cfg))
		sinks = append(sinks, sink)
	}
	testkit.WaitFor(t, 20*time.Second, "both engines to hold 3 partitions", func() bool {
		return runners[0].in.assigned.Load() == 3 && runners[1].in.assigned.Load() == 3
	})

	newProducer(t, brokers, "in").produce(t, records(0, n, 100)...)
	cl := admin(t, brokers)
	ends := endOffsets(t, cl, "in", parts)
	want := expectedIDs("in", ends)
	if len(want) != n {
		t.Fatalf("topic holds %d records, want %d", len(want), n)
	}

	testkit.WaitFor(t, 60*time.Second, "every record delivered", func() bool { return all.distinct() == n })
	if err := sameStrings(keysOf(all.snapshot()), want); err != nil {
		t.Fatalf("delivered IDs are not the records' coordinates: %v", err)
	}
	for _, s := range sinks {
		if s.distinct() == 0 {
			t.Errorf("%s delivered nothing: the group did not share the work", s.name)
		}
	}
	// Payloads arrived verbatim under their IDs.
	all.mu.Lock()
	for id, body := range all.body {
		if !strings.HasPrefix(body, "v-") {
			t.Errorf("%s delivered %q", id, body)
		}
	}
	all.mu.Unlock()

	testkit.WaitFor(t, 10*time.Second, "offsets committed to the end", func() bool {
		got := committedOffsets(t, cl, "g", "in", parts)
		for p, end := range ends {
			if got[p] != end {
				return false
			}
		}
		return true
	})

	for _, r := range runners {
		closeRunner(t, r)
	}
	got := committedOffsets(t, cl, "g", "in", parts)
	for p, end := range ends {
		if got[p] != end {
			t.Errorf("partition %d: committed %d after close, end %d", p, got[p], end)
		}
	}
	t.Logf("deliveries: engine0 %d, engine1 %d IDs", sinks[0].distinct(), sinks[1].distinct())
}

// The child process of TestKillConsumerOtherTakesOver: an outbox on its own
// database file with a Kafka runner in the shared group, delivering over HTTP
// to the parent's receiver. It runs until it is killed.
const childEnv = "KAFKA_TEST_CHILD"

func childMain() int {
	brokers := strings.Split(os.Getenv("KAFKA_TEST_BROKERS"), ",")
	sink := &httpSink{url: os.Getenv("KAFKA_TEST_RECEIVER"), instance: "child"}
	o, err := outbox.Open(os.Getenv("KAFKA_TEST_DB"), outbox.Config{Sink: sink, Interval: 20 * time.Millisecond})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	if err := o.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	cfg := testConfig(brokers, "in")
	// Commit only when a generation ends, so that the test knows which
	// records the child committed when it is killed.
	cfg.CommitInterval = time.Hour
	r, err := Start(context.Background(), o, cfg, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	fmt.Println("child started")
	tick := time.NewTicker(10 * time.Millisecond)
	for !r.Ready() {
		<-tick.C
	}
	tick.Stop()
	fmt.Println("child ready")
	select {} // until SIGKILL
}

// httpSink delivers with a POST carrying the ID as Idempotency-Key, as a
// receiver that deduplicates expects.
type httpSink struct {
	url      string
	instance string
}

func (s *httpSink) Deliver(ctx context.Context, d *outbox.Delivery) outbox.Result {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url, bytes.NewReader(d.Payload))
	if err != nil {
		return outbox.Result{Action: outbox.ActionDead, Err: err}
	}
	req.Header.Set("Idempotency-Key", d.ID)
	req.Header.Set("X-Instance", s.instance)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return outbox.Result{Action: outbox.ActionRetry, Err: err}
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode/100 == 2 {
		return outbox.Result{Action: outbox.ActionSuccess, Status: resp.StatusCode}
	}
	return outbox.Result{Action: outbox.ActionRetry, Status: resp.StatusCode}
}

// receiver deduplicates deliveries by Idempotency-Key and remembers who
// delivered each ID how often.
type receiver struct{ *testkit.Receiver }

// byInstance returns, per ID, the deliveries per X-Instance.
func (rc receiver) byInstance() map[string]map[string]int {
	got := map[string]map[string]int{}
	for _, r := range rc.Requests() {
		if got[r.ID] == nil {
			got[r.ID] = map[string]int{}
		}
		got[r.ID][r.Header.Get("X-Instance")]++
	}
	return got
}

func (rc receiver) counts() (distinct int, byInstance map[string]int) {
	got := rc.byInstance()
	byInstance = map[string]int{}
	for _, m := range got {
		for inst, n := range m {
			byInstance[inst] += n
		}
	}
	return len(got), byInstance
}

// parseRecordID splits "kafka:<topic>:<partition>:<offset>".
func parseRecordID(t *testing.T, id string) (partition int, offset int64) {
	t.Helper()
	f := strings.Split(id, ":")
	if len(f) != 4 || f[0] != "kafka" {
		t.Fatalf("unexpected ID %q", id)
	}
	p, err1 := strconv.Atoi(f[2])
	o, err2 := strconv.ParseInt(f[3], 10, 64)
	if err1 != nil || err2 != nil {
		t.Fatalf("unexpected ID %q", id)
	}
	return p, o
}

// One consumer of the group is a child process killed with SIGKILL
// mid-stream: the other instance takes its partitions over from the committed
// offsets. A record the child had delivered and committed is never delivered
// again; records it had delivered but not committed are read again after the
// kill and delivered under the same ID, so the receiver recognises them as
// duplicates. The killed instance comes back on its database (as a restarted
// pod would) and delivers what it had stored, so every record is delivered
// at least once.
func TestKillConsumerOtherTakesOver(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	const parts = 6
	begin := time.Now()
	c := newCluster(t, kfakeSeed(parts, "in")...)
	brokers := c.ListenAddrs()
	rc := receiver{testkit.NewReceiver(t, "Idempotency-Key", nil)}
	cl := admin(t, brokers)
	p := newProducer(t, brokers, "in")

	parentSink := &httpSink{url: rc.URL, instance: "parent"}
	o := openOutbox(t, dbPath(t, "parent"), parentSink, nil)
	parent := startRunner(t, o, testConfig(brokers, "in"))
	testkit.WaitFor(t, 20*time.Second, "the parent to hold every partition", func() bool { return parent.in.assigned.Load() == parts })

	childDB := dbPath(t, "child")
	startChild := func() *testkit.Process {
		child, lines := testkit.StartLines(t, testkit.TestBinary(childEnv+"=1",
			"KAFKA_TEST_BROKERS="+strings.Join(brokers, ","),
			"KAFKA_TEST_RECEIVER="+rc.URL,
			"KAFKA_TEST_DB="+childDB))
		for line := range lines {
			if line == "child ready" {
				break
			}
		}
		return child
	}
	child := startChild()
	testkit.WaitFor(t, 20*time.Second, "the group to split the partitions", func() bool { return parent.in.assigned.Load() == parts/2 })
	complement := func(ps []int) map[int]bool {
		out := map[int]bool{}
		for part := range parts {
			out[part] = true
		}
		for _, part := range ps {
			delete(out, part)
		}
		return out
	}
	childPartsA := complement(parent.Assigned())
	childDelivered := func() int {
		_, by := rc.counts()
		return by["child"]
	}

	// Phase A: the child consumes and delivers its share; a rebalance (the
	// parent's runner leaves and comes back) makes it commit.
	p.produce(t, records(0, 600, 50)...)
	testkit.WaitFor(t, 30*time.Second, "the child to deliver phase A", func() bool { return childDelivered() >= 100 })
	closeRunner(t, parent)
	parent = startRunner(t, o, testConfig(brokers, "in"))
	testkit.WaitFor(t, 20*time.Second, "the group to split again", func() bool { return parent.in.assigned.Load() == parts/2 })
	atRebalance := committedOffsets(t, cl, "g", "in", parts)

	// Phase B: the stream goes on while the child is killed once it has
	// delivered records it did not commit.
	streamed := make(chan struct{})
	go func() {
		defer close(streamed)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for i := 600; i < 2000; i += 100 {
			<-tick.C
			if err := p.write(records(i, 100, 50)...); err != nil {
				t.Errorf("produce: %v", err)
				return
			}
		}
	}()
	testkit.WaitFor(t, 30*time.Second, "the child to deliver past its commit", func() bool {
		for id, m := range rc.byInstance() {
			if part, off := parseRecordID(t, id); m["child"] > 0 && off >= atRebalance[part] {
				return true
			}
		}
		return false
	})

	if err := child.Kill(); err != nil {
		t.Fatal(err)
	}
	atKill := committedOffsets(t, cl, "g", "in", parts)
	childParts := complement(parent.Assigned())
	for part := range childParts {
		if off := atKill[part]; off != atRebalance[part] {
			t.Fatalf("partition %d: committed %d at the kill, %d after the rebalance: the child committed in between", part, off, atRebalance[part])
		}
	}
	// What the child delivered and committed in phase A must not come
	// again; what it delivered on its partitions above their committed
	// offset at the kill must.
	committed, redo := map[string]bool{}, map[string]bool{}
	parentBefore := map[string]int{}
	for id, m := range rc.byInstance() {
		parentBefore[id] = m["parent"]
		if m["child"] == 0 {
			continue
		}
		part, off := parseRecordID(t, id)
		if childPartsA[part] && off < atRebalance[part] {
			committed[id] = true
		}
		if childParts[part] && off >= atKill[part] {
			redo[id] = true
		}
	}
	t.Logf("%s: killed the child after %d deliveries: %d of its records committed, %d not", time.Since(begin).Round(time.Millisecond),
		childDelivered(), len(committed), len(redo))

	<-streamed
	testkit.WaitFor(t, 20*time.Second, "the parent to take every partition over", func() bool { return parent.in.assigned.Load() == parts })
	ends := endOffsets(t, cl, "in", parts)
	want := expectedIDs("in", ends)
	last := time.Now()
	testkit.WaitFor(t, 30*time.Second, "the parent to consume to the end", func() bool {
		got := committedOffsets(t, cl, "g", "in", parts)
		if os.Getenv("KAFKA_TEST_LOG") != "" && time.Since(last) > 500*time.Millisecond {
			last = time.Now()
			t.Logf("committed %v, ends %v, parent %+v", got, ends, o.Stats())
		}
		for p, end := range ends {
			if got[p] != end {
				return false
			}
		}
		return true
	})

	t.Logf("%s: the parent consumed to the end", time.Since(begin).Round(time.Millisecond))
	startChild()
	testkit.WaitFor(t, 60*time.Second, "every record delivered", func() bool {
		d, _ := rc.counts()
		return d == len(want)
	})

	t.Logf("%s: every record delivered", time.Since(begin).Round(time.Millisecond))

	byID := rc.byInstance()
	got := make([]string, 0, len(byID))
	for id := range byID {
		got = append(got, id)
	}
	if err := sameStrings(sortStrings(got), want); err != nil {
		t.Fatalf("delivered IDs: %v", err)
	}
	for id := range committed {
		if n := byID[id]["parent"] - parentBefore[id]; n > 0 {
			t.Errorf("%s was delivered and committed by the child, then delivered again by the parent", id)
		}
	}
	for id := range redo {
		if byID[id]["parent"] == parentBefore[id] {
			t.Errorf("%s was delivered by the child without being committed, and the parent did not read it again", id)
		}
	}
	if len(committed) == 0 || len(redo) == 0 {
		t.Errorf("the kill found %d committed and %d uncommitted child deliveries; want some of each", len(committed), len(redo))
	}
	t.Logf("%d records delivered; %d re-consumed after the kill and delivered again under the same ID (duplicates to the receiver)",
		len(want), len(redo))
}
