package kafka

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"

	"github.com/outboxd/outbox/internal/testkit"
	"github.com/outboxd/outbox/outbox"
	"github.com/outboxd/outbox/store"
)

// actionByPrefix answers by the ID's prefix: ok- delivered, park- "not yet",
// dead- a permanent failure, anything else a retry.
func actionByPrefix(d *outbox.Delivery) outbox.Action {
	switch {
	case strings.HasPrefix(d.ID, "ok-"):
		return outbox.ActionSuccess
	case strings.HasPrefix(d.ID, "park-"):
		return outbox.ActionPark
	case strings.HasPrefix(d.ID, "dead-"):
		return outbox.ActionDead
	}
	return outbox.ActionRetry
}

// slowSchedules keeps parked and retried events pending for the test.
func slowSchedules(c *outbox.Config) {
	c.ParkInterval = time.Hour
	c.BackoffInitial = time.Hour
	c.BackoffMax = time.Hour
}

// Shipping and restore: a workload with deliveries, parks, retries, dead
// letters, an operator's delete, a replay and a coalescing update is shipped
// to a compacted topic; the topic is compacted; a new database restored from
// it has exactly the original's pending and dead sets, and what was deleted
// stays deleted, as it was (delivered, or deleted by the operator): a record
// read again into the restored outbox is a duplicate.
func TestShipAndRestore(t *testing.T) {
	c := newCluster(t)
	brokers := c.ListenAddrs()
	sink := newRecorder("sink")
	sink.action = actionByPrefix
	origPath := dbPath(t, "orig")
	o := openOutbox(t, origPath, sink, slowSchedules)
	ctx := context.Background()

	cfg := testConfig(brokers, "")
	cfg.ChangelogTopic = "outbox-changelog"
	cfg.ShipBatch = 50
	r := startRunner(t, o, cfg)

	var evs []outbox.Event
	for i := range 30 {
		for _, kind := range []string{"ok", "park", "dead", "retry"} {
			evs = append(evs, outbox.Event{ID: fmt.Sprintf("%s-%02d", kind, i), Key: fmt.Sprintf("key-%d", i%7),
				Destination: "dest", Headers: map[string]string{"X-Kind": kind}, Payload: []byte(kind + " payload")})
		}
	}
	evs = append(evs, outbox.Event{ID: "drop-1", Destination: "dest", Payload: []byte("dropped")})
	if _, err := o.Enqueue(ctx, evs...); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 20*time.Second, "every event attempted", func() bool { return sink.distinct() == len(evs) })
	testkit.WaitFor(t, 10*time.Second, "the outcomes to be committed", func() bool {
		st := o.Stats()
		return st.Dead == 30 && st.Pending == 61 && st.InFlight == 0
	})

	if err := o.Delete(ctx, "drop-1"); err != nil {
		t.Fatal(err)
	}
	// A coalescing update in place (OpUpdate) and one that replaces the
	// event under another ID (OpSupersede).
	if _, err := o.Upsert(ctx, "room", func(*outbox.Event) (outbox.Event, error) {
		return outbox.Event{ID: "retry-room-1", Destination: "dest", Payload: []byte("v1")}, nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := o.Upsert(ctx, "room", func(cur *outbox.Event) (outbox.Event, error) {
		return outbox.Event{Destination: "dest", Payload: []byte("v2")}, nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := o.Upsert(ctx, "room", func(cur *outbox.Event) (outbox.Event, error) {
		return outbox.Event{ID: "retry-room-2", Destination: "dest", Payload: []byte("v3")}, nil
	}); err != nil {
		t.Fatal(err)
	}
	// A replayed dead letter goes pending again (OpReplay) until its next
	// attempt fails for good again.
	if err := o.Replay(ctx, "dead-00"); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 10*time.Second, "the replayed event to be dead again", func() bool {
		ev, err := o.Get(ctx, "dead-00")
		return err == nil && ev.State == outbox.StateDead && sink.count("dead-00") == 2
	})

	testkit.WaitFor(t, 10*time.Second, "the outcomes to be committed", func() bool { return o.Stats().InFlight == 0 })
	testkit.WaitFor(t, 10*time.Second, "shipping to catch up", func() bool {
		n, _ := r.ShippingLag()
		return n == 0
	})

	cl := o.Changelog()
	shipped, err := cl.ShippedLSN()
	if err != nil || shipped != cl.LastLSN() {
		t.Fatalf("shipped LSN %d (%v), last LSN %d", shipped, err, cl.LastLSN())
	}
	assertCompacted(t, brokers, cfg.ChangelogTopic)
	metrics := r.Metrics()
	if sh := metrics.Shipping; sh == nil || sh.LagEntries != 0 || sh.Shipped < 100 ||
		sh.ShippedLSN != shipped || !metrics.Ready {
		t.Errorf("metrics after shipping: %+v %+v", metrics, metrics.Shipping)
	}
	if metrics.Ingest != nil {
		t.Error("ingest metrics from a runner without ingest")
	}
	c.Compact()

	var reports []RestoreProgress
	restored := dbPath(t, "restored")
	stats, err := Restore(ctx, cfg, restored, func(p RestoreProgress) { reports = append(reports, p) })
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("restore: %+v; %d progress reports", stats, len(reports))
	if len(reports) == 0 {
		t.Fatal("no progress reported")
	}
	if last := reports[len(reports)-1]; last.Topic != cfg.ChangelogTopic || last.Total == 0 || last.Done != last.Total {
		t.Errorf("last progress report %+v, want all of %s read", last, cfg.ChangelogTopic)
	}
	if stats.Pending != 61 || stats.Dead != 30 {
		t.Errorf("restored %d pending and %d dead, want 61 and 30", stats.Pending, stats.Dead)
	}
	if _, err := Restore(ctx, cfg, restored, nil); !errors.Is(err, ErrNotEmpty) {
		t.Errorf("restore over a database: %v, want ErrNotEmpty", err)
	}

	// Compare the two files record by record (bookkeeping included): stop
	// the original to read it.
	closeRunner(t, r)
	if err := o.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(origPath, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rs, err := store.Open(restored, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, state := range []store.State{store.StatePending, store.StateDead} {
		want, got := listAll(t, st, state), listAll(t, rs, state)
		if len(want) != len(got) {
			t.Errorf("%v: %d records restored, original has %d", state, len(got), len(want))
		}
		for id, w := range want {
			g, ok := got[id]
			if !ok {
				t.Errorf("%v %s missing after the restore", state, id)
				continue
			}
			if err := sameRecord(w, g); err != nil {
				t.Errorf("%v %s: %v", state, id, err)
			}
		}
		for id := range got {
			if _, ok := want[id]; !ok {
				t.Errorf("%v %s restored but not in the original", state, id)
			}
		}
	}
	for _, id := range []string{"ok-00", "ok-29", "retry-room-1"} {
		if rec, state, err := rs.Get(id); err != nil || rec != nil || state != store.StateDelivered {
			t.Errorf("%s after the restore: %v %v %v, want a tombstone of a delivery", id, rec, state, err)
		}
	}
	if rec, state, err := rs.Get("drop-1"); err != nil || rec != nil || state != store.StateDeleted {
		t.Errorf("drop-1 after the restore: %v %v %v, want the tombstone of an operator's delete", rec, state, err)
	}
	if err := rs.Close(); err != nil {
		t.Fatal(err)
	}

	// The restored database in use: a deleted event read again from a
	// source (Ingest) is a duplicate, not delivered; enqueued again by
	// hand, the operator's delete is reported.
	sink2 := newRecorder("sink2")
	o2 := openOutbox(t, restored, sink2, slowSchedules)
	if _, err := o2.Ingest(ctx, outbox.Event{ID: "drop-1", Destination: "dest", Payload: []byte("dropped")},
		outbox.Event{ID: "ok-03", Key: "key-3", Destination: "dest", Headers: map[string]string{"X-Kind": "ok"}, Payload: []byte("ok payload")}); err != nil {
		t.Fatal(err)
	}
	if _, err := o2.Enqueue(ctx, outbox.Event{ID: "drop-1", Destination: "dest", Payload: []byte("dropped")}); !errors.Is(err, outbox.ErrDeleted) {
		t.Errorf("Enqueue of drop-1 into the restored outbox: %v, want ErrDeleted", err)
	}
	if s := o2.Stats(); s.DuplicatesTotal != 2 || s.Pending != 61 {
		t.Errorf("restored outbox: %+v, want 2 duplicates and 61 pending", s)
	}
}

// A shipper that starts on a store whose changelog was trimmed before it was
// ever shipped ships a snapshot first, so a restore still has every record.
func TestShipSnapshotOfTrimmedChangelog(t *testing.T) {
	c := newCluster(t)
	brokers := c.ListenAddrs()
	sink := newRecorder("sink")
	sink.action = actionByPrefix
	o := openOutbox(t, dbPath(t, "orig"), sink, func(c *outbox.Config) {
		slowSchedules(c)
		c.ChangelogMaxEntries = 1
		c.MaintenanceInterval = 10 * time.Millisecond
	})
	ctx := context.Background()
	if _, err := o.Enqueue(ctx, outbox.Event{ID: "park-1", Destination: "dest"}, outbox.Event{ID: "dead-1", Destination: "dest"},
		outbox.Event{ID: "ok-1", Destination: "dest"}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 10*time.Second, "outcomes", func() bool { s := o.Stats(); return s.Dead == 1 && s.Pending == 1 && s.InFlight == 0 })
	testkit.WaitFor(t, 10*time.Second, "the changelog trimmed", func() bool {
		es, _ := o.Changelog().Entries(1, 1)
		return len(es) == 1 && es[0].LSN > 1
	})

	cfg := testConfig(brokers, "")
	cfg.ChangelogTopic = "cl"
	r := startRunner(t, o, cfg)
	testkit.WaitFor(t, 10*time.Second, "shipping to catch up", func() bool { n, _ := r.ShippingLag(); return n == 0 })
	stats, err := Restore(ctx, cfg, dbPath(t, "restored"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if stats.Pending != 1 || stats.Dead != 1 {
		t.Fatalf("restored %+v, want 1 pending and 1 dead", stats)
	}
}

func assertCompacted(t *testing.T, brokers []string, topic string) {
	t.Helper()
	cl := admin(t, brokers)
	resp, err := cl.DescribeConfigs(context.Background(), &kafkago.DescribeConfigsRequest{Resources: []kafkago.DescribeConfigRequestResource{{
		ResourceType: kafkago.ResourceTypeTopic, ResourceName: topic, ConfigNames: []string{"cleanup.policy"}}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, res := range resp.Resources {
		for _, ce := range res.ConfigEntries {
			if ce.ConfigName == "cleanup.policy" && ce.ConfigValue == "compact" {
				return
			}
		}
	}
	t.Fatalf("changelog topic %s is not compacted: %+v", topic, resp.Resources)
}

func listAll(t *testing.T, st *store.Store, state store.State) map[string]*store.Record {
	t.Helper()
	out := map[string]*store.Record{}
	after := ""
	for {
		recs, next, err := st.List(store.ListQuery{State: state, After: after, Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			out[r.ID] = r
		}
		if next == "" {
			return out
		}
		after = next
	}
}

// sameRecord compares everything but the version (a restore writes its own
// changelog).
func sameRecord(a, b *store.Record) error {
	switch {
	case !a.SameContent(b):
		return fmt.Errorf("content differs: %+v vs %+v", a, b)
	case a.Endpoint != b.Endpoint, !a.CreatedAt.Equal(b.CreatedAt), a.Attempts != b.Attempts,
		a.Deliveries != b.Deliveries, !a.NextAttemptAt.Equal(b.NextAttemptAt), a.LastStatus != b.LastStatus,
		a.LastError != b.LastError, a.DeadReason != b.DeadReason, !a.DeadAt.Equal(b.DeadAt):
		return fmt.Errorf("bookkeeping differs:\n%+v\n%+v", a, b)
	}
	return nil
}
