// Package kafkaprom exports the figures of a kafka.Runner (or, in group
// mode, of a kafka.Group) to Prometheus. It is
// kept out of package kafka so that a user of kafka who does not use
// Prometheus does not import it.
package kafkaprom

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/outboxd/outbox/kafka"
)

// Source is what a Collector reads: a *kafka.Runner, or a *kafka.Group in
// group mode.
type Source interface {
	Metrics() kafka.Metrics
}

// Collector is a prometheus.Collector for one Runner or Group. Metrics
// (namespace "outboxd_kafka"); the ingest ones only when ingest is on, the
// changelog ones only when shipping is on, the partition ones only in group
// mode (Metrics.Partitions not nil):
//
//	outboxd_kafka_ingest_records_total          counter  records consumed
//	outboxd_kafka_ingest_enqueued_total         counter  stored pending (duplicates included)
//	outboxd_kafka_ingest_dead_total             counter  stored as dead letters
//	outboxd_kafka_ingest_unstorable_total       counter  refused even as dead letters
//	outboxd_kafka_ingest_enqueue_errors_total   counter  failed enqueues (retried)
//	outboxd_kafka_ingest_fetch_errors_total     counter  errors fetching
//	outboxd_kafka_ingest_commits_total          counter  offset commits
//	outboxd_kafka_ingest_commit_errors_total    counter  failed offset commits
//	outboxd_kafka_ingest_generations_total      counter  group generations joined
//	outboxd_kafka_ingest_group_errors_total     counter  failures to join the group
//	outboxd_kafka_ingest_assigned_partitions    gauge    partitions assigned here
//	outboxd_kafka_ingest_ready                  gauge    1 when Runner.Ready (always present)
//	outboxd_kafka_changelog_shipped_total       counter  entries shipped and acknowledged
//	outboxd_kafka_changelog_ship_errors_total   counter  failed attempts to ship
//	outboxd_kafka_changelog_shipped_lsn         gauge    last LSN acknowledged
//	outboxd_kafka_changelog_lag_lsns            gauge    entries not yet shipped
//	outboxd_kafka_changelog_lag_seconds         gauge    age of the oldest of them
//	outboxd_kafka_partitions_owned              gauge    partitions this instance owns
//	outboxd_kafka_partition_state{partition,state}
//	                                            gauge    1 for the partition's state, 0 for the others
//	outboxd_kafka_partition_restore_records{partition}
//	                                            gauge    changelog records its restore applied
//	outboxd_kafka_partition_restore_remaining{partition}
//	                                            gauge    changelog offsets its restore has left
//	outboxd_kafka_partition_restore_records_per_second{partition}
//	                                            gauge    its restore's rate
//	outboxd_kafka_partition_pending{partition}  gauge    pending events in its store
//	outboxd_kafka_partition_dead{partition}     gauge    dead letters in its store
//	outboxd_kafka_partition_committed_offset{partition}
//	                                            gauge    last input offset committed (absent before the first)
//	outboxd_kafka_restores_total{mode}          counter  restores finished, mode checkpoint or rebuild
//	outboxd_kafka_restore_failures_total        counter  restores that failed
//	outboxd_kafka_standbys                      gauge    standby copies this instance keeps
//	outboxd_kafka_standby_state{partition,state}
//	                                            gauge    1 for the standby's state, 0 for the others
//	outboxd_kafka_standby_applied_offset{partition}
//	                                            gauge    changelog offset its store holds everything below
//	outboxd_kafka_standby_lag{partition}        gauge    changelog records it has not applied yet
//	outboxd_kafka_standby_failures_total        counter  standby attempts that failed (retried)
//
// The states are those of kafka.PartitionStatus.State: restoring, active,
// handing-over and failed; a partition has a series for each, so that
// sum by (state) counts the partitions in each state and a state that ends
// reads 0 rather than vanishing. The standby states are those of
// kafka.StandbyStatus.State (opening, tailing, failed, stopped), likewise.
type Collector struct {
	src Source

	records, enqueued, dead, unstorable, enqueueErrors, fetchErrors  *prometheus.Desc
	commits, commitErrors, generations, groupErrors, ready, assigned *prometheus.Desc
	shipped, shipErrors, shippedLSN, lagLSNs, lagSeconds             *prometheus.Desc

	owned, partState, restoreRecords, restoreRemaining, restoreRate *prometheus.Desc
	partPending, partDead, partCommitted, restores, restoreFailures *prometheus.Desc

	standbys, standbyState, standbyApplied, standbyLag, standbyFailures *prometheus.Desc
}

// standbyStates are the states standby_state has a series for, in order.
var standbyStates = []string{kafka.StandbyOpening, kafka.StandbyTailing, kafka.StandbyFailed, kafka.StandbyStopped}

// partitionStates are the states partition_state has a series for, in
// order.
var partitionStates = []string{kafka.PartitionRestoring, kafka.PartitionActive, kafka.PartitionHandingOver, kafka.PartitionFailed}

// New returns a Collector reading src (a *kafka.Runner).
func New(src Source) *Collector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("outboxd_kafka_"+name, help, labels, nil)
	}
	return &Collector{
		src:           src,
		records:       d("ingest_records_total", "Records consumed from the ingest topic."),
		enqueued:      d("ingest_enqueued_total", "Ingested records stored as pending events (duplicates included)."),
		dead:          d("ingest_dead_total", "Ingested records stored as dead letters because they could not be mapped or were refused."),
		unstorable:    d("ingest_unstorable_total", "Ingested records the outbox refused even as bare dead letters (logged, passed over)."),
		enqueueErrors: d("ingest_enqueue_errors_total", "Failed enqueues of ingested batches (each is retried; commits wait for it)."),
		fetchErrors:   d("ingest_fetch_errors_total", "Errors fetching from the ingest topic."),
		commits:       d("ingest_commits_total", "Successful offset commits."),
		commitErrors:  d("ingest_commit_errors_total", "Failed offset commits."),
		generations:   d("ingest_generations_total", "Consumer group generations joined (rebalances)."),
		groupErrors:   d("ingest_group_errors_total", "Failures to join the consumer group."),
		ready:         d("ingest_ready", "1 when ingest is connected to its consumer group (or off), 0 otherwise."),
		assigned:      d("ingest_assigned_partitions", "Partitions of the ingest topic assigned to this instance."),
		shipped:       d("changelog_shipped_total", "Changelog entries produced to the changelog topic and acknowledged."),
		shipErrors:    d("changelog_ship_errors_total", "Failed attempts to ship changelog entries."),
		shippedLSN:    d("changelog_shipped_lsn", "Last changelog LSN acknowledged by the changelog topic."),
		lagLSNs:       d("changelog_lag_lsns", "Changelog entries written but not yet shipped."),
		lagSeconds:    d("changelog_lag_seconds", "Age of the oldest changelog entry not yet shipped, in seconds."),

		owned:            d("partitions_owned", "Partitions of the input topic this instance owns (group mode)."),
		partState:        d("partition_state", "1 for the owned partition's state (restoring, active, handing-over, failed), 0 for the others.", "partition", "state"),
		restoreRecords:   d("partition_restore_records", "Changelog records applied by the restore of the partition's store.", "partition"),
		restoreRemaining: d("partition_restore_remaining", "Changelog offsets the restore of the partition's store has left to read.", "partition"),
		restoreRate:      d("partition_restore_records_per_second", "Changelog records applied per second by the restore of the partition's store.", "partition"),
		partPending:      d("partition_pending", "Pending events in the partition's store (0 while it restores).", "partition"),
		partDead:         d("partition_dead", "Dead letters in the partition's store (0 while it restores).", "partition"),
		partCommitted:    d("partition_committed_offset", "Last input offset this instance committed for the partition (absent before the first).", "partition"),
		restores:         d("restores_total", "Restores of partition stores finished, by mode: checkpoint (caught up from a kept store) or rebuild (from the whole changelog).", "mode"),
		restoreFailures:  d("restore_failures_total", "Restores of partition stores that failed."),

		standbys:        d("standbys", "Standby copies of partition stores this instance keeps (group mode with standby replicas)."),
		standbyState:    d("standby_state", "1 for the standby's state (opening, tailing, failed, stopped), 0 for the others.", "partition", "state"),
		standbyApplied:  d("standby_applied_offset", "Changelog offset below which the standby store holds every record.", "partition"),
		standbyLag:      d("standby_lag", "Changelog records of the partition the standby store has not applied yet.", "partition"),
		standbyFailures: d("standby_failures_total", "Standby attempts that failed (each is retried)."),
	}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.records, c.enqueued, c.dead, c.unstorable, c.enqueueErrors,
		c.fetchErrors, c.commits, c.commitErrors, c.generations, c.groupErrors, c.ready, c.assigned,
		c.shipped, c.shipErrors, c.shippedLSN, c.lagLSNs, c.lagSeconds,
		c.owned, c.partState, c.restoreRecords, c.restoreRemaining, c.restoreRate,
		c.partPending, c.partDead, c.partCommitted, c.restores, c.restoreFailures,
		c.standbys, c.standbyState, c.standbyApplied, c.standbyLag, c.standbyFailures} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	m := c.src.Metrics()
	counter := func(d *prometheus.Desc, v uint64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v))
	}
	gauge := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v)
	}
	if in := m.Ingest; in != nil {
		counter(c.records, in.Records)
		counter(c.enqueued, in.Enqueued)
		counter(c.dead, in.Dead)
		counter(c.unstorable, in.Unstorable)
		counter(c.enqueueErrors, in.EnqueueErrors)
		counter(c.fetchErrors, in.FetchErrors)
		counter(c.commits, in.Commits)
		counter(c.commitErrors, in.CommitErrors)
		counter(c.generations, in.Generations)
		counter(c.groupErrors, in.GroupErrors)
		gauge(c.assigned, float64(in.AssignedPartitions))
	}
	ready := 0.0
	if m.Ready {
		ready = 1
	}
	gauge(c.ready, ready)
	if sh := m.Shipping; sh != nil {
		counter(c.shipped, sh.Shipped)
		counter(c.shipErrors, sh.ShipErrors)
		gauge(c.shippedLSN, float64(sh.ShippedLSN))
		gauge(c.lagLSNs, float64(sh.LagEntries))
		gauge(c.lagSeconds, sh.LagAge.Seconds())
	}
	if m.Partitions != nil {
		c.collectPartitions(ch, m)
	}
}

// collectPartitions sends the group mode figures of m.
func (c *Collector) collectPartitions(ch chan<- prometheus.Metric, m kafka.Metrics) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	seen := make(map[int]bool, len(m.Partitions))
	for _, p := range m.Partitions {
		if seen[p.Partition] {
			continue // a second series of one partition would fail the whole scrape
		}
		seen[p.Partition] = true
		part := strconv.Itoa(p.Partition)
		sendState(ch, c.partState, part, partitionStates, p.State)
		gauge(c.restoreRecords, float64(p.Restore.Records), part)
		gauge(c.restoreRemaining, float64(p.Restore.Remaining), part)
		gauge(c.restoreRate, p.Restore.Rate, part)
		gauge(c.partPending, float64(p.Pending), part)
		gauge(c.partDead, float64(p.Dead), part)
		if p.Committed >= 0 {
			gauge(c.partCommitted, float64(p.Committed), part)
		}
	}
	gauge(c.owned, float64(len(seen)))
	counter(c.restores, m.Restores.Checkpoint, kafka.RestoreCheckpoint)
	counter(c.restores, m.Restores.Rebuild, kafka.RestoreRebuild)
	counter(c.restoreFailures, m.Restores.Failed)
	c.collectStandbys(ch, m)
}

// sendState sends the state series d of partition part: 1 for state, 0 for
// each other of the known states, and a 1 for state when it is none of them
// (a state this collector does not know yet is still shown).
func sendState(ch chan<- prometheus.Metric, d *prometheus.Desc, part string, states []string, state string) {
	known := false
	for _, st := range states {
		v := 0.0
		if state == st {
			v, known = 1, true
		}
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, part, st)
	}
	if !known && state != "" {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, 1, part, state)
	}
}

// collectStandbys sends the figures of m's standby copies.
func (c *Collector) collectStandbys(ch chan<- prometheus.Metric, m kafka.Metrics) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	seen := make(map[int]bool, len(m.Standbys))
	for _, s := range m.Standbys {
		if seen[s.Partition] {
			continue // a second series of one partition would fail the whole scrape
		}
		seen[s.Partition] = true
		part := strconv.Itoa(s.Partition)
		sendState(ch, c.standbyState, part, standbyStates, s.State)
		gauge(c.standbyApplied, float64(s.Applied), part)
		gauge(c.standbyLag, float64(s.Lag), part)
	}
	gauge(c.standbys, float64(len(seen)))
	ch <- prometheus.MustNewConstMetric(c.standbyFailures, prometheus.CounterValue, float64(m.StandbyFailures))
}

var _ Source = (*kafka.Runner)(nil)
