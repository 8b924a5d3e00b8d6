package kafka_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	kafkago "github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/outboxd/outbox/internal/testkit"
	"github.com/outboxd/outbox/kafka"
	"github.com/outboxd/outbox/outbox"
)

// holdSink answers every delivery with a retry an hour away: the events
// stay pending.
type holdSink struct{}

func (holdSink) Deliver(context.Context, *outbox.Delivery) outbox.Result {
	return outbox.Result{Action: outbox.ActionRetry, Status: 503}
}

// Keep a warm standby of every partition on another member of the group:
// each member owns one partition of two and keeps the other's store up to
// date from the changelog, ready to take it over without a rebuild.
func ExampleGroup_Standbys() {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "orders"))
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

	cfg := kafka.Config{Brokers: brokers, Topic: "orders", Group: "relay", Destination: "order-service",
		StandbyReplicas: 1}
	var members []*kafka.Group
	for _, name := range []string{"a", "b"} {
		g, err := kafka.StartGroup(context.Background(), cfg, kafka.StoreConfig{
			Dir:    filepath.Join(dir, name),
			Outbox: outbox.Config{Sink: holdSink{}, BackoffInitial: time.Hour, BackoffMax: time.Hour},
		}, nil)
		if err != nil {
			panic(err)
		}
		defer g.Close(context.Background())
		members = append(members, g)
	}

	tr := &kafkago.Transport{}
	defer tr.CloseIdleConnections()
	w := &kafkago.Writer{Addr: kafkago.TCP(brokers...), Topic: "orders", Transport: tr, Balancer: &kafkago.RoundRobin{}}
	defer w.Close()
	if err := w.WriteMessages(context.Background(),
		kafkago.Message{Key: []byte("order-7"), Value: []byte(`{"total":42}`)},
		kafkago.Message{Key: []byte("order-8"), Value: []byte(`{"total":17}`)}); err != nil {
		panic(err)
	}

	// Wait until each member owns a partition holding its event and keeps
	// a standby of the other that has applied all of its changelog.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err = testkit.Poll(ctx, 10*time.Millisecond, func() (bool, error) {
		for _, g := range members {
			m := g.Metrics()
			if len(m.Partitions) != 1 || m.Partitions[0].Pending != 1 || len(m.Standbys) != 1 ||
				m.Standbys[0].State != kafka.StandbyTailing || m.Standbys[0].Applied == 0 || m.Standbys[0].Lag != 0 {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		fmt.Println("the standbys did not catch up:", err)
	}
	// Standbys reports each standby's state and, in Lag, how many
	// changelog records it has yet to apply.
	for _, g := range members {
		p, s := g.Partitions()[0], g.Standbys()[0]
		fmt.Printf("owns a partition with %d pending event; keeps a standby of the other (%s)\n", p.Pending, s.State)
	}
	// Output:
	// owns a partition with 1 pending event; keeps a standby of the other (tailing)
	// owns a partition with 1 pending event; keeps a standby of the other (tailing)
}
