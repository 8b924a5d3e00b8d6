package partition

import "time"

// Task states, as Status.State reports them. Package kafka exports the
// same values (PartitionRestoring, ...).
const (
	// Restoring: the store is being opened, caught up from its checkpoint
	// or rebuilt from the changelog; nothing of the partition is ingested
	// or delivered yet.
	Restoring = "restoring"
	// Active: the store is restored; the partition is ingested and its
	// events delivered.
	Active = "active"
	// HandingOver: the partition is being revoked: deliveries finish, the
	// changelog is shipped, offsets are committed.
	HandingOver = "handing-over"
	// Failed: the last restore failed; it is retried with backoff and
	// nothing is delivered from the partial store.
	Failed = "failed"
)

// Restore modes, as RestoreStatus.Mode and StandbyStatus.Mode report them.
const (
	// ModeCheckpoint: the kept local store was caught up from its
	// checkpoint.
	ModeCheckpoint = "checkpoint"
	// ModeRebuild: the store was rebuilt from the whole changelog
	// partition.
	ModeRebuild = "rebuild"
)

// Standby states, as StandbyStatus.State reports them.
const (
	// StandbyOpening: the store is being opened.
	StandbyOpening = "opening"
	// StandbyTailing: the store applies the changelog partition as it
	// grows.
	StandbyTailing = "tailing"
	// StandbyFailed: the last attempt failed; it is retried with backoff.
	StandbyFailed = "failed"
	// StandbyStopped: the generation ended; the store is closed.
	StandbyStopped = "stopped"
)

// Status describes one owned partition (package kafka's PartitionStatus).
type Status struct {
	// Partition is the partition of the ingest and changelog topics.
	Partition int
	// State is Restoring, Active, HandingOver or Failed.
	State string
	// Generation is the group generation the partition was assigned in.
	Generation int32
	// Epoch is the fencing epoch this owner writes.
	Epoch int64
	// Restore describes the restore of this ownership.
	Restore RestoreStatus
	// Committed is the last input offset committed, -1 when none was.
	Committed int64
	// Pending and Dead count the events in the store.
	Pending, Dead int
	// Error is why the last restore failed (Failed), else "".
	Error string
}

// RestoreStatus is how far the restore of one partition's store has come
// (package kafka's RestoreStatus).
type RestoreStatus struct {
	// Mode is ModeCheckpoint or ModeRebuild ("" before it started).
	Mode string
	// From is the changelog offset the restore started at, To the end
	// offset it reads up to.
	From, To int64
	// Records is the number of records applied so far, Remaining the
	// offsets left to read.
	Records, Remaining int64
	// Rate is the records applied per second so far.
	Rate float64
	// Fenced is the number of records skipped as a fenced owner's.
	Fenced int64
	// Duration is how long the restore took (so far, while it runs).
	Duration time.Duration
	// Done reports whether the restore finished.
	Done bool
}

// StandbyStatus describes one standby (package kafka's StandbyStatus).
type StandbyStatus struct {
	// Partition is the partition of the ingest and changelog topics.
	Partition int
	// State is StandbyOpening, StandbyTailing, StandbyFailed or
	// StandbyStopped.
	State string
	// Generation is the group generation the standby was assigned in.
	Generation int32
	// Mode is how the standby started: ModeCheckpoint or ModeRebuild.
	Mode string
	// Applied is the changelog offset the store holds every record below;
	// End the partition's end offset as last seen; Lag is End - Applied.
	Applied, End, Lag int64
	// Records is the number of records applied in this generation, Fenced
	// those skipped as a fenced owner's.
	Records, Fenced int64
	// Error is why the last attempt failed (StandbyFailed), else "".
	Error string
}
