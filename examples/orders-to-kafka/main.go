// Command orders-to-kafka is the transactional outbox to Kafka, without
// CDC: it places orders, keeping each customer's order count in a bucket
// of its own in the outbox's file, and in the same transaction
// (Outbox.Update) enqueues the event that announces the order. A
// kafka.Sink publishes the events to a topic, one record each, keyed by
// customer, in each customer's order (Config.Ordered), with the event ID
// in the outbox-id header for consumers to deduplicate on.
//
// Place 6 orders and wait for them to be on the topic, then read it:
//
//	orders-to-kafka --brokers 127.0.0.1:9092 --orders 6
//	orders-to-kafka --brokers 127.0.0.1:9092 --read
//
// or see it all with nothing else running (an in-process broker):
//
//	go run ./examples/orders-to-kafka --demo
//
// With --orders 0 it places orders until it is stopped; killed at any
// moment, it loses no order it reported placed: the next start publishes
// what is pending.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/outboxd/outbox/kafka"
	"github.com/outboxd/outbox/outbox"
)

func main() {
	err := run(os.Args[1:], os.Stdout)
	switch {
	case errors.Is(err, flag.ErrHelp):
		os.Exit(0)
	case err != nil:
		fmt.Fprintln(os.Stderr, "orders-to-kafka:", err)
		os.Exit(1)
	}
}

// options are the program's flags.
type options struct {
	brokers, topic, dir string
	orders, customers   int
	read, demo          bool
}

func parseFlags(args []string) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("orders-to-kafka", flag.ContinueOnError)
	fs.StringVar(&o.brokers, "brokers", "", "Kafka broker addresses, comma separated (required unless --demo)")
	fs.StringVar(&o.topic, "topic", "orders", "the topic the order events are published to")
	fs.StringVar(&o.dir, "dir", "orders-data", "directory of the outbox file, which holds the orders too")
	fs.IntVar(&o.orders, "orders", 6, "orders to place before waiting for every event to be published and exiting (0: until stopped)")
	fs.IntVar(&o.customers, "customers", 2, "customers the orders go round")
	fs.BoolVar(&o.read, "read", false, "print the topic's records instead of placing orders")
	fs.BoolVar(&o.demo, "demo", false, "start an in-process broker, place the orders and read the topic back")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	switch {
	case fs.NArg() > 0:
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	case o.brokers == "" && !o.demo:
		return nil, errors.New("--brokers is required (or try --demo)")
	case o.customers < 1 || o.orders < 0:
		return nil, errors.New("--customers must be at least 1 and --orders not negative")
	}
	return o, nil
}

func run(args []string, stdout io.Writer) error {
	o, err := parseFlags(args)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if o.demo {
		return demo(ctx, o, stdout)
	}
	brokers := strings.Split(o.brokers, ",")
	if o.read {
		return readTopic(ctx, brokers, o.topic, stdout)
	}
	return placeOrders(ctx, o, brokers, stdout)
}

// demo starts a broker in this process, with the topic, and a data
// directory of its own, places the orders and reads the topic back.
func demo(ctx context.Context, o *options, stdout io.Writer) error {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, o.topic))
	if err != nil {
		return err
	}
	defer c.Close()
	if o.dir, err = os.MkdirTemp("", "orders-to-kafka-"); err != nil {
		return err
	}
	defer os.RemoveAll(o.dir)
	if err := placeOrders(ctx, o, c.ListenAddrs(), stdout); err != nil {
		return err
	}
	return readTopic(ctx, c.ListenAddrs(), o.topic, stdout)
}

// placeOrders opens the outbox, publishing through a kafka.Sink, places
// o.orders orders (until ctx ends with 0) and, unless ctx ended, waits
// until every event is published.
func placeOrders(ctx context.Context, o *options, brokers []string, stdout io.Writer) error {
	sink, err := kafka.NewSink(kafka.SinkConfig{
		Kafka:  kafka.Config{Brokers: brokers, ProduceTimeout: 5 * time.Second},
		Topics: map[string]string{"orders": o.topic},
	})
	if err != nil {
		return err
	}
	defer sink.Close()
	if err := os.MkdirAll(o.dir, 0o700); err != nil {
		return err
	}
	box, err := outbox.Open(filepath.Join(o.dir, "outbox.db"), outbox.Config{
		Sink:     sink,
		Ordered:  true, // a customer's events are published in the order of their orders
		Interval: 50 * time.Millisecond,
	})
	if err != nil {
		return err
	}
	if err := box.Start(); err != nil {
		_ = box.Stop(context.Background())
		return err
	}
	err = placeAndWait(ctx, o, box, stdout)
	stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return errors.Join(err, box.Stop(stopCtx))
}

func placeAndWait(ctx context.Context, o *options, box *outbox.Outbox, stdout io.Writer) error {
	for i := 0; o.orders == 0 || i < o.orders; i++ {
		if ctx.Err() != nil {
			return nil // stopped: what is pending is published at the next start
		}
		customer := fmt.Sprintf("customer-%d", i%o.customers)
		id, err := placeOrder(ctx, box, customer)
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, "placed", id)
	}
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for box.Stats().Pending > 0 {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
	fmt.Fprintln(stdout, "every event is on the topic")
	return nil
}

// Order is an order as the application keeps it and as its event
// announces it.
type Order struct {
	Customer string `json:"customer"`
	Number   int    `json:"number"` // the customer's n-th order, from 1
}

// placeOrder counts the customer's order and enqueues its event in one
// transaction: both are durable when it returns, or neither is. The
// event's ID is the order's, so a repeated publication is recognisable.
func placeOrder(ctx context.Context, box *outbox.Outbox, customer string) (string, error) {
	var id string
	err := box.Update(ctx, func(tx *outbox.Tx) error {
		b, err := tx.CreateBucketIfNotExists([]byte("orders"))
		if err != nil {
			return err
		}
		n := 1
		if v := b.Get([]byte(customer)); v != nil {
			var last Order
			if err := json.Unmarshal(v, &last); err != nil {
				return err
			}
			n = last.Number + 1
		}
		order, _ := json.Marshal(Order{Customer: customer, Number: n})
		if err := b.Put([]byte(customer), order); err != nil {
			return err
		}
		id = fmt.Sprintf("%s-order-%d", customer, n)
		_, err = tx.Enqueue(outbox.Event{ID: id, Key: customer, Destination: "orders", Payload: order})
		return err
	})
	return id, err
}
