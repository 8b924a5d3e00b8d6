package kafka

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the Runner's counters, read by its collector.
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
	shipped       atomic.Uint64
	shipErrors    atomic.Uint64
}

// collector exposes a Runner's metrics to Prometheus.
type collector struct {
	r *Runner

	records, enqueued, dead, unstorable, enqueueErrors, fetchErrors  *prometheus.Desc
	commits, commitErrors, generations, groupErrors, ready, assigned *prometheus.Desc
	shipped, shipErrors, shippedLSN, lagLSNs, lagSeconds             *prometheus.Desc
}

func newCollector(r *Runner) *collector {
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc("outboxd_kafka_"+name, help, nil, nil)
	}
	return &collector{
		r:             r,
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
func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.records, c.enqueued, c.dead, c.unstorable, c.enqueueErrors,
		c.fetchErrors, c.commits, c.commitErrors, c.generations, c.groupErrors, c.ready, c.assigned,
		c.shipped, c.shipErrors, c.shippedLSN, c.lagLSNs, c.lagSeconds} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	m := c.r.met
	counter := func(d *prometheus.Desc, v uint64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v))
	}
	gauge := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v)
	}
	if c.r.in != nil {
		counter(c.records, m.records.Load())
		counter(c.enqueued, m.enqueued.Load())
		counter(c.dead, m.dead.Load())
		counter(c.unstorable, m.unstorable.Load())
		counter(c.enqueueErrors, m.enqueueErrors.Load())
		counter(c.fetchErrors, m.fetchErrors.Load())
		counter(c.commits, m.commits.Load())
		counter(c.commitErrors, m.commitErrors.Load())
		counter(c.generations, m.generations.Load())
		counter(c.groupErrors, m.groupErrors.Load())
		gauge(c.assigned, float64(c.r.in.assigned.Load()))
	}
	ready := 0.0
	if c.r.Ready() {
		ready = 1
	}
	gauge(c.ready, ready)
	if c.r.sh != nil {
		counter(c.shipped, m.shipped.Load())
		counter(c.shipErrors, m.shipErrors.Load())
		gauge(c.shippedLSN, float64(c.r.sh.shipped.Load()))
		lsns, secs := c.r.sh.lag()
		gauge(c.lagLSNs, float64(lsns))
		gauge(c.lagSeconds, secs)
	}
}
