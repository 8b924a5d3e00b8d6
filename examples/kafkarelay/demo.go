package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outboxd/outbox/examples/internal/console"
	"github.com/outboxd/outbox/httpsink"
	"github.com/outboxd/outbox/kafka"
	"github.com/outboxd/outbox/outbox"
)

// demoEnv is what the demo runs next to the relay: an in-process Kafka
// broker and two receivers.
//
//	shipping  answers 404 twice to a back-ordered shipment (parked: "not yet")
//	email     answers 500 to the first attempt of every third record (retried)
type demoEnv struct {
	out     *console.Console
	cluster *kfake.Cluster
	brokers []string
	ln      net.Listener
	srv     *http.Server
	done    chan struct{}

	mu    sync.Mutex
	tries map[string]int             // event ID -> attempts
	got   map[string]map[string]bool // endpoint -> event IDs delivered
}

// demoRecord is the value of the demo's records.
type demoRecord struct {
	Order     int  `json:"order"`
	Backorder bool `json:"backorder"`
}

func startDemo(out *console.Console, topic string) (*demoEnv, error) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, topic))
	if err != nil {
		return nil, fmt.Errorf("in-process broker: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		cluster.Close()
		return nil, err
	}
	d := &demoEnv{out: out, cluster: cluster, brokers: cluster.ListenAddrs(), ln: ln, done: make(chan struct{}),
		tries: map[string]int{}, got: map[string]map[string]bool{"shipping": {}, "email": {}}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /{endpoint}", d.serve)
	d.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		defer close(d.done)
		_ = d.srv.Serve(ln)
	}()
	out.Printf("demo broker (in-process kfake) at %s, topic %s with 3 partitions", strings.Join(d.brokers, ","), topic)
	out.Printf("demo receivers at http://%s: shipping parks back-orders twice, email fails every third record once", ln.Addr())
	return d, nil
}

func (d *demoEnv) close() {
	_ = d.srv.Close()
	<-d.done
	d.cluster.Close()
}

func (d *demoEnv) endpoints() endpoints {
	var eps endpoints
	for _, name := range []string{"shipping", "email"} {
		eps = append(eps, httpsink.Endpoint{Name: name, URL: fmt.Sprintf("http://%s/%s", d.ln.Addr(), name)})
	}
	return eps
}

func (d *demoEnv) serve(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("endpoint")
	var rec demoRecord
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&rec); err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	id := r.Header.Get("webhook-id")
	d.mu.Lock()
	defer d.mu.Unlock()
	got, ok := d.got[name]
	if !ok {
		w.WriteHeader(http.StatusNotFound)
		return
	}
	d.tries[id]++
	switch {
	case name == "shipping" && rec.Backorder && d.tries[id] <= 2:
		w.WriteHeader(http.StatusNotFound)
		return
	case name == "email" && rec.Order%3 == 0 && d.tries[id] == 1:
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	got[id] = true
	w.WriteHeader(http.StatusNoContent)
}

func (d *demoEnv) delivered() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.got["shipping"]) + len(d.got["email"])
}

// run produces n records (and one for an endpoint that does not exist),
// waits until all were delivered or dead and the changelog was shipped, and
// prints what happened.
func (d *demoEnv) run(ctx context.Context, topic, changelog string, n int, box *outbox.Outbox) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(d.brokers...), kgo.DefaultProduceTopic(topic))
	if err != nil {
		return err
	}
	defer cl.Close()
	d.out.Printf("▶ producing %d records to %s, each naming shipping or email in its outbox-destination header", n, topic)
	d.out.Printf("▶ and one record for \"fax\", an endpoint nobody configured")
	var recs []*kgo.Record
	for i := range n + 1 {
		dest := []string{"shipping", "email"}[i%2]
		if i == n {
			dest = "fax"
		}
		v, _ := json.Marshal(demoRecord{Order: i, Backorder: dest == "shipping" && i%4 == 0})
		recs = append(recs, &kgo.Record{
			Key:     []byte("order-" + strconv.Itoa(i)),
			Value:   v,
			Headers: []kgo.RecordHeader{{Key: kafka.DefaultDestinationHeader, Value: []byte(dest)}},
		})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return fmt.Errorf("produce: %w", err)
	}

	// Wait for every record to be delivered or dead, and the changelog to
	// be shipped up to the last change.
	err = d.out.WaitIdle(ctx, box, 2*time.Minute, func() bool {
		if d.delivered() < n || box.Stats().Dead < 1 {
			return false
		}
		if changelog == "" {
			return true
		}
		shipped, err := box.Changelog().ShippedLSN()
		return err == nil && shipped >= box.Changelog().LastLSN()
	})
	if err != nil {
		return err
	}

	d.mu.Lock()
	d.out.Printf("summary: %d records delivered: shipping %d, email %d", n, len(d.got["shipping"]), len(d.got["email"]))
	d.mu.Unlock()
	dead, _, err := box.List(ctx, outbox.ListOptions{State: outbox.StateDead})
	if err != nil {
		return err
	}
	for _, ev := range dead {
		d.out.Printf("summary: dead letter %s: %s", ev.ID, ev.DeadReason)
	}
	if changelog == "" {
		return nil
	}
	ops, err := d.readChangelog(ctx, changelog, box)
	if err != nil {
		return err
	}
	var parts []string
	total := 0
	for _, op := range slices.Sorted(maps.Keys(ops)) {
		parts = append(parts, fmt.Sprintf("%s %d", op, ops[op]))
		total += ops[op]
	}
	d.out.Printf("summary: changelog topic %s holds %d entries (%s): enough to restore the pending and dead events on another machine",
		changelog, total, strings.Join(parts, ", "))
	return nil
}

// readChangelog reads the changelog topic up to the last shipped LSN and
// counts its entries by operation.
func (d *demoEnv) readChangelog(ctx context.Context, topic string, box *outbox.Outbox) (map[string]int, error) {
	last, err := box.Changelog().ShippedLSN()
	if err != nil {
		return nil, err
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(d.brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	ops := map[string]int{}
	for {
		fetches := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("reading %s: %w", topic, err)
		}
		if err := fetches.Err(); err != nil {
			return nil, fmt.Errorf("reading %s: %w", topic, err)
		}
		done := false
		fetches.EachRecord(func(r *kgo.Record) {
			for _, h := range r.Headers {
				switch h.Key {
				case kafka.HeaderOp:
					ops[string(h.Value)]++
				case kafka.HeaderLSN:
					if lsn, err := strconv.ParseUint(string(h.Value), 10, 64); err == nil && lsn >= last {
						done = true
					}
				}
			}
		})
		if done {
			return ops, nil
		}
	}
}
