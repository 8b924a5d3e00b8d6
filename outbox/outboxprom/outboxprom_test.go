package outboxprom_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"github.com/outboxd/outbox/internal/testkit"
	"github.com/outboxd/outbox/outbox"
	"github.com/outboxd/outbox/outbox/outboxprom"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type sinkFunc func(ctx context.Context, d *outbox.Delivery) outbox.Result

func (f sinkFunc) Deliver(ctx context.Context, d *outbox.Delivery) outbox.Result { return f(ctx, d) }

func TestCollectorCountsDeliveries(t *testing.T) {
	sink := sinkFunc(func(_ context.Context, d *outbox.Delivery) outbox.Result {
		if d.ID == "bad" {
			return outbox.Result{Action: outbox.ActionDead, Status: 400}
		}
		return outbox.Result{Action: outbox.ActionSuccess, Status: 200}
	})
	cfg := outbox.Config{Sink: sink, Interval: 10 * time.Millisecond}
	cfg.NoSync = true
	o, err := outbox.Open(filepath.Join(t.TempDir(), "o.db"), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Stop(context.Background())
	col, hooks := outboxprom.New(o)
	o.AddHooks(hooks) // installing again must not count twice
	reg := prometheus.NewRegistry()
	reg.MustRegister(col)
	if err := o.Start(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := o.Enqueue(ctx,
		outbox.Event{ID: "a", Destination: "svc"},
		outbox.Event{ID: "b", Destination: "svc"},
		outbox.Event{ID: "bad", Destination: "svc"},
	); err != nil {
		t.Fatal(err)
	}
	if _, err := o.Enqueue(ctx, outbox.Event{ID: "a", Destination: "svc"}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for s := o.Stats(); s.DeliveredTotal+s.FailedTotal < 3; s = o.Stats() {
		if time.Now().After(deadline) {
			t.Fatalf("not delivered: %+v", s)
		}
		time.Sleep(time.Millisecond)
	}
	got := gather(t, reg)
	want := map[string]float64{
		"outbox_dead":                           1,
		"outbox_dead_letters_total{svc}":        1,
		"outbox_deliveries_total{dead,svc}":     1,
		"outbox_deliveries_total{success,svc}":  2,
		"outbox_duplicates_total":               1,
		"outbox_enqueued_total":                 3,
		"outbox_pending":                        0,
		"outbox_in_flight":                      0,
		"outbox_enqueue_to_delivery_seconds":    2, // sample count
		"outbox_delivery_duration_seconds{svc}": 3,
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	if got["outbox_punctuation_duration_seconds"] == 0 {
		t.Errorf("no punctuation observed")
	}
	// The store's commit counters: every write above went through a
	// commit, the three-event Enqueue carried 3 records, and no commit is
	// running between writes.
	cs := o.CommitStats()
	if got["outbox_store_commits_total"] < 2 || got["outbox_store_commit_records_total"] < 3 ||
		got["outbox_store_commit_calls_total"] < got["outbox_store_commits_total"] ||
		got["outbox_store_commit_seconds_total"] <= 0 || got["outbox_store_commit_failures_total"] != 0 {
		t.Errorf("store commit metrics: %v (CommitStats now %+v)", got, cs)
	}
	if v, ok := got["outbox_store_commit_running_seconds"]; !ok || v < 0 {
		t.Errorf("outbox_store_commit_running_seconds = %v, %v", v, ok)
	}
}

// gather returns every series as name{label values...} -> value (the sample
// count for histograms).
func gather(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			name := mf.GetName()
			if len(m.GetLabel()) > 0 {
				var vals []string
				for _, l := range m.GetLabel() {
					vals = append(vals, l.GetValue())
				}
				name += "{" + strings.Join(vals, ",") + "}"
			}
			switch {
			case m.Counter != nil:
				out[name] = m.GetCounter().GetValue()
			case m.Gauge != nil:
				out[name] = m.GetGauge().GetValue()
			case m.Histogram != nil:
				out[name] = float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return out
}

// pair is a Source over two outboxes, as a view over the partition stores
// of an instance reports them: counts and commit counters summed.
type pair struct{ a, b *outbox.Outbox }

func (p pair) Stats() outbox.Stats {
	x, y := p.a.Stats(), p.b.Stats()
	return outbox.Stats{Pending: x.Pending + y.Pending, Dead: x.Dead + y.Dead, InFlight: x.InFlight + y.InFlight,
		OldestPendingAge: max(x.OldestPendingAge, y.OldestPendingAge)}
}

func (p pair) Health() error { return errors.Join(p.a.Health(), p.b.Health()) }

func (p pair) CommitStats() outbox.CommitStats {
	x, y := p.a.CommitStats(), p.b.CommitStats()
	return outbox.CommitStats{Commits: x.Commits + y.Commits, Failed: x.Failed + y.Failed,
		Calls: x.Calls + y.Calls, Records: x.Records + y.Records, Busy: x.Busy + y.Busy, Running: max(x.Running, y.Running)}
}

// TestCollectorOverSeveralOutboxes: the same hooks installed in two
// outboxes (in Config.Hooks, and again with AddHooks) count every event of
// each once, and the gauges and store counters come from the attached
// Source over both.
func TestCollectorOverSeveralOutboxes(t *testing.T) {
	col, hooks := outboxprom.New(nil)
	if hooks.Name != outboxprom.HooksName {
		t.Fatalf("hooks named %q, want %q", hooks.Name, outboxprom.HooksName)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(col)
	sink := sinkFunc(func(_ context.Context, d *outbox.Delivery) outbox.Result {
		if d.Destination == "later" {
			return outbox.Result{Action: outbox.ActionRetry, Status: 503, RetryAfter: time.Hour}
		}
		return outbox.Result{Action: outbox.ActionSuccess, Status: 200}
	})
	open := func(name string) *outbox.Outbox {
		t.Helper()
		cfg := outbox.Config{Sink: sink, Interval: 10 * time.Millisecond, Hooks: hooks}
		cfg.NoSync = true
		o, err := outbox.Open(filepath.Join(t.TempDir(), name), cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = o.Stop(context.Background()) })
		o.AddHooks(hooks) // the same Name: replaces, does not count twice
		return o
	}
	a, b := open("p0.db"), open("p1.db")
	ctx := context.Background()
	if _, err := a.Enqueue(ctx, outbox.Event{ID: "a1", Destination: "svc"}, outbox.Event{ID: "a2", Destination: "svc"}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"b1", "b2", "b3", "b1"} {
		if _, err := b.Enqueue(ctx, outbox.Event{ID: id, Destination: "svc"}); err != nil {
			t.Fatal(err)
		}
	}

	// Nothing attached: counters only, no gauges.
	got := gather(t, reg)
	if got["outbox_enqueued_total"] != 5 || got["outbox_duplicates_total"] != 1 {
		t.Errorf("enqueued %v, duplicates %v; want 5 and 1 over both outboxes", got["outbox_enqueued_total"], got["outbox_duplicates_total"])
	}
	if v, ok := got["outbox_pending"]; ok {
		t.Errorf("outbox_pending = %v with nothing attached, want no gauge", v)
	}

	col.AttachSource(pair{a, b})
	before := a.CommitStats().Commits + b.CommitStats().Commits
	got = gather(t, reg)
	after := a.CommitStats().Commits + b.CommitStats().Commits
	if got["outbox_pending"] != 5 || got["outbox_unavailable{commit}"] != 0 {
		t.Errorf("outbox_pending %v, unavailable{commit} %v from the pair; want 5 and 0", got["outbox_pending"], got["outbox_unavailable{commit}"])
	}
	if c := got["outbox_store_commits_total"]; c < float64(before) || c > float64(after) || before < 5 {
		t.Errorf("outbox_store_commits_total = %v, want the pair's sum (%d..%d)", c, before, after)
	}

	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 10*time.Second, "both outboxes to deliver", func() bool {
		return a.Stats().DeliveredTotal == 2 && b.Stats().DeliveredTotal == 3
	})
	got = gather(t, reg)
	want := map[string]float64{
		"outbox_enqueued_total":                 5,
		"outbox_duplicates_total":               1,
		"outbox_deliveries_total{success,svc}":  5,
		"outbox_delivery_duration_seconds{svc}": 5,
		"outbox_enqueue_to_delivery_seconds":    5,
		"outbox_pending":                        0,
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}

	// Attach replaces the source: the gauges follow one outbox; nil drops
	// them. b keeps an event pending (its receiver asks for an hour).
	if _, err := b.Enqueue(ctx, outbox.Event{ID: "b4", Destination: "later"}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 10*time.Second, "b's attempt at b4", func() bool { return b.Stats().FailedTotal == 1 })
	if got := gather(t, reg); got["outbox_pending"] != 1 || got["outbox_deliveries_total{retry,later}"] != 1 {
		t.Errorf("from the pair: pending %v, deliveries_total{retry,later} %v; want 1 and 1", got["outbox_pending"], got["outbox_deliveries_total{retry,later}"])
	}
	col.Attach(a)
	if got := gather(t, reg); got["outbox_pending"] != 0 || got["outbox_enqueued_total"] != 6 {
		t.Errorf("attached to a alone: pending %v (want a's 0), enqueued_total %v (want 6)", got["outbox_pending"], got["outbox_enqueued_total"])
	}
	col.Attach(nil)
	if v, ok := gather(t, reg)["outbox_pending"]; ok {
		t.Errorf("outbox_pending = %v after Attach(nil), want no gauge", v)
	}
}

// A topic event nobody subscribes to shows as an unrouted event, or, with
// Config.Unrouted = UnroutedDrop, in the dropped counter.
func TestUnroutedMetrics(t *testing.T) {
	for _, policy := range []outbox.UnroutedPolicy{outbox.UnroutedKeep, outbox.UnroutedDrop} {
		cfg := outbox.Config{Sink: sinkFunc(func(context.Context, *outbox.Delivery) outbox.Result {
			return outbox.Result{Action: outbox.ActionSuccess, Status: 200}
		}), Unrouted: policy}
		cfg.NoSync = true
		o, err := outbox.Open(filepath.Join(t.TempDir(), "o.db"), cfg)
		if err != nil {
			t.Fatal(err)
		}
		col, _ := outboxprom.New(o)
		reg := prometheus.NewRegistry()
		reg.MustRegister(col)
		if _, err := o.Enqueue(context.Background(), outbox.Event{ID: "t", Topic: "order.paid"}); err != nil {
			t.Fatal(err)
		}
		got := gather(t, reg)
		kept, dropped := 1.0, 0.0
		if policy == outbox.UnroutedDrop {
			kept, dropped = 0, 1
		}
		if got["outbox_unrouted_events"] != kept || got["outbox_unrouted_dropped_total"] != dropped || got["outbox_pending"] != 0 {
			t.Errorf("%v: unrouted %v, dropped %v, pending %v; want %v, %v, 0", policy,
				got["outbox_unrouted_events"], got["outbox_unrouted_dropped_total"], got["outbox_pending"], kept, dropped)
		}
		if err := o.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

// The backfill of a new subscription shows in its metrics: running while
// it runs, then the events it routed and the deliveries it made.
func TestBackfillMetrics(t *testing.T) {
	cfg := outbox.Config{Sink: sinkFunc(func(context.Context, *outbox.Delivery) outbox.Result {
		return outbox.Result{Action: outbox.ActionSuccess, Status: 200}
	})}
	cfg.NoSync = true
	o, err := outbox.Open(filepath.Join(t.TempDir(), "o.db"), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := o.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
	}()
	col, _ := outboxprom.New(o)
	reg := prometheus.NewRegistry()
	reg.MustRegister(col)
	if _, err := o.Enqueue(context.Background(), outbox.Event{ID: "t1", Topic: "order.paid"}, outbox.Event{ID: "t2", Topic: "order.paid"}); err != nil {
		t.Fatal(err)
	}
	if err := o.SetSubscriptions(context.Background(), []outbox.Subscription{
		{Endpoint: "a", Topics: []string{"order.*"}}, {Endpoint: "b", Topics: []string{"order.paid"}}}); err != nil {
		t.Fatal(err)
	}
	if got := gather(t, reg); got["outbox_backfill_running"] != 0 || got["outbox_backfill_routed_total"] != 0 {
		t.Errorf("before Start: %v", got)
	}
	if err := o.Start(); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, time.Minute, "the backfill to end", func() bool { return o.Stats().Unrouted == 0 && !o.Stats().Backfill.Running })
	if got := gather(t, reg); got["outbox_backfill_running"] != 0 || got["outbox_backfill_routed_total"] != 2 || got["outbox_backfill_deliveries_total"] != 4 {
		t.Errorf("after the backfill: running %v, routed %v, deliveries %v; want 0, 2, 4",
			got["outbox_backfill_running"], got["outbox_backfill_routed_total"], got["outbox_backfill_deliveries_total"])
	}
}
