package kafkaprom

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/outboxd/outbox/kafka"
)

type fixedProducer kafka.ProducerStats

func (f fixedProducer) Stats() kafka.ProducerStats { return kafka.ProducerStats(f) }

// A Producer's counters are exported under their documented names.
func TestProducerFiguresHaveTheirNames(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewProducer(fixedProducer{Produced: 7, Refused: 2}))
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		got[mf.GetName()] = mf.GetMetric()[0].GetCounter().GetValue()
	}
	if got["outboxd_kafka_produced_total"] != 7 || got["outboxd_kafka_produce_refused_total"] != 2 || len(got) != 2 {
		t.Errorf("gathered %v", got)
	}
}
