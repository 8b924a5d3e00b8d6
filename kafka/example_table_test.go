package kafka_test

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/outboxd/outbox/kafka"
)

// Two members share a table: what one puts, the other applies, in the
// topic's order, and a member opened later reads it all before OpenTable
// returns.
func ExampleTable() {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		panic(err)
	}
	defer cluster.Close()
	cfg := kafka.Config{Brokers: cluster.ListenAddrs(), Topic: "orders", Group: "relays"}

	// Each member keeps the colours it read, by key.
	open := func(name string) (*kafka.Table, func() string) {
		var mu sync.Mutex
		seen := map[string]string{}
		t, err := kafka.OpenTable(context.Background(), cfg, kafka.TableConfig{Handlers: map[string]kafka.TableHandler{
			"colour/": func(r kafka.TableRecord) error {
				mu.Lock()
				defer mu.Unlock()
				seen[strings.TrimPrefix(string(r.Key), "colour/")] = string(r.Value)
				return nil
			},
		}})
		if err != nil {
			panic(err)
		}
		return t, func() string {
			mu.Lock()
			defer mu.Unlock()
			return fmt.Sprintf("%s: sky=%s grass=%s", name, seen["sky"], seen["grass"])
		}
	}
	a, aSeen := open("a")
	defer a.Close()
	fmt.Println(a.Topic())
	for _, kv := range [][2]string{{"sky", "grey"}, {"grass", "green"}, {"sky", "blue"}} {
		if _, err := a.Put(context.Background(), []byte("colour/"+kv[0]), []byte(kv[1])); err != nil {
			panic(err)
		}
	}
	fmt.Println(aSeen()) // Put returns once the writer applied its record

	b, bSeen := open("b")
	defer b.Close()
	fmt.Println(bSeen()) // OpenTable returns once b read up to the end
	// Output:
	// relays-orders-changelog-endpoints
	// a: sky=blue grass=green
	// b: sky=blue grass=green
}
