// Package outboxprom exports an outbox's metrics to Prometheus: counters and
// histograms fed by outbox.Hooks, and gauges read from Outbox.Stats at each
// scrape. It registers nothing globally: register the Collector in the
// registry of your choice.
//
//	col, _ := outboxprom.New(o) // installs its hooks on o
//	reg := prometheus.NewRegistry()
//	reg.MustRegister(col)
package outboxprom
