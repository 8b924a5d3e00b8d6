// Package kafkaprom exports the figures of a kafka.Runner to Prometheus. It is
// kept out of package kafka so that a user of kafka who does not use
// Prometheus does not import it.
package kafkaprom

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/outboxd/outbox/kafka"
)

// Source is what a Collector reads: a *kafka.Runner.
type Source interface {
	Metrics() kafka.Metrics
}

// Collector is a prometheus.Collector for one Runner. Metrics (namespace
// "outboxd_kafka"); the ingest ones only when ingest is on, the changelog ones
// only when shipping is on:
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
type Collector struct {
	src Source

	records, enqueued, dead, unstorable, enqueueErrors, fetchErrors  *prometheus.Desc
	commits, commitErrors, generations, groupErrors, ready, assigned *prometheus.Desc
	shipped, shipErrors, shippedLSN, lagLSNs, lagSeconds             *prometheus.Desc
}

// New returns a Collector reading src (a *kafka.Runner).
func New(src Source) *Collector {
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc("outboxd_kafka_"+name, help, nil, nil)
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
	}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.records, c.enqueued, c.dead, c.unstorable, c.enqueueErrors,
		c.fetchErrors, c.commits, c.commitErrors, c.generations, c.groupErrors, c.ready, c.assigned,
		c.shipped, c.shipErrors, c.shippedLSN, c.lagLSNs, c.lagSeconds} {
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
}

var _ Source = (*kafka.Runner)(nil)
