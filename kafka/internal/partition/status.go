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

// Status describes one owned partition; package kafka's PartitionStatus
// documents each field.
type Status struct {
	Partition  int
	State      string
	Generation int32
	Epoch      int64
	Restore    RestoreStatus
	Committed  int64
	Pending    int
	Dead       int
	Error      string
}

// RestoreStatus is how far the restore of one partition's store has come;
// package kafka's RestoreStatus documents each field.
type RestoreStatus struct {
	Mode      string
	From      int64
	To        int64
	Records   int64
	Remaining int64
	Rate      float64
	Fenced    int64
	Duration  time.Duration
	Done      bool
}

// StandbyStatus describes one standby; package kafka's StandbyStatus
// documents each field.
type StandbyStatus struct {
	Partition  int
	State      string
	Generation int32
	Mode       string
	Applied    int64
	End        int64
	Lag        int64
	Records    int64
	Fenced     int64
	Error      string
}
