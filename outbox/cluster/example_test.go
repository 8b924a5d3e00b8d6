package cluster_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"time"

	"github.com/outboxd/outbox/outbox"
	"github.com/outboxd/outbox/outbox/cluster"
	"github.com/outboxd/outbox/outbox/httpapi"
)

// Two members of a group, each with its own store: the event enqueued on
// b is read through a, which forwards the request to b.
func ExampleNew() {
	dir, _ := os.MkdirTemp("", "cluster-example")
	defer os.RemoveAll(dir)
	open := func(name string) *outbox.Outbox {
		o, err := outbox.Open(filepath.Join(dir, name+".db"), outbox.Config{Sink: deadSink{}})
		if err != nil {
			panic(err)
		}
		return o
	}
	oa, ob := open("a"), open("b")
	defer oa.Stop(context.Background())
	defer ob.Stop(context.Background())

	// The members' servers: their addresses are known before they serve.
	sa, sb := httptest.NewUnstartedServer(nil), httptest.NewUnstartedServer(nil)
	urlA, urlB := "http://"+sa.Listener.Addr().String(), "http://"+sb.Listener.Addr().String()
	peers := func(self string) func(context.Context) ([]cluster.Peer, error) {
		return func(context.Context) ([]cluster.Peer, error) {
			return []cluster.Peer{
				{ID: "a", URL: urlA, Self: self == "a"},
				{ID: "b", URL: urlB, Self: self == "b"},
			}, nil
		}
	}
	ha := cluster.New(httpapi.New(oa, httpapi.Config{}), cluster.Config{Self: urlA, Peers: peers("a"), Timeout: 2 * time.Second})
	hb := cluster.New(httpapi.New(ob, httpapi.Config{}), cluster.Config{Self: urlB, Peers: peers("b"), Timeout: 2 * time.Second})
	defer ha.Close()
	defer hb.Close()
	sa.Config.Handler, sb.Config.Handler = ha, hb
	sa.Start()
	sb.Start()
	defer sa.Close()
	defer sb.Close()

	if _, err := ob.Enqueue(context.Background(), outbox.Event{ID: "order-1", Destination: "orders"}); err != nil {
		panic(err)
	}
	resp, err := http.Get(urlA + "/v1/events/order-1")
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	var ev struct{ ID, State string }
	_ = json.NewDecoder(resp.Body).Decode(&ev)
	fmt.Println(resp.StatusCode, ev.ID, ev.State, "served by b:", resp.Header.Get(cluster.ServedByHeader) == urlB)
	// Output: 200 order-1 pending served by b: true
}
