package kafkaprom

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/outboxd/outbox/kafka"
)

type fixed kafka.Metrics

func (f fixed) Metrics() kafka.Metrics { return kafka.Metrics(f) }

// gather registers a Collector of src and returns every sample by name.
func gather(t *testing.T, src Source) map[string]float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(New(src))
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			switch {
			case m.GetCounter() != nil:
				out[mf.GetName()] = m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				out[mf.GetName()] = m.GetGauge().GetValue()
			}
		}
	}
	return out
}

// Every figure of a Runner is exported under its documented name.
func TestEveryFigureHasItsName(t *testing.T) {
	got := gather(t, fixed{
		Ready: true,
		Ingest: &kafka.IngestMetrics{Records: 1, Enqueued: 2, Dead: 3, Unstorable: 4, EnqueueErrors: 5,
			FetchErrors: 6, Commits: 7, CommitErrors: 8, Generations: 9, GroupErrors: 10, AssignedPartitions: 11},
		Shipping: &kafka.ShippingMetrics{Shipped: 12, ShipErrors: 13, ShippedLSN: 14, LagEntries: 15,
			LagAge: 1500 * time.Millisecond},
	})
	want := map[string]float64{
		"outboxd_kafka_ingest_records_total":        1,
		"outboxd_kafka_ingest_enqueued_total":       2,
		"outboxd_kafka_ingest_dead_total":           3,
		"outboxd_kafka_ingest_unstorable_total":     4,
		"outboxd_kafka_ingest_enqueue_errors_total": 5,
		"outboxd_kafka_ingest_fetch_errors_total":   6,
		"outboxd_kafka_ingest_commits_total":        7,
		"outboxd_kafka_ingest_commit_errors_total":  8,
		"outboxd_kafka_ingest_generations_total":    9,
		"outboxd_kafka_ingest_group_errors_total":   10,
		"outboxd_kafka_ingest_assigned_partitions":  11,
		"outboxd_kafka_ingest_ready":                1,
		"outboxd_kafka_changelog_shipped_total":     12,
		"outboxd_kafka_changelog_ship_errors_total": 13,
		"outboxd_kafka_changelog_shipped_lsn":       14,
		"outboxd_kafka_changelog_lag_lsns":          15,
		"outboxd_kafka_changelog_lag_seconds":       1.5,
	}
	if len(got) != len(want) {
		t.Errorf("%d samples, want %d: %v", len(got), len(want), got)
	}
	for name, v := range want {
		if g, ok := got[name]; !ok || g != v {
			t.Errorf("%s = %v (present %v), want %v", name, g, ok, v)
		}
	}
}

// A Runner without ingest exports no ingest figures but readiness; one
// without shipping no changelog figures.
func TestOnlyWhatRuns(t *testing.T) {
	got := gather(t, fixed{Ready: true, Shipping: &kafka.ShippingMetrics{Shipped: 100, ShippedLSN: 100}})
	if _, ok := got["outboxd_kafka_ingest_records_total"]; ok {
		t.Error("ingest metrics from a runner without ingest")
	}
	if got["outboxd_kafka_ingest_ready"] != 1 || got["outboxd_kafka_changelog_shipped_lsn"] != 100 {
		t.Errorf("metrics of a shipping runner: %v", got)
	}
	got = gather(t, fixed{Ready: false, Ingest: &kafka.IngestMetrics{Records: 20}})
	if got["outboxd_kafka_ingest_ready"] != 0 || got["outboxd_kafka_ingest_records_total"] != 20 {
		t.Errorf("metrics of an ingest runner, not ready: %v", got)
	}
	if _, ok := got["outboxd_kafka_changelog_lag_lsns"]; ok {
		t.Error("changelog metrics from a runner without shipping")
	}
}
