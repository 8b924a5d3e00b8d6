package kafka_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	kafkago "github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/outboxd/outbox/kafka"
	"github.com/outboxd/outbox/outbox"
)

// printSink prints each delivery and signals it.
type printSink struct{ done chan string }

func (s printSink) Deliver(_ context.Context, d *outbox.Delivery) outbox.Result {
	fmt.Printf("delivered %s to %s: %s\n", d.ID, d.Destination, d.Payload)
	s.done <- d.ID
	return outbox.Result{Action: outbox.ActionSuccess, Status: 200}
}

// Ingest a topic into an outbox: each record becomes an event, delivered by
// the outbox's sink, and its offset is committed once it is durable.
func ExampleStart() {
	// An in-process broker stands in for a real cluster.
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "orders"))
	if err != nil {
		panic(err)
	}
	defer cluster.Close()
	brokers := cluster.ListenAddrs()

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

	r, err := kafka.Start(context.Background(), o, kafka.Config{
		Brokers:     brokers,
		Topic:       "orders",
		Group:       "outboxd",
		Destination: "order-service", // for records without an outbox-destination header
	}, nil)
	if err != nil {
		panic(err)
	}
	defer r.Close(context.Background())

	tr := &kafkago.Transport{}
	defer tr.CloseIdleConnections()
	w := &kafkago.Writer{Addr: kafkago.TCP(brokers...), Topic: "orders", Transport: tr}
	defer w.Close()
	if err := w.WriteMessages(context.Background(), kafkago.Message{Key: []byte("order-7"), Value: []byte(`{"total":42}`)}); err != nil {
		panic(err)
	}
	select {
	case <-sink.done:
	case <-time.After(30 * time.Second):
		fmt.Println("not delivered")
	}
	// Output:
	// delivered kafka:orders:0:0 to order-service: {"total":42}
}

// Rebuild a lost instance's database from its changelog topic.
func ExampleRestore() {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		panic(err)
	}
	defer cluster.Close()
	cfg := kafka.Config{Brokers: cluster.ListenAddrs(), ChangelogTopic: "outboxd-changelog"}

	dir, err := os.MkdirTemp("", "outbox-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	// An outbox that is not started keeps what it is given; its changelog
	// is shipped to the topic.
	o, err := outbox.Open(filepath.Join(dir, "lost.db"), outbox.Config{Sink: printSink{}})
	if err != nil {
		panic(err)
	}
	defer o.Stop(context.Background())
	if _, err := o.Enqueue(context.Background(), outbox.Event{ID: "invoice-1", Destination: "billing"}); err != nil {
		panic(err)
	}
	r, err := kafka.Start(context.Background(), o, cfg, nil)
	if err != nil {
		panic(err)
	}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for n, _ := r.ShippingLag(); n > 0; n, _ = r.ShippingLag() {
		<-tick.C
	}
	if err := r.Close(context.Background()); err != nil {
		panic(err)
	}

	stats, err := kafka.Restore(context.Background(), cfg, filepath.Join(dir, "new.db"), nil)
	if err != nil {
		panic(err)
	}
	fmt.Printf("restored %d pending, %d dead\n", stats.Pending, stats.Dead)
	// Output:
	// restored 1 pending, 0 dead
}
