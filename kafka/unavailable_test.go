package kafka

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/outboxd/outbox/internal/testkit"
	"github.com/outboxd/outbox/outbox"
)

// The broker is down when the sidecar starts and goes down again mid-run (the
// cluster is closed and a new one started on the same port, on the same
// data): the outbox keeps delivering what it holds and what its API takes,
// the runner reports not ready, shipping lags, and everything resumes when
// the broker is back.
func TestBrokerUnavailableAtStartAndMidRun(t *testing.T) {
	port := testkit.FreePort(t)
	dataDir := t.TempDir()
	addr := "127.0.0.1:" + strconv.Itoa(port)
	startBroker := func() *kfake.Cluster {
		c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(port), kfake.DataDir(dataDir),
			kfake.SeedTopics(2, "in"), kfake.GroupMinSessionTimeout(100*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	sink := newRecorder("sink")
	o := openOutbox(t, dbPath(t, "sidecar"), sink, nil)
	ctx := context.Background()
	cfg := testConfig([]string{addr}, "in")
	cfg.ChangelogTopic = "cl"
	// The restarted broker keeps the group (same data directory): a short
	// session lets it drop the member of the lost connection quickly.
	cfg.SessionTimeout, cfg.HeartbeatInterval = time.Second, 100*time.Millisecond
	r := startRunner(t, o, cfg)

	// Down at start: not ready, yet the outbox delivers.
	testkit.WaitFor(t, 10*time.Second, "a failed attempt to join the group", func() bool { return r.met.groupErrors.Load() > 0 })
	if r.Ready() {
		t.Fatal("ready without a broker")
	}
	if _, err := o.Enqueue(ctx, outbox.Event{ID: "api-1", Destination: "dest"}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 10*time.Second, "delivery without a broker", func() bool { return sink.count("api-1") == 1 })
	if n, _ := r.ShippingLag(); n == 0 {
		t.Error("no shipping lag while the broker is down")
	}

	// The broker comes up: ingest and shipping start.
	c := startBroker()
	p := newProducer(t, []string{addr}, "in")
	p.produce(t, records(0, 20, 5)...)
	testkit.WaitFor(t, 20*time.Second, "ready", r.Ready)
	testkit.WaitFor(t, 20*time.Second, "the first records delivered", func() bool { return sink.distinct() == 21 })
	testkit.WaitFor(t, 20*time.Second, "shipping to catch up", func() bool { n, _ := r.ShippingLag(); return n == 0 })

	// Down mid-run.
	c.Close()
	testkit.WaitFor(t, 20*time.Second, "not ready after the broker went away", func() bool { return !r.Ready() })
	if m := r.Metrics(); m.Ready || m.Ingest == nil || m.Ingest.Records != 20 {
		t.Errorf("metrics with the broker down: %+v %+v", m, m.Ingest)
	}
	if _, err := o.Enqueue(ctx, outbox.Event{ID: "api-2", Destination: "dest"}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 10*time.Second, "delivery while the broker is down", func() bool { return sink.count("api-2") == 1 })
	testkit.WaitFor(t, 10*time.Second, "shipping lag while the broker is down", func() bool { n, _ := r.ShippingLag(); return n > 0 })

	// Back on the same port and data.
	c = startBroker()
	defer c.Close()
	p.produce(t, records(20, 20, 5)...)
	testkit.WaitFor(t, 20*time.Second, "ready again", r.Ready)
	testkit.WaitFor(t, 30*time.Second, "every record delivered", func() bool { return sink.distinct() == 42 })
	testkit.WaitFor(t, 20*time.Second, "shipping to catch up again", func() bool { n, _ := r.ShippingLag(); return n == 0 })
	for id, n := range sink.snapshot() {
		if n != 1 {
			t.Errorf("%s delivered %d times", id, n)
		}
	}
	closeRunner(t, r)
	cl := admin(t, []string{addr})
	ends := endOffsets(t, cl, "in", 2)
	got := committedOffsets(t, cl, "g", "in", 2)
	for part, end := range ends {
		if got[part] != end {
			t.Errorf("partition %d committed %d, end %d", part, got[part], end)
		}
	}
}
