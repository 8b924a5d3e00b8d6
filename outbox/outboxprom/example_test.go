package outboxprom_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/outboxd/outbox/outbox"
	"github.com/outboxd/outbox/outbox/outboxprom"
)

// Register an outbox's metrics in a registry of your own.
func ExampleNew() {
	dir, _ := os.MkdirTemp("", "outboxprom-example")
	defer os.RemoveAll(dir)
	sink := sinkFunc(func(context.Context, *outbox.Delivery) outbox.Result {
		return outbox.Result{Action: outbox.ActionSuccess, Status: 200}
	})
	o, err := outbox.Open(filepath.Join(dir, "outbox.db"), outbox.Config{Sink: sink})
	if err != nil {
		log.Fatal(err)
	}
	defer o.Stop(context.Background())

	col, _ := outboxprom.New(o) // its hooks are installed on o
	reg := prometheus.NewRegistry()
	reg.MustRegister(col)

	if _, err := o.Enqueue(context.Background(), outbox.Event{Destination: "billing", Payload: []byte("{}")}); err != nil {
		log.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		log.Fatal(err)
	}
	for _, mf := range mfs {
		switch mf.GetName() {
		case "outbox_enqueued_total":
			fmt.Println(mf.GetName(), mf.GetMetric()[0].GetCounter().GetValue())
		case "outbox_pending":
			fmt.Println(mf.GetName(), mf.GetMetric()[0].GetGauge().GetValue())
		}
	}
	// Output:
	// outbox_enqueued_total 1
	// outbox_pending 1
}
