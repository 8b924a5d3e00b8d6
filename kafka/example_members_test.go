package kafka_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/outboxd/outbox/kafka"
	"github.com/outboxd/outbox/outbox"
)

// A member of a group announces where its API is; the others, and an
// operator's tool, learn who owns which partition and where to ask.
func ExampleGroup_Members() {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "orders"))
	if err != nil {
		panic(err)
	}
	defer cluster.Close()
	dir, err := os.MkdirTemp("", "outbox-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)

	cfg := kafka.Config{Brokers: cluster.ListenAddrs(), Topic: "orders", Group: "relays",
		Destination: "order-service", AdvertiseURL: "http://10.0.0.7:8080"}
	g, err := kafka.StartGroup(context.Background(), cfg, kafka.StoreConfig{Dir: dir,
		Outbox: outbox.Config{Sink: printSink{done: make(chan string, 1)}}}, nil)
	if err != nil {
		panic(err)
	}
	defer g.Close(context.Background())

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for len(g.Partitions()) < 2 { // until the group assigned both partitions
		select {
		case <-tick.C:
		case <-ctx.Done():
			panic("no assignment")
		}
	}
	members, err := g.Members(ctx)
	if err != nil {
		panic(err)
	}
	for _, m := range members {
		fmt.Println("member at", m.API, "owns", m.Partitions, "self:", m.Self)
	}
	st, err := kafka.DescribeGroup(ctx, cfg)
	if err != nil {
		panic(err)
	}
	for _, p := range st.Partitions {
		fmt.Printf("partition %d: owner at %s, lag %d\n", p.Partition, p.API, p.Lag)
	}
	// Output:
	// member at http://10.0.0.7:8080 owns [0 1] self: true
	// partition 0: owner at http://10.0.0.7:8080, lag 0
	// partition 1: owner at http://10.0.0.7:8080, lag 0
}
