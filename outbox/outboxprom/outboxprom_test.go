package outboxprom_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

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
