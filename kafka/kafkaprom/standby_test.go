package kafkaprom

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/outboxd/outbox/kafka"
)

var standbyNames = []string{"outboxd_kafka_standbys", "outboxd_kafka_standby_state", "outboxd_kafka_standby_applied_offset",
	"outboxd_kafka_standby_lag", "outboxd_kafka_standby_failures_total"}

// In group mode, each standby copy reports its state, how far it applied
// its changelog partition and how far behind it is; a Runner has none of
// these.
func TestStandbyFigures(t *testing.T) {
	src := fixed{
		Partitions: []kafka.PartitionStatus{},
		Standbys: []kafka.StandbyStatus{
			{Partition: 1, State: kafka.StandbyTailing, Applied: 900, End: 1000, Lag: 100},
			{Partition: 4, State: kafka.StandbyFailed, Applied: 30, End: 30},
			{Partition: 4, State: kafka.StandbyFailed, Applied: 30, End: 30}, // listed twice: reported once
		},
		StandbyFailures: 3,
	}
	want := `
# HELP outboxd_kafka_standbys Standby copies of partition stores this instance keeps (group mode with standby replicas).
# TYPE outboxd_kafka_standbys gauge
outboxd_kafka_standbys 2
# HELP outboxd_kafka_standby_state 1 for the standby's state (opening, tailing, failed, stopped), 0 for the others.
# TYPE outboxd_kafka_standby_state gauge
outboxd_kafka_standby_state{partition="1",state="failed"} 0
outboxd_kafka_standby_state{partition="1",state="opening"} 0
outboxd_kafka_standby_state{partition="1",state="stopped"} 0
outboxd_kafka_standby_state{partition="1",state="tailing"} 1
outboxd_kafka_standby_state{partition="4",state="failed"} 1
outboxd_kafka_standby_state{partition="4",state="opening"} 0
outboxd_kafka_standby_state{partition="4",state="stopped"} 0
outboxd_kafka_standby_state{partition="4",state="tailing"} 0
# HELP outboxd_kafka_standby_applied_offset Changelog offset below which the standby store holds every record.
# TYPE outboxd_kafka_standby_applied_offset gauge
outboxd_kafka_standby_applied_offset{partition="1"} 900
outboxd_kafka_standby_applied_offset{partition="4"} 30
# HELP outboxd_kafka_standby_lag Changelog records of the partition the standby store has not applied yet.
# TYPE outboxd_kafka_standby_lag gauge
outboxd_kafka_standby_lag{partition="1"} 100
outboxd_kafka_standby_lag{partition="4"} 0
# HELP outboxd_kafka_standby_failures_total Standby attempts that failed (each is retried).
# TYPE outboxd_kafka_standby_failures_total counter
outboxd_kafka_standby_failures_total 3
`
	if err := testutil.CollectAndCompare(New(src), strings.NewReader(want), standbyNames...); err != nil {
		t.Error(err)
	}
	if problems, err := testutil.CollectAndLint(New(src)); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
	if n := testutil.CollectAndCount(New(fixed{Ready: true, Ingest: &kafka.IngestMetrics{}}), standbyNames...); n != 0 {
		t.Errorf("%d standby samples from a Runner, want none", n)
	}
}
