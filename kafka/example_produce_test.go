package kafka_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/outboxd/outbox/kafka"
	"github.com/outboxd/outbox/outbox"
)

// Produce events to the ingest topic, as outboxd's POST /v1/events does in
// group mode: Produce returns once the broker acknowledged them, with the
// IDs the consumer stores them under.
func ExampleProducer() {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "orders"))
	if err != nil {
		panic(err)
	}
	defer cluster.Close()
	cfg := kafka.Config{Brokers: cluster.ListenAddrs(), Topic: "orders", Group: "outboxd"}

	p, err := kafka.NewProducer(cfg, nil)
	if err != nil {
		panic(err)
	}
	defer p.Close()
	ids, err := p.Produce(context.Background(), outbox.Event{
		ID:          "order-7-paid",
		Key:         "order-7", // the partition Kafka's default partitioner gives "order-7"
		Destination: "order-service",
		Method:      "PUT",
		Payload:     []byte(`{"total":42}`),
	})
	if err != nil {
		panic(err) // a *kafka.ProduceError: refused, or not acknowledged in time
	}
	fmt.Println("acknowledged", ids[0])

	// A consumer of the topic gets the same event back.
	dir, err := os.MkdirTemp("", "outbox-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	sink := printSink{done: make(chan string, 1)}
	o, err := outbox.Open(filepath.Join(dir, "outbox.db"), outbox.Config{Sink: sink})
	if err != nil {
		panic(err)
	}
	defer o.Stop(context.Background())
	if err := o.Start(); err != nil {
		panic(err)
	}
	r, err := kafka.Start(context.Background(), o, cfg, nil)
	if err != nil {
		panic(err)
	}
	defer r.Close(context.Background())
	select {
	case <-sink.done:
	case <-time.After(30 * time.Second):
		fmt.Println("not delivered")
	}
	// Output:
	// acknowledged order-7-paid
	// delivered order-7-paid to order-service: {"total":42}
}
