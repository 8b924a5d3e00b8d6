// Package outboxprom exports an outbox's metrics to Prometheus: counters and
// histograms fed by outbox.Hooks, and gauges read from Outbox.Stats at each
// scrape. It registers nothing globally: register the Collector in the
// registry of your choice.
//
//	col, _ := outboxprom.New(o) // installs its hooks on o
//	reg := prometheus.NewRegistry()
//	reg.MustRegister(col)
//
// For several outboxes reported as one (the partition stores of an instance
// in Kafka group mode, which come and go), install the Collector's hooks in
// each of them (Config.Hooks: each event is counted once, by the outbox that
// holds it) and attach a Source over them all for the gauges:
//
//	col, hooks := outboxprom.New(nil)
//	cfg.Hooks = hooks // in the Config of every store
//	col.AttachSource(view) // a view over the stores: Stats, Health, CommitStats
package outboxprom
