package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	"go.uber.org/goleak"

	"github.com/outboxd/outbox/examples/internal/runexample"
	"github.com/outboxd/outbox/internal/testkit"
	"github.com/outboxd/outbox/kafka"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.Cleanup(func(int) { testkit.RemoveBinaries() }))
}

// newReceiver is the endpoints' receiver: every tenth record is "not there
// yet" once (parked, then delivered); the rest is accepted.
func newReceiver(t *testing.T) *testkit.Receiver {
	return testkit.NewReceiver(t, "webhook-id", func(r *http.Request, _ string, n int) testkit.Reply {
		body, _ := io.ReadAll(r.Body)
		if strings.HasSuffix(string(body), "0") && n == 0 {
			return testkit.Reply{Status: http.StatusNotFound}
		}
		return testkit.Reply{Status: http.StatusOK}
	})
}

// accepted returns, per event ID, "endpoint payload" of the last delivery
// the receiver accepted, and how many it accepted again (redeliveries).
func accepted(rc *testkit.Receiver) (got map[string]string, dups int) {
	got = map[string]string{}
	for _, r := range rc.Requests() {
		if r.Status != http.StatusOK {
			continue
		}
		if _, ok := got[r.ID]; ok {
			dups++
		}
		got[r.ID] = strings.TrimPrefix(r.Path, "/") + " " + string(r.Body)
	}
	return got, dups
}

func TestRelayDeliversEveryRecord(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := testkit.BuildBinary(t, ".")
	// A broker that wants SCRAM-SHA-256, as production ones do.
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(4, "orders"),
		kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-256", "relay", "relay-password"))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	brokers := cluster.ListenAddrs()
	recv := newReceiver(t)

	// Records published before the relay first starts are not skipped.
	const n = 300
	auth := kgo.SASL(scram.Auth{User: "relay", Pass: "relay-password"}.AsSha256Mechanism())
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), auth, kgo.DefaultProduceTopic("orders"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	produce := func(from, to int) {
		t.Helper()
		var recs []*kgo.Record
		for i := from; i < to; i++ {
			r := &kgo.Record{Key: fmt.Appendf(nil, "k%d", i%17), Value: fmt.Appendf(nil, "record-%d", i)}
			if i%3 == 0 { // the others go to --destination
				r.Headers = []kgo.RecordHeader{{Key: kafka.DefaultDestinationHeader, Value: []byte("audit")}}
			}
			recs = append(recs, r)
		}
		if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	produce(0, n/2)

	p := runexample.Start(t, bin, []string{"TEST_SASL_PASSWORD=relay-password"},
		"--brokers", strings.Join(brokers, ","), "--topic", "orders", "--group", "relay-test",
		"--sasl", "scram-sha-256", "--sasl-user", "relay", "--sasl-password-env", "TEST_SASL_PASSWORD",
		"--endpoint", "main="+recv.URL+"/main", "--endpoint", "audit="+recv.URL+"/audit", "--destination", "main",
		"--allow-private", "--dir", filepath.Join(t.TempDir(), "partitions"),
		"--interval", "50ms", "--park-interval", "100ms", "--backoff", "50ms")
	produce(n/2, n)

	testkit.WaitFor(t, 60*time.Second, "every record delivered", func() bool { got, _ := accepted(recv); return len(got) == n })

	// The group's changelog topic (named after the group and the topic by
	// default) ends with a tombstone (a delete) for every record.
	deleted := map[string]bool{}
	cc, err := kgo.NewClient(kgo.SeedBrokers(brokers...), auth, kgo.ConsumeTopics("relay-test-orders-changelog"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for len(deleted) < n {
		fetches := cc.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("changelog: %d deletes of %d records shipped", len(deleted), n)
		}
		fetches.EachRecord(func(r *kgo.Record) {
			for _, h := range r.Headers {
				if h.Key == kafka.HeaderOp && string(h.Value) == "delete" && r.Value == nil {
					deleted[string(r.Key)] = true
				}
			}
		})
	}

	p.Interrupt(t)
	if !strings.Contains(p.Output(), "stopped cleanly") {
		t.Fatalf("no clean stop in the output:\n%s", p.Output())
	}

	all, dups := accepted(recv)
	seen := map[string]bool{}
	for id, got := range all {
		if !deleted[id] {
			t.Errorf("%s delivered but its delete is not in the changelog topic", id)
		}
		ep, payload, _ := strings.Cut(got, " ")
		var i int
		if _, err := fmt.Sscanf(payload, "record-%d", &i); err != nil {
			t.Fatalf("%s: unexpected payload %q", id, payload)
		}
		if want := map[bool]string{true: "audit", false: "main"}[i%3 == 0]; ep != want {
			t.Errorf("record %d went to %s, want %s", i, ep, want)
		}
		seen[payload] = true
	}
	if len(seen) != n {
		t.Errorf("%d distinct records delivered, want %d", len(seen), n)
	}
	if dups > 0 {
		t.Logf("%d redeliveries (at-least-once; none expected in a clean run)", dups)
	}
}

// lastAssignment returns the partitions a relay's output says it was
// assigned last, with their generation (0 when none yet), and the output
// from that line on.
func lastAssignment(out string) (gen int, parts []int, since string) {
	locs := assignedLine.FindAllStringSubmatchIndex(out, -1)
	if len(locs) == 0 {
		return 0, nil, ""
	}
	loc := locs[len(locs)-1]
	gen, _ = strconv.Atoi(out[loc[2]:loc[3]])
	for f := range strings.FieldsSeq(out[loc[4]:loc[5]]) {
		p, _ := strconv.Atoi(f)
		parts = append(parts, p)
	}
	return gen, parts, out[loc[0]:]
}

var (
	assignedLine = regexp.MustCompile(`⇄ generation (\d+) of group \S+: partitions \[([\d ]*)\] assigned`)
	restoredLine = regexp.MustCompile(`⟲ partition (\d+) restored: mode (\w+), (\d+) records`)
)

// A relay lost with its disk (SIGKILL, its directory deleted) while its
// events are pending: the other relay of the group takes its partitions
// over, rebuilds their stores from the changelog topic and delivers every
// record, each once.
func TestLostRelaysPartitionsAreTakenOver(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := testkit.BuildBinary(t, ".")
	const parts, n = 4, 200
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(parts, "orders"),
		kfake.GroupMinSessionTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	brokers := cluster.ListenAddrs()
	// The receiver is down (503) until the takeover is done.
	var up atomic.Bool
	recv := testkit.NewReceiver(t, "webhook-id", func(*http.Request, string, int) testkit.Reply {
		if !up.Load() {
			return testkit.Reply{Status: http.StatusServiceUnavailable}
		}
		return testkit.Reply{Status: http.StatusOK}
	})
	relay := func(dir string) *runexample.Proc {
		return runexample.Start(t, bin, nil, "--brokers", strings.Join(brokers, ","), "--topic", "orders", "--group", "takeover",
			"--endpoint", "main="+recv.URL+"/main", "--destination", "main", "--allow-private", "--dir", dir,
			"--session-timeout", "3s", "--interval", "50ms", "--backoff", "200ms")
	}
	// a owns every partition before b joins, so that the partitions a has
	// when it is lost are partitions b never had.
	dirA, dirB := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
	a := relay(dirA)
	testkit.WaitFor(t, 60*time.Second, "a owning every partition", func() bool {
		_, pa, since := lastAssignment(a.Output())
		return len(pa) == parts && len(restoredLine.FindAllString(since, -1)) == parts
	})
	b := relay(dirB)

	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic("orders"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var recs []*kgo.Record
	for i := range n {
		recs = append(recs, &kgo.Record{Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "record-%d", i)})
	}
	produced := map[int]int{} // partition -> records
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		produced[int(r.Partition)]++
	}

	// The relays share the partitions, and every record is in the changelog
	// topic (an enqueue record in the partition of its input partition).
	cc, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics("takeover-orders-changelog"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	shipped := map[int]map[string]bool{} // changelog partition -> IDs enqueued
	var aParts []int
	testkit.WaitFor(t, 60*time.Second, "two relays sharing the partitions, every record shipped", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		cc.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			for _, h := range r.Headers {
				if h.Key == kafka.HeaderOp && string(h.Value) == "enqueue" {
					if shipped[int(r.Partition)] == nil {
						shipped[int(r.Partition)] = map[string]bool{}
					}
					shipped[int(r.Partition)][string(r.Key)] = true
				}
			}
		})
		cancel()
		genA, pa, _ := lastAssignment(a.Output())
		genB, pb, _ := lastAssignment(b.Output())
		aParts = pa
		if genA == 0 || genA != genB || len(pa) == 0 || len(pb) == 0 || len(pa)+len(pb) != parts {
			return false
		}
		for p, k := range produced {
			if len(shipped[p]) < k {
				return false
			}
		}
		return true
	})
	if got := recv.Successes(); got != 0 {
		t.Fatalf("%d deliveries accepted while the receiver was down", got)
	}
	for _, m := range assignedLine.FindAllStringSubmatch(b.Output(), -1) {
		for f := range strings.FieldsSeq(m[2]) {
			if p, _ := strconv.Atoi(f); slices.Contains(aParts, p) {
				t.Fatalf("b owned partition %d of a's before a was lost:\n%s", p, b.Output())
			}
		}
	}

	// a is lost, disk and all.
	if err := a.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(dirA); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 60*time.Second, "b owning every partition, restored", func() bool {
		_, pb, since := lastAssignment(b.Output())
		return len(pb) == parts && len(restoredLine.FindAllString(since, -1)) == parts
	})
	_, _, since := lastAssignment(b.Output())
	restored := map[int]string{}
	for _, m := range restoredLine.FindAllStringSubmatch(since, -1) {
		p, _ := strconv.Atoi(m[1])
		records, _ := strconv.Atoi(m[3])
		restored[p] = m[2]
		if slices.Contains(aParts, p) && records < produced[p] {
			t.Errorf("partition %d: rebuilt from %d changelog records, want at least its %d events", p, records, produced[p])
		}
	}
	for _, p := range aParts {
		if restored[p] != kafka.RestoreRebuild {
			t.Errorf("a's partition %d restored by b in mode %q, want %q (b never had it)", p, restored[p], kafka.RestoreRebuild)
		}
	}
	if t.Failed() {
		t.Fatalf("b's output:\n%s", b.Output())
	}

	up.Store(true)
	testkit.WaitFor(t, 60*time.Second, "every record delivered", func() bool { got, _ := accepted(recv); return len(got) == n })
	b.Interrupt(t)
	all, dups := accepted(recv)
	seen := map[string]bool{}
	for _, got := range all {
		seen[strings.TrimPrefix(got, "main ")] = true
	}
	if len(seen) != n {
		t.Errorf("%d distinct records delivered, want %d", len(seen), n)
	}
	if dups > 0 {
		t.Errorf("%d records delivered more than once: nothing was delivered before the takeover", dups)
	}
}

func TestDemoRunsToTheEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	runexample.Demo(t, []string{"--demo", "--demo-exit", "--dir", t.TempDir()},
		"the group shares the partitions", "relay-a crashes", "nothing relay-a held is lost",
		"12 records delivered (shipping 6, email 6), 12 of them by relay-b, 6 from the partitions",
		"taken over by relay-b: restore mode rebuild", "parked", "will retry",
		`unknown endpoint: "fax"`, "stopped cleanly")
}
