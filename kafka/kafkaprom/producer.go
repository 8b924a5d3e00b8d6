package kafkaprom

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/outboxd/outbox/kafka"
)

// ProducerSource is what a ProducerCollector reads: a *kafka.Producer.
type ProducerSource interface {
	Stats() kafka.ProducerStats
}

// ProducerCollector is a prometheus.Collector for one kafka.Producer
// (outboxd's POST /v1/events in group mode):
//
//	outboxd_kafka_produced_total         counter  events the brokers acknowledged
//	outboxd_kafka_produce_refused_total  counter  events of calls that failed, not acknowledged (answered 503)
type ProducerCollector struct {
	src               ProducerSource
	produced, refused *prometheus.Desc
}

// NewProducer returns a ProducerCollector reading src.
func NewProducer(src ProducerSource) *ProducerCollector {
	return &ProducerCollector{
		src:      src,
		produced: prometheus.NewDesc("outboxd_kafka_produced_total", "Events produced to the ingest topic and acknowledged by the brokers.", nil, nil),
		refused: prometheus.NewDesc("outboxd_kafka_produce_refused_total",
			"Events of produce calls that failed (refused, or not acknowledged within the produce timeout) and were not acknowledged.", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *ProducerCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.produced
	ch <- c.refused
}

// Collect implements prometheus.Collector.
func (c *ProducerCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.src.Stats()
	ch <- prometheus.MustNewConstMetric(c.produced, prometheus.CounterValue, float64(s.Produced))
	ch <- prometheus.MustNewConstMetric(c.refused, prometheus.CounterValue, float64(s.Refused))
}
