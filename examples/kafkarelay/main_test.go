package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
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
		"--allow-private", "--changelog-topic", "orders-changelog", "--db", filepath.Join(t.TempDir(), "relay.db"),
		"--interval", "50ms", "--park-interval", "100ms", "--backoff", "50ms")
	produce(n/2, n)

	testkit.WaitFor(t, 60*time.Second, "every record delivered", func() bool { got, _ := accepted(recv); return len(got) == n })

	// The changelog topic ends with a tombstone (a delete) for every record.
	deleted := map[string]bool{}
	cc, err := kgo.NewClient(kgo.SeedBrokers(brokers...), auth, kgo.ConsumeTopics("orders-changelog"),
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

func TestDemoRunsToTheEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	runexample.Demo(t, []string{"--demo", "--demo-exit", "--db", filepath.Join(t.TempDir(), "demo.db")},
		"12 records delivered", "parked", "will retry", `unknown endpoint: "fax"`, "changelog topic kafkarelay-changelog holds", "stopped cleanly")
}
