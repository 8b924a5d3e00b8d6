package outboxprom

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/outboxd/outbox/outbox"
)

// HooksName is the outbox.Hooks.Name of the collector's hooks.
const HooksName = "outboxprom"

// Source is what the Collector's gauges and store counters are read from at
// each scrape: an *outbox.Outbox, or a view over several of them that
// reports them as one (such as the partition stores an instance owns in
// Kafka group mode: counts and commit counters summed, the oldest pending
// age the oldest of all, Health an error when one of them fails).
type Source interface {
	Stats() outbox.Stats
	Health() error
	CommitStats() outbox.CommitStats
}

var _ Source = (*outbox.Outbox)(nil)

// Collector is a prometheus.Collector for an Outbox, or for a Source over
// several. Metrics (namespace "outbox"):
//
//	outbox_enqueued_total                       counter   events stored
//	outbox_duplicates_total                     counter   events enqueued again (dedup)
//	outbox_deliveries_total{endpoint,action}    counter   attempts by the Sink's action
//	outbox_dead_letters_total{endpoint}         counter   events that became dead letters
//	outbox_delivery_duration_seconds{endpoint}  histogram time spent in the Sink per attempt
//	outbox_enqueue_to_delivery_seconds          histogram enqueue to successful delivery
//	outbox_punctuation_duration_seconds         histogram delivery punctuation runs
//	outbox_pending, outbox_dead, outbox_in_flight,
//	outbox_oldest_pending_age_seconds,
//	outbox_endpoints_throttled, outbox_endpoints_disabled,
//	outbox_endpoints_breaker_open               gauges from Stats
//	outbox_unrouted_events                      gauge     topic events kept unrouted (no subscriber yet)
//	outbox_unrouted_dropped_total               counter   topic events dropped for want of a subscriber
//	outbox_backfill_running                     gauge     1 while kept unrouted events are routed to new subscriptions
//	outbox_backfill_routed_total                counter   unrouted events the backfill routed
//	outbox_backfill_deliveries_total            counter   deliveries the backfill made of them
//	outbox_breaker_transitions_total{endpoint,state} counter circuit breaker transitions
//	outbox_rate_limited_total{endpoint}         counter   events rescheduled by a rate limit
//	outbox_endpoint_breaker_state{endpoint,state} gauge   1 for the breaker's state (closed, open, half-open)
//	outbox_endpoint_rate_limit{endpoint}        gauge     the endpoint's limit, deliveries per second
//	outbox_endpoint_delivery_rate{endpoint}     gauge     deliveries started per second, recently
//	outbox_store_commits_total                  counter   write transactions of the store
//	outbox_store_commit_failures_total          counter   of them, those that failed
//	outbox_store_commit_calls_total             counter   write calls they carried
//	outbox_store_commit_records_total           counter   records they carried
//	outbox_store_commit_seconds_total           counter   time spent committing (fsync included)
//	outbox_store_commit_running_seconds         gauge     age of the commit under way, 0 when idle
//
// The outbox_endpoint_* gauges are read at each scrape from the Source's
// Endpoints method, when it has one (an *outbox.Outbox and a union View do),
// for every endpoint with a state or a configuration.
//
// The store counters come from store.Store.CommitStats: the mean batch is
// rate(records) / rate(commits), the mean commit time rate(seconds) /
// rate(commits), and a running time that keeps growing means a commit that
// does not return (the disk is not answering) with every write behind it.
//
// Endpoint labels are endpoint names; with raw URL destinations each
// scheme://host:port is one endpoint.
//
// The counters and histograms fed by the hooks count for every Outbox the
// hooks are installed on (in Config.Hooks or with AddHooks), each event
// once: install the same hooks in each of several outboxes and attach a
// Source that sums them for the gauges.
type Collector struct {
	src atomic.Pointer[sourceRef]

	enqueued     prometheus.Counter
	duplicates   prometheus.Counter
	deliveries   *prometheus.CounterVec
	dead         *prometheus.CounterVec
	deliveryDur  *prometheus.HistogramVec
	sinceEnqueue prometheus.Histogram
	punctDur     prometheus.Histogram
	transitions  *prometheus.CounterVec
	rateLimited  *prometheus.CounterVec

	pendingDesc, deadDesc, inFlightDesc, oldestDesc, throttledDesc, disabledDesc, breakerOpenDesc, unavailableDesc *prometheus.Desc
	unroutedDesc, droppedDesc                                                                                      *prometheus.Desc
	backfillRunningDesc, backfillRoutedDesc, backfillDeliveriesDesc                                                *prometheus.Desc

	breakerStateDesc, rateLimitDesc, deliveryRateDesc    *prometheus.Desc
	inFlightLimitDesc, endpointInFlightDesc, latencyDesc *prometheus.Desc

	commitsDesc, commitFailuresDesc, commitCallsDesc, commitRecordsDesc, commitSecondsDesc, commitRunningDesc *prometheus.Desc
}

// New returns a Collector for o and the hooks that feed it. When o is not
// nil the hooks are installed on it (o.AddHooks; installing them again
// replaces them, it does not count twice). With a nil o, put the hooks in the
// Config.Hooks of the Outbox you open (or of each of several) and call
// Attach with it (or AttachSource with a Source over them): the gauges are
// read from what is attached.
func New(o *outbox.Outbox) (*Collector, outbox.Hooks) {
	const ns = "outbox"
	c := &Collector{
		enqueued: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: ns, Name: "enqueued_total", Help: "Events stored by Enqueue, EnqueueDead and Upsert.",
		}),
		duplicates: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: ns, Name: "duplicates_total", Help: "Enqueued events that were already known (pending, dead or recently delivered).",
		}),
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Name: "deliveries_total", Help: "Delivery attempts by endpoint and by the action the sink returned.",
		}, []string{"endpoint", "action"}),
		dead: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Name: "dead_letters_total", Help: "Events that became dead letters after an attempt.",
		}, []string{"endpoint"}),
		deliveryDur: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: ns, Name: "delivery_duration_seconds", Help: "Time spent in the sink per delivery attempt.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2.5, 12),
		}, []string{"endpoint"}),
		sinceEnqueue: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: ns, Name: "enqueue_to_delivery_seconds", Help: "Time from enqueue to successful delivery.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 14),
		}),
		punctDur: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: ns, Name: "punctuation_duration_seconds", Help: "Duration of delivery punctuations.",
			Buckets: prometheus.ExponentialBuckets(0.00005, 3, 12),
		}),
		transitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Name: "breaker_transitions_total", Help: "Transitions of endpoints' circuit breakers, by the state they went to.",
		}, []string{"endpoint", "state"}),
		rateLimited: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Name: "rate_limited_total", Help: "Events rescheduled because their endpoint's rate limit would not let them go yet.",
		}, []string{"endpoint"}),
		breakerOpenDesc:      prometheus.NewDesc(ns+"_endpoints_breaker_open", "Endpoints whose circuit breaker is open or half-open.", nil, nil),
		breakerStateDesc:     prometheus.NewDesc(ns+"_endpoint_breaker_state", "1 for the current state of the endpoint's circuit breaker, 0 for the others.", []string{"endpoint", "state"}, nil),
		rateLimitDesc:        prometheus.NewDesc(ns+"_endpoint_rate_limit", "The endpoint's rate limit, in deliveries started per second.", []string{"endpoint"}, nil),
		deliveryRateDesc:     prometheus.NewDesc(ns+"_endpoint_delivery_rate", "Deliveries started to the endpoint per second, over the last few seconds.", []string{"endpoint"}, nil),
		inFlightLimitDesc:    prometheus.NewDesc(ns+"_endpoint_in_flight_limit", "How many deliveries to the endpoint may be under way at once now (its adaptive limit).", []string{"endpoint"}, nil),
		endpointInFlightDesc: prometheus.NewDesc(ns+"_endpoint_in_flight", "Deliveries to the endpoint under way.", []string{"endpoint"}, nil),
		latencyDesc:          prometheus.NewDesc(ns+"_endpoint_latency_seconds", "Time the endpoint's receiver took to answer, by quantile (0.5, 0.99), over the attempts answered in the last minute.", []string{"endpoint", "quantile"}, nil),
		pendingDesc:          prometheus.NewDesc(ns+"_pending", "Pending events.", nil, nil),
		unroutedDesc:         prometheus.NewDesc(ns+"_unrouted_events", "Topic events kept unrouted: no endpoint subscribes to their topic yet.", nil, nil),
		droppedDesc:          prometheus.NewDesc(ns+"_unrouted_dropped_total", "Topic events dropped because no endpoint subscribed to their topic (Config.Unrouted = drop).", nil, nil),
		deadDesc:             prometheus.NewDesc(ns+"_dead", "Dead letters kept.", nil, nil),
		backfillRunningDesc: prometheus.NewDesc(ns+"_backfill_running",
			"1 while the topic events kept unrouted are routed, in the background, to the subscriptions set after they were stored.", nil, nil),
		backfillRoutedDesc:     prometheus.NewDesc(ns+"_backfill_routed_total", "Topic events kept unrouted that the backfill routed to new subscriptions.", nil, nil),
		backfillDeliveriesDesc: prometheus.NewDesc(ns+"_backfill_deliveries_total", "Deliveries the backfill made of the events it routed (one per subscribed endpoint).", nil, nil),
		inFlightDesc:           prometheus.NewDesc(ns+"_in_flight", "Deliveries in flight.", nil, nil),
		oldestDesc:             prometheus.NewDesc(ns+"_oldest_pending_age_seconds", "Age of the oldest pending event.", nil, nil),
		throttledDesc:          prometheus.NewDesc(ns+"_endpoints_throttled", "Endpoints held by a throttle now.", nil, nil),
		disabledDesc:           prometheus.NewDesc(ns+"_endpoints_disabled", "Disabled endpoints.", nil, nil),
		unavailableDesc: prometheus.NewDesc(ns+"_unavailable", "1 while the outbox cannot do its job (see Outbox.Health), by reason: damaged (the database file) or commit (outcomes cannot be committed).",
			[]string{"reason"}, nil),

		commitsDesc:        prometheus.NewDesc(ns+"_store_commits_total", "Write transactions of the store.", nil, nil),
		commitFailuresDesc: prometheus.NewDesc(ns+"_store_commit_failures_total", "Write transactions of the store that failed.", nil, nil),
		commitCallsDesc:    prometheus.NewDesc(ns+"_store_commit_calls_total", "Write calls carried by the store's transactions.", nil, nil),
		commitRecordsDesc:  prometheus.NewDesc(ns+"_store_commit_records_total", "Records carried by the store's transactions.", nil, nil),
		commitSecondsDesc:  prometheus.NewDesc(ns+"_store_commit_seconds_total", "Time spent in the store's write transactions, fsync included.", nil, nil),
		commitRunningDesc:  prometheus.NewDesc(ns+"_store_commit_running_seconds", "How long the store's write transaction under way has run; 0 when idle.", nil, nil),
	}
	h := c.Hooks()
	if o != nil {
		c.Attach(o)
		o.AddHooks(h)
	}
	return c, h
}

// Attach sets the Outbox whose Stats the gauges report (nil: none, the
// gauges are left out). It may be called at any time; the next scrape reads
// o.
func (c *Collector) Attach(o *outbox.Outbox) {
	if o == nil {
		c.AttachSource(nil)
		return
	}
	c.AttachSource(o)
}

// AttachSource sets the Source the gauges and store counters are read from
// (nil: none, they are left out). It may be called at any time; the next
// scrape reads s. Attach(o) is AttachSource(o).
func (c *Collector) AttachSource(s Source) {
	if s == nil {
		c.src.Store(nil)
		return
	}
	c.src.Store(&sourceRef{s})
}

// sourceRef holds the attached Source for an atomic pointer.
type sourceRef struct{ Source }

// Hooks returns the hooks that feed the collector's counters and histograms.
func (c *Collector) Hooks() outbox.Hooks {
	return outbox.Hooks{
		Name:        HooksName,
		OnEnqueue:   func(n int) { c.enqueued.Add(float64(n)) },
		OnDuplicate: func(n int) { c.duplicates.Add(float64(n)) },
		OnDelivery: func(d outbox.DeliveryInfo) {
			c.deliveries.WithLabelValues(d.Endpoint, d.Action.String()).Inc()
			if d.Dead {
				c.dead.WithLabelValues(d.Endpoint).Inc()
			}
			c.deliveryDur.WithLabelValues(d.Endpoint).Observe(d.Duration.Seconds())
			if d.Action == outbox.ActionSuccess {
				c.sinceEnqueue.Observe(d.SinceEnqueue.Seconds())
			}
		},
		OnPunctuation: func(d time.Duration, _ int) { c.punctDur.Observe(d.Seconds()) },
		OnBreaker: func(b outbox.BreakerChange) {
			c.transitions.WithLabelValues(b.Endpoint, b.State.String()).Inc()
		},
		OnRateLimited: func(endpoint string, n int) { c.rateLimited.WithLabelValues(endpoint).Add(float64(n)) },
	}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	c.enqueued.Describe(ch)
	c.duplicates.Describe(ch)
	c.deliveries.Describe(ch)
	c.dead.Describe(ch)
	c.deliveryDur.Describe(ch)
	c.sinceEnqueue.Describe(ch)
	c.punctDur.Describe(ch)
	c.transitions.Describe(ch)
	c.rateLimited.Describe(ch)
	for _, d := range []*prometheus.Desc{c.pendingDesc, c.unroutedDesc, c.droppedDesc, c.deadDesc,
		c.backfillRunningDesc, c.backfillRoutedDesc, c.backfillDeliveriesDesc, c.inFlightDesc, c.oldestDesc, c.throttledDesc, c.disabledDesc, c.unavailableDesc,
		c.breakerOpenDesc, c.breakerStateDesc, c.rateLimitDesc, c.deliveryRateDesc,
		c.inFlightLimitDesc, c.endpointInFlightDesc, c.latencyDesc,
		c.commitsDesc, c.commitFailuresDesc, c.commitCallsDesc, c.commitRecordsDesc, c.commitSecondsDesc, c.commitRunningDesc} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	c.enqueued.Collect(ch)
	c.duplicates.Collect(ch)
	c.deliveries.Collect(ch)
	c.dead.Collect(ch)
	c.deliveryDur.Collect(ch)
	c.sinceEnqueue.Collect(ch)
	c.punctDur.Collect(ch)
	c.transitions.Collect(ch)
	c.rateLimited.Collect(ch)
	ref := c.src.Load()
	if ref == nil {
		return
	}
	src := ref.Source
	s := src.Stats()
	gauge := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v)
	}
	gauge(c.pendingDesc, float64(s.Pending))
	gauge(c.unroutedDesc, float64(s.Unrouted))
	ch <- prometheus.MustNewConstMetric(c.droppedDesc, prometheus.CounterValue, float64(s.UnroutedDroppedTotal))
	gauge(c.deadDesc, float64(s.Dead))
	c.collectBackfill(ch, s.Backfill)
	gauge(c.inFlightDesc, float64(s.InFlight))
	gauge(c.oldestDesc, s.OldestPendingAge.Seconds())
	gauge(c.throttledDesc, float64(s.EndpointsThrottled))
	gauge(c.disabledDesc, float64(s.EndpointsDisabled))
	gauge(c.breakerOpenDesc, float64(s.EndpointsBreakerOpen))
	if es, ok := src.(endpointSource); ok {
		c.collectEndpoints(ch, es)
	}
	damaged, commit := 0.0, 0.0
	if err := src.Health(); errors.Is(err, outbox.ErrDamaged) {
		damaged = 1
	} else if err != nil {
		commit = 1
	}
	ch <- prometheus.MustNewConstMetric(c.unavailableDesc, prometheus.GaugeValue, damaged, "damaged")
	ch <- prometheus.MustNewConstMetric(c.unavailableDesc, prometheus.GaugeValue, commit, "commit")

	cs := src.CommitStats()
	counter := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v)
	}
	counter(c.commitsDesc, float64(cs.Commits))
	counter(c.commitFailuresDesc, float64(cs.Failed))
	counter(c.commitCallsDesc, float64(cs.Calls))
	counter(c.commitRecordsDesc, float64(cs.Records))
	counter(c.commitSecondsDesc, cs.Busy.Seconds())
	gauge(c.commitRunningDesc, cs.Running.Seconds())
}

// endpointSource is a Source that lists its endpoints' states.
type endpointSource interface {
	Endpoints(ctx context.Context) ([]outbox.EndpointState, error)
}

// collectEndpoints reports the per-endpoint gauges.
func (c *Collector) collectEndpoints(ch chan<- prometheus.Metric, src endpointSource) {
	eps, err := src.Endpoints(context.Background())
	if err != nil {
		return // closed or failing: Health reports it
	}
	for _, ep := range eps {
		for _, st := range []outbox.BreakerState{outbox.BreakerClosed, outbox.BreakerOpen, outbox.BreakerHalfOpen} {
			v := 0.0
			if ep.Breaker == st {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(c.breakerStateDesc, prometheus.GaugeValue, v, ep.Name, st.String())
		}
		if ep.RateLimit.PerSecond > 0 {
			ch <- prometheus.MustNewConstMetric(c.rateLimitDesc, prometheus.GaugeValue, ep.RateLimit.PerSecond, ep.Name)
		}
		ch <- prometheus.MustNewConstMetric(c.deliveryRateDesc, prometheus.GaugeValue, ep.Rate, ep.Name)
		ch <- prometheus.MustNewConstMetric(c.inFlightLimitDesc, prometheus.GaugeValue, float64(ep.InFlightLimit), ep.Name)
		ch <- prometheus.MustNewConstMetric(c.endpointInFlightDesc, prometheus.GaugeValue, float64(ep.InFlight), ep.Name)
		ch <- prometheus.MustNewConstMetric(c.latencyDesc, prometheus.GaugeValue, ep.LatencyP50.Seconds(), ep.Name, "0.5")
		ch <- prometheus.MustNewConstMetric(c.latencyDesc, prometheus.GaugeValue, ep.LatencyP99.Seconds(), ep.Name, "0.99")
	}
}

// collectBackfill sends the backfill's metrics.
func (c *Collector) collectBackfill(ch chan<- prometheus.Metric, b outbox.Backfill) {
	running := 0.0
	if b.Running {
		running = 1
	}
	ch <- prometheus.MustNewConstMetric(c.backfillRunningDesc, prometheus.GaugeValue, running)
	ch <- prometheus.MustNewConstMetric(c.backfillRoutedDesc, prometheus.CounterValue, float64(b.Routed))
	ch <- prometheus.MustNewConstMetric(c.backfillDeliveriesDesc, prometheus.CounterValue, float64(b.Deliveries))
}
