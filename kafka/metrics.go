package kafka

import (
	"sync/atomic"
	"time"

	"github.com/outboxd/outbox/kafka/internal/ship"
)

// metrics are the Runner's counters, read by Metrics.
type metrics struct {
	records       atomic.Uint64 // consumed
	enqueued      atomic.Uint64 // stored pending
	dead          atomic.Uint64 // stored as dead letters
	unstorable    atomic.Uint64 // refused even as dead letters
	enqueueErrors atomic.Uint64
	fetchErrors   atomic.Uint64
	commits       atomic.Uint64
	commitErrors  atomic.Uint64
	generations   atomic.Uint64
	groupErrors   atomic.Uint64
	shipping      ship.Counts
}

// Metrics is a snapshot of a Runner's counters and gauges, for an exporter
// such as kafka/kafkaprom. Counters count from Start.
type Metrics struct {
	// Ready is Runner.Ready at the time of the snapshot.
	Ready bool
	// Ingest holds the ingest figures; nil when ingest is off.
	Ingest *IngestMetrics
	// Shipping holds the changelog shipping figures; nil when shipping is
	// off.
	Shipping *ShippingMetrics
	// Partitions describes the partitions this instance owns in group mode,
	// sorted by partition: nil outside group mode, empty (not nil) in group
	// mode while it owns none.
	Partitions []PartitionStatus
	// Restores counts the restores of partition stores since start (zero
	// outside group mode).
	Restores RestoreCounts
	// Standbys describes the standby copies this instance keeps
	// (Config.StandbyReplicas), sorted by partition: nil outside group
	// mode, empty (not nil) in group mode while it keeps none.
	Standbys []StandbyStatus
	// StandbyFailures is the number of standby attempts that failed (each
	// is retried).
	StandbyFailures uint64
}

// RestoreCounts count the restores of partition stores since start.
type RestoreCounts struct {
	// Checkpoint is the number of restores finished from a checkpoint.
	Checkpoint uint64
	// Rebuild is the number of rebuilds from the changelog finished.
	Rebuild uint64
	// Failed is the number of restores that failed.
	Failed uint64
}

// IngestMetrics are the figures of ingest from the ingest topic.
type IngestMetrics struct {
	// Records is the number of records consumed.
	Records uint64
	// Enqueued is the number of records stored as pending events
	// (duplicates included).
	Enqueued uint64
	// Dead is the number of records stored as dead letters because they
	// could not be mapped or were refused.
	Dead uint64
	// Unstorable is the number of records the outbox refused even as bare
	// dead letters (logged, passed over).
	Unstorable uint64
	// EnqueueErrors is the number of failed enqueues of batches (each is
	// retried; commits wait for it).
	EnqueueErrors uint64
	// FetchErrors is the number of errors fetching from the topic.
	FetchErrors uint64
	// Commits and CommitErrors count offset commits that succeeded and
	// failed.
	Commits, CommitErrors uint64
	// Generations is the number of consumer group generations joined
	// (rebalances); GroupErrors the failures to join the group.
	Generations, GroupErrors uint64
	// AssignedPartitions is the number of partitions assigned to this
	// instance now.
	AssignedPartitions int
}

// ShippingMetrics are the figures of changelog shipping.
type ShippingMetrics struct {
	// Shipped is the number of changelog entries produced and
	// acknowledged; ShipErrors the failed attempts to ship.
	Shipped, ShipErrors uint64
	// ShippedLSN is the last LSN acknowledged by the changelog topic.
	ShippedLSN uint64
	// LagEntries is the number of changelog entries written but not yet
	// shipped; LagAge the age of the oldest of them (zero when caught up).
	LagEntries uint64
	LagAge     time.Duration
}

// Metrics returns a snapshot of the Runner's figures.
func (r *Runner) Metrics() Metrics {
	m := r.met
	out := Metrics{Ready: r.Ready()}
	if r.in != nil {
		out.Ingest = m.ingest(int(r.in.assigned.Load()))
	}
	if r.sh != nil {
		lsns, secs := r.sh.Lag()
		out.Shipping = &ShippingMetrics{
			Shipped:    m.shipping.Shipped.Load(),
			ShipErrors: m.shipping.Errors.Load(),
			ShippedLSN: r.sh.Shipped(),
			LagEntries: lsns,
			LagAge:     time.Duration(secs * float64(time.Second)),
		}
	}
	return out
}

// ingest returns the ingest figures, with assigned partitions now.
func (m *metrics) ingest(assigned int) *IngestMetrics {
	return &IngestMetrics{
		Records:            m.records.Load(),
		Enqueued:           m.enqueued.Load(),
		Dead:               m.dead.Load(),
		Unstorable:         m.unstorable.Load(),
		EnqueueErrors:      m.enqueueErrors.Load(),
		FetchErrors:        m.fetchErrors.Load(),
		Commits:            m.commits.Load(),
		CommitErrors:       m.commitErrors.Load(),
		Generations:        m.generations.Load(),
		GroupErrors:        m.groupErrors.Load(),
		AssignedPartitions: assigned,
	}
}
