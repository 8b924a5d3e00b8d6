package kafkaprom

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

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

// groupNames are the metrics of group mode.
var groupNames = []string{
	"outboxd_kafka_partitions_owned",
	"outboxd_kafka_partition_state",
	"outboxd_kafka_partition_restore_records",
	"outboxd_kafka_partition_restore_remaining",
	"outboxd_kafka_partition_restore_records_per_second",
	"outboxd_kafka_partition_pending",
	"outboxd_kafka_partition_dead",
	"outboxd_kafka_partition_committed_offset",
	"outboxd_kafka_restores_total",
	"outboxd_kafka_restore_failures_total",
}

// In group mode every owned partition has its state, its restore's
// progress, its store's counts and its committed offset, and the restores
// are counted by mode.
func TestPartitionFigures(t *testing.T) {
	src := fixed{
		Ready:  true,
		Ingest: &kafka.IngestMetrics{AssignedPartitions: 2},
		Partitions: []kafka.PartitionStatus{
			{Partition: 0, State: kafka.PartitionActive, Committed: 41, Pending: 7, Dead: 2,
				Restore: kafka.RestoreStatus{Mode: kafka.RestoreCheckpoint, Records: 300, Rate: 1500, Done: true}},
			{Partition: 3, State: kafka.PartitionRestoring, Committed: -1,
				Restore: kafka.RestoreStatus{Mode: kafka.RestoreRebuild, Records: 1200, Remaining: 8800, Rate: 2400.5}},
		},
		Restores: kafka.RestoreCounts{Checkpoint: 4, Rebuild: 1, Failed: 2},
	}
	want := `
# HELP outboxd_kafka_partitions_owned Partitions of the input topic this instance owns (group mode).
# TYPE outboxd_kafka_partitions_owned gauge
outboxd_kafka_partitions_owned 2
# HELP outboxd_kafka_partition_state 1 for the owned partition's state (restoring, active, handing-over, failed), 0 for the others.
# TYPE outboxd_kafka_partition_state gauge
outboxd_kafka_partition_state{partition="0",state="active"} 1
outboxd_kafka_partition_state{partition="0",state="failed"} 0
outboxd_kafka_partition_state{partition="0",state="handing-over"} 0
outboxd_kafka_partition_state{partition="0",state="restoring"} 0
outboxd_kafka_partition_state{partition="3",state="active"} 0
outboxd_kafka_partition_state{partition="3",state="failed"} 0
outboxd_kafka_partition_state{partition="3",state="handing-over"} 0
outboxd_kafka_partition_state{partition="3",state="restoring"} 1
# HELP outboxd_kafka_partition_restore_records Changelog records applied by the restore of the partition's store.
# TYPE outboxd_kafka_partition_restore_records gauge
outboxd_kafka_partition_restore_records{partition="0"} 300
outboxd_kafka_partition_restore_records{partition="3"} 1200
# HELP outboxd_kafka_partition_restore_remaining Changelog offsets the restore of the partition's store has left to read.
# TYPE outboxd_kafka_partition_restore_remaining gauge
outboxd_kafka_partition_restore_remaining{partition="0"} 0
outboxd_kafka_partition_restore_remaining{partition="3"} 8800
# HELP outboxd_kafka_partition_restore_records_per_second Changelog records applied per second by the restore of the partition's store.
# TYPE outboxd_kafka_partition_restore_records_per_second gauge
outboxd_kafka_partition_restore_records_per_second{partition="0"} 1500
outboxd_kafka_partition_restore_records_per_second{partition="3"} 2400.5
# HELP outboxd_kafka_partition_pending Pending events in the partition's store (0 while it restores).
# TYPE outboxd_kafka_partition_pending gauge
outboxd_kafka_partition_pending{partition="0"} 7
outboxd_kafka_partition_pending{partition="3"} 0
# HELP outboxd_kafka_partition_dead Dead letters in the partition's store (0 while it restores).
# TYPE outboxd_kafka_partition_dead gauge
outboxd_kafka_partition_dead{partition="0"} 2
outboxd_kafka_partition_dead{partition="3"} 0
# HELP outboxd_kafka_partition_committed_offset Last input offset this instance committed for the partition (absent before the first).
# TYPE outboxd_kafka_partition_committed_offset gauge
outboxd_kafka_partition_committed_offset{partition="0"} 41
# HELP outboxd_kafka_restores_total Restores of partition stores finished, by mode: checkpoint (caught up from a kept store) or rebuild (from the whole changelog).
# TYPE outboxd_kafka_restores_total counter
outboxd_kafka_restores_total{mode="checkpoint"} 4
outboxd_kafka_restores_total{mode="rebuild"} 1
# HELP outboxd_kafka_restore_failures_total Restores of partition stores that failed.
# TYPE outboxd_kafka_restore_failures_total counter
outboxd_kafka_restore_failures_total 2
`
	if err := testutil.CollectAndCompare(New(src), strings.NewReader(want), groupNames...); err != nil {
		t.Error(err)
	}
	// The Runner's figures are still there beside them.
	if got := gather(t, src); got["outboxd_kafka_ingest_assigned_partitions"] != 2 || got["outboxd_kafka_ingest_ready"] != 1 {
		t.Errorf("ingest figures in group mode: %v", got)
	}
	if problems, err := testutil.CollectAndLint(New(src)); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
}

// Outside group mode there is no partition figure; in group mode owning no
// partition, the count is 0 and the restore counters are there.
func TestPartitionFiguresOnlyInGroupMode(t *testing.T) {
	if n := testutil.CollectAndCount(New(fixed{Ready: true, Ingest: &kafka.IngestMetrics{}}), groupNames...); n != 0 {
		t.Errorf("%d group mode samples from a Runner, want none", n)
	}
	want := `
# HELP outboxd_kafka_partitions_owned Partitions of the input topic this instance owns (group mode).
# TYPE outboxd_kafka_partitions_owned gauge
outboxd_kafka_partitions_owned 0
# HELP outboxd_kafka_restores_total Restores of partition stores finished, by mode: checkpoint (caught up from a kept store) or rebuild (from the whole changelog).
# TYPE outboxd_kafka_restores_total counter
outboxd_kafka_restores_total{mode="checkpoint"} 0
outboxd_kafka_restores_total{mode="rebuild"} 3
# HELP outboxd_kafka_restore_failures_total Restores of partition stores that failed.
# TYPE outboxd_kafka_restore_failures_total counter
outboxd_kafka_restore_failures_total 1
`
	src := fixed{Partitions: []kafka.PartitionStatus{}, Restores: kafka.RestoreCounts{Rebuild: 3, Failed: 1}}
	if err := testutil.CollectAndCompare(New(src), strings.NewReader(want), groupNames...); err != nil {
		t.Error(err)
	}
}

// A partition listed twice does not fail the scrape (a registry refuses two
// series with the same labels): it is reported once.
func TestPartitionListedTwice(t *testing.T) {
	p := kafka.PartitionStatus{Partition: 1, State: kafka.PartitionActive, Committed: 5}
	src := fixed{Partitions: []kafka.PartitionStatus{p, p}}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(New(src))
	if _, err := reg.Gather(); err != nil {
		t.Fatalf("scrape with a partition listed twice: %v", err)
	}
	if got := gather(t, src); got["outboxd_kafka_partitions_owned"] != 1 {
		t.Errorf("partitions_owned = %v, want 1", got["outboxd_kafka_partitions_owned"])
	}
}
