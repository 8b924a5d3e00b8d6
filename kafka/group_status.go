package kafka

import (
	"slices"
	"sync"
	"time"

	"github.com/outboxd/outbox/kafka/internal/partition"
)

// sortedStatuses returns the status of each of the values of the map *m,
// sorted by the partition it names. The map is read under mu, which guards
// it, and its values are asked for their status outside it (each guards
// its own).
func sortedStatuses[T any, S any](mu *sync.Mutex, m *map[int]T, status func(T) S, partition func(S) int) []S {
	mu.Lock()
	vs := make([]T, 0, len(*m))
	for _, v := range *m {
		vs = append(vs, v)
	}
	mu.Unlock()
	out := make([]S, 0, len(vs))
	for _, v := range vs {
		out = append(out, status(v))
	}
	slices.SortFunc(out, func(a, b S) int { return partition(a) - partition(b) })
	return out
}

// Partition task states, as PartitionStatus.State reports them.
const (
	// PartitionRestoring: the partition is assigned and its store is being
	// opened, caught up from its checkpoint or rebuilt from the changelog;
	// nothing of it is ingested or delivered yet.
	PartitionRestoring = "restoring"
	// PartitionActive: the store is restored; the partition is ingested and
	// its events delivered.
	PartitionActive = "active"
	// PartitionHandingOver: the partition is being revoked: deliveries
	// finish, the changelog is shipped, offsets are committed.
	PartitionHandingOver = "handing-over"
	// PartitionFailed: the last restore failed (Error says why); it is
	// retried with backoff and nothing is delivered from the partial store.
	PartitionFailed = "failed"
)

// Restore modes, as RestoreStatus.Mode reports them.
const (
	// RestoreCheckpoint: the local store was kept from an earlier ownership
	// and was caught up from its checkpoint to the end of its changelog
	// partition.
	RestoreCheckpoint = "checkpoint"
	// RestoreRebuild: there was no usable local store; it was rebuilt from
	// the whole changelog partition.
	RestoreRebuild = "rebuild"
)

// PartitionStatus describes one partition this instance owns.
type PartitionStatus struct {
	// Partition is the partition of the ingest topic (and of the changelog
	// topic: they are co-partitioned).
	Partition int `json:"partition"`
	// State is PartitionRestoring, PartitionActive, PartitionHandingOver or
	// PartitionFailed.
	State string `json:"state"`
	// Generation is the consumer group generation the partition was
	// assigned in.
	Generation int32 `json:"generation"`
	// Epoch is the fencing epoch this owner writes to the changelog.
	Epoch int64 `json:"epoch"`
	// Restore describes the restore of this ownership.
	Restore RestoreStatus `json:"restore"`
	// Committed is the last input offset committed for the partition, -1
	// when none was committed by this instance.
	Committed int64 `json:"committed_offset"`
	// Pending and Dead count the events in the partition's store (0 while
	// it is restoring).
	Pending int `json:"pending"`
	Dead    int `json:"dead"`
	// Error is why the last restore failed (PartitionFailed), else "".
	Error string `json:"error,omitempty"`
}

// RestoreStatus is how far the restore of one partition's store has come.
type RestoreStatus struct {
	// Mode is RestoreCheckpoint or RestoreRebuild ("" before it started).
	Mode string `json:"mode"`
	// From is the changelog offset the restore started at (the checkpoint,
	// or the partition's first offset for a rebuild); To the end offset it
	// reads up to.
	From int64 `json:"from_offset"`
	To   int64 `json:"to_offset"`
	// Records is the number of changelog records applied so far; Remaining
	// the offsets left to read.
	Records   int64 `json:"records"`
	Remaining int64 `json:"remaining"`
	// Rate is the records applied per second so far.
	Rate float64 `json:"records_per_second"`
	// Fenced is the number of records skipped because an older epoch wrote
	// them after a newer one (a zombie's writes).
	Fenced int64 `json:"fenced"`
	// Duration is how long the restore took (so far, while it runs).
	Duration time.Duration `json:"duration_ns"`
	// Done reports whether the restore finished.
	Done bool `json:"done"`
}

// GroupHealth is the state of this instance's membership of the consumer
// group, for readiness checks.
type GroupHealth struct {
	// Joined reports whether this instance is a member of the group's
	// current generation.
	Joined bool
	// Generation is the current generation (0 when not joined).
	Generation int32
	// Err is why the instance cannot take part in the group (brokers
	// unreachable, a refused join, a changelog topic that does not fit),
	// nil while it is joined or joining normally (a rebalance under way).
	Err error
	// Restoring and Failed count the assigned partitions still restoring
	// and those whose last restore failed.
	Restoring, Failed int
}

// partitionStatus is the exported form of a task's status.
func partitionStatus(s partition.Status) PartitionStatus {
	return PartitionStatus{Partition: s.Partition, State: s.State, Generation: s.Generation, Epoch: s.Epoch,
		Restore: RestoreStatus(s.Restore), Committed: s.Committed, Pending: s.Pending, Dead: s.Dead, Error: s.Error}
}
