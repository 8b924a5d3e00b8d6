package kafka

import (
	"testing"

	"github.com/outboxd/outbox/kafka/internal/changelog"
	"github.com/outboxd/outbox/kafka/internal/partition"
)

// The exported state and mode names are those the partition tasks and
// standbys report.
func TestStatusNamesAreThoseThePartitionsReport(t *testing.T) {
	for _, c := range []struct{ exported, internal string }{
		{PartitionRestoring, partition.Restoring}, {PartitionActive, partition.Active},
		{PartitionHandingOver, partition.HandingOver}, {PartitionFailed, partition.Failed},
		{RestoreCheckpoint, partition.ModeCheckpoint}, {RestoreRebuild, partition.ModeRebuild},
		{StandbyOpening, partition.StandbyOpening}, {StandbyTailing, partition.StandbyTailing},
		{StandbyFailed, partition.StandbyFailed}, {StandbyStopped, partition.StandbyStopped},
	} {
		if c.exported != c.internal {
			t.Errorf("exported %q, reported %q", c.exported, c.internal)
		}
	}
}

// The exported header names are those of the records the changelog codec
// writes and reads.
func TestHeaderNamesAreTheCodecs(t *testing.T) {
	for _, c := range []struct{ exported, internal string }{
		{HeaderOp, changelog.HeaderOp}, {HeaderLSN, changelog.HeaderLSN},
		{HeaderEpoch, changelog.HeaderEpoch}, {HeaderGeneration, changelog.HeaderGeneration},
	} {
		if c.exported != c.internal {
			t.Errorf("exported %q, written %q", c.exported, c.internal)
		}
	}
}
