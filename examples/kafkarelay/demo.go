package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outboxd/outbox/examples/internal/console"
	"github.com/outboxd/outbox/httpsink"
	"github.com/outboxd/outbox/kafka"
	"github.com/outboxd/outbox/outbox"
)

// demoPartitions is the partition count of the demo's topic: two relays
// own two each.
const demoPartitions = 4

// demoEnv is what the demo runs next to the relays: an in-process Kafka
// broker and two receivers.
//
//	shipping  parks a back-ordered shipment once (404: "not yet")
//	email     accepts
//
// Both answer 503 while down is set: at the start, until the takeover.
type demoEnv struct {
	out     *console.Console
	cluster *kfake.Cluster
	brokers []string
	ln      net.Listener
	srv     *http.Server
	done    chan struct{}
	down    atomic.Bool

	mu    sync.Mutex
	tries map[string]int             // event ID -> attempts while the receivers are up
	got   map[string]map[string]bool // endpoint -> event IDs delivered
	by    map[string]string          // event ID -> the relay that delivered it
	tried map[string]map[string]bool // relay -> event IDs it attempted
}

// demoRecord is the value of the demo's records.
type demoRecord struct {
	Order     int  `json:"order"`
	Backorder bool `json:"backorder"`
}

func startDemo(out *console.Console, topic string) (*demoEnv, error) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(demoPartitions, topic),
		kfake.GroupMinSessionTimeout(time.Second))
	if err != nil {
		return nil, fmt.Errorf("in-process broker: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		cluster.Close()
		return nil, err
	}
	d := &demoEnv{out: out, cluster: cluster, brokers: cluster.ListenAddrs(), ln: ln, done: make(chan struct{}),
		tries: map[string]int{}, got: map[string]map[string]bool{"shipping": {}, "email": {}},
		by: map[string]string{}, tried: map[string]map[string]bool{}}
	d.down.Store(true)
	mux := http.NewServeMux()
	mux.HandleFunc("POST /{endpoint}", d.serve)
	d.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		defer close(d.done)
		_ = d.srv.Serve(ln)
	}()
	out.Printf("demo broker (in-process kfake) at %s, topic %s with %d partitions", strings.Join(d.brokers, ","), topic, demoPartitions)
	out.Printf("demo receivers at http://%s: shipping and email, both answering 503 (down) for now; shipping then parks back-orders once", ln.Addr())
	return d, nil
}

// demoGroupPace sets the group timings of the demo: a rebalance within a
// second rather than the production defaults' several, and a session
// timeout of 3s unless --session-timeout was given.
func demoGroupPace(c *kafka.Config, set map[string]bool) {
	if !set["session-timeout"] {
		c.SessionTimeout = 3 * time.Second
	}
	c.HeartbeatInterval = min(200*time.Millisecond, c.SessionTimeout/3)
	c.RebalanceTimeout = 10 * time.Second
	c.HandoverTimeout = 2 * time.Second
	c.CommitInterval = 100 * time.Millisecond
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
	switch {
	case !ok:
		w.WriteHeader(http.StatusNotFound)
		return
	case d.down.Load():
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	d.tries[id]++
	if name == "shipping" && rec.Backorder && d.tries[id] == 1 {
		w.WriteHeader(http.StatusNotFound)
		return
	}
	got[id] = true
	w.WriteHeader(http.StatusNoContent)
}

// onDelivery records which relay attempted and delivered each event. It is
// called after the attempt's line was printed.
func (d *demoEnv) onDelivery(relay string, di outbox.DeliveryInfo) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.tried[relay] == nil {
		d.tried[relay] = map[string]bool{}
	}
	d.tried[relay][di.ID] = true
	if di.Action == outbox.ActionSuccess {
		d.by[di.ID] = relay
	}
}

// triedBy returns how many events relay attempted to deliver.
func (d *demoEnv) triedBy(relay string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.tried[relay])
}

// deliveredBy returns how many events were delivered, in all and by who.
func (d *demoEnv) deliveredBy(who string) (all, by int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, r := range d.by {
		if r == who {
			by++
		}
	}
	return len(d.by), by
}

// waitFor polls cond every 50ms until it holds, ctx is done or limit has
// passed.
func waitFor(ctx context.Context, limit time.Duration, what string, cond func() bool) error {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("not settled after %v: %s", limit, what)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
	return nil
}

// startRelays starts the demo's two relays, each with its stores in a
// directory of its own under dir: relay-a first, and relay-b once relay-a
// owns every partition, so that relay-b has never owned the partitions it
// later takes over. The relays started are returned even with an error,
// to be closed.
func (d *demoEnv) startRelays(ctx context.Context, s relaySettings, dir string) ([]*relay, error) {
	a, err := startRelay(ctx, s, "relay-a", filepath.Join(dir, "relay-a"))
	if err != nil {
		return nil, err
	}
	err = waitFor(ctx, time.Minute, a.name+" owning every partition", func() bool {
		parts, _, _ := a.owned()
		return len(parts) == demoPartitions
	})
	if err != nil {
		return []*relay{a}, err
	}
	d.out.Printf("▶ relay-b joins the group")
	b, err := startRelay(ctx, s, "relay-b", filepath.Join(dir, "relay-b"))
	if err != nil {
		return []*relay{a}, err
	}
	return []*relay{a, b}, nil
}

// run is the demo: the two relays share the partitions, n records (and one
// for an endpoint that does not exist) become pending events while the
// receivers are down, relay a crashes and loses its directory, relay b
// takes its partitions over, rebuilds them from the changelog and, once
// the receivers are back, delivers every event.
func (d *demoEnv) run(ctx context.Context, topic, changelog string, n int, a, b *relay) error {
	if err := d.waitShared(ctx, a, b); err != nil {
		return err
	}
	if err := d.produce(ctx, topic, n); err != nil {
		return err
	}
	aParts, err := d.waitStored(ctx, changelog, n, a, b)
	if err != nil {
		return err
	}
	d.out.Printf("✗ %s crashes: its Group is closed with an already-cancelled context (deliveries in flight are cancelled, its hand-over gives up at once) "+
		"and its directory %s is deleted", a.name, a.dir)
	if err := a.crash(); err != nil {
		return fmt.Errorf("crashing %s: %w", a.name, err)
	}
	if err := d.waitTakenOver(ctx, n, a, b); err != nil {
		return err
	}
	d.down.Store(false)
	d.out.Printf("▶ the receivers are back up")
	if err := d.waitDelivered(ctx, n, b); err != nil {
		return err
	}
	return d.summarize(ctx, topic, aParts, a, b)
}

// demoLimit bounds each of the demo's waits.
const demoLimit = 2 * time.Minute

// waitShared waits until the two relays share the partitions.
func (d *demoEnv) waitShared(ctx context.Context, a, b *relay) error {
	var aParts, bParts []int
	err := waitFor(ctx, demoLimit, "the two relays sharing the partitions", func() bool {
		aParts, _, _ = a.owned()
		bParts, _, _ = b.owned()
		return len(aParts) > 0 && len(bParts) > 0 && len(aParts)+len(bParts) == demoPartitions
	})
	if err != nil {
		return err
	}
	d.out.Printf("▶ the group shares the partitions: %s owns %v, %s owns %v", a.name, aParts, b.name, bParts)
	return nil
}

// produce produces n records to topic, spread over its partitions, each
// for shipping or email, and one for "fax", an endpoint nobody configured.
func (d *demoEnv) produce(ctx context.Context, topic string, n int) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(d.brokers...), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		return err
	}
	defer cl.Close()
	d.out.Printf("▶ producing %d records to %s, spread over its partitions, each naming shipping or email in its outbox-destination header", n, topic)
	d.out.Printf("▶ and one record for \"fax\", an endpoint nobody configured")
	var recs []*kgo.Record
	for i := range n + 1 {
		dest := []string{"shipping", "email"}[i%2]
		if i == n {
			dest = "fax"
		}
		v, _ := json.Marshal(demoRecord{Order: i, Backorder: dest == "shipping" && i%4 == 0})
		recs = append(recs, &kgo.Record{
			Key:       []byte("order-" + strconv.Itoa(i)),
			Value:     v,
			Partition: int32(i % demoPartitions),
			Headers:   []kgo.RecordHeader{{Key: kafka.DefaultDestinationHeader, Value: []byte(dest)}},
		})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return fmt.Errorf("produce: %w", err)
	}
	return nil
}

// waitStored waits until every record is a pending event (or the dead
// letter) in the store of its partition, a's were attempted (their failed
// attempts are part of their state), and every change is shipped to the
// changelog. It returns the partitions a holds.
func (d *demoEnv) waitStored(ctx context.Context, changelog string, n int, a, b *relay) ([]int, error) {
	var aParts, bParts []int
	var aPending, aDead, bPending, bDead int
	err := waitFor(ctx, demoLimit, "every record stored, attempted and shipped", func() bool {
		aParts, aPending, aDead = a.owned()
		bParts, bPending, bDead = b.owned()
		return aPending+bPending == n && aDead+bDead == 1 && d.triedBy(a.name) == aPending && a.shipped() && b.shipped()
	})
	if err != nil {
		return nil, err
	}
	d.out.Printf("▶ %s holds %d pending and %d dead of partitions %v, %s %d pending and %d dead of %v; every change is shipped to %s",
		a.name, aPending, aDead, aParts, b.name, bPending, bDead, bParts, changelog)
	return aParts, nil
}

// waitTakenOver waits until b owns every partition, a's rebuilt from the
// changelog: nothing a held is lost.
func (d *demoEnv) waitTakenOver(ctx context.Context, n int, a, b *relay) error {
	var parts []int
	var pending, dead int
	err := waitFor(ctx, demoLimit, b.name+" owning every partition with every event", func() bool {
		parts, pending, dead = b.owned()
		return len(parts) == demoPartitions && pending == n && dead == 1
	})
	if err != nil {
		return err
	}
	d.out.Printf("▶ %s owns every partition %v: %d pending and %d dead, nothing %s held is lost", b.name, parts, pending, dead, a.name)
	return nil
}

// waitDelivered waits until b delivered every record and shipped the
// deletes; the dead letter stays.
func (d *demoEnv) waitDelivered(ctx context.Context, n int, b *relay) error {
	return waitFor(ctx, demoLimit, "every record delivered", func() bool {
		all, _ := d.deliveredBy(b.name)
		_, pending, dead := b.owned()
		return all == n && pending == 0 && dead == 1 && b.shipped()
	})
}

// summarize prints who delivered what, how b restored the partitions a
// held (aParts), and the dead letter.
func (d *demoEnv) summarize(ctx context.Context, topic string, aParts []int, a, b *relay) error {
	d.mu.Lock()
	ship, email := len(d.got["shipping"]), len(d.got["email"])
	fromA := 0
	for id := range d.by {
		if p, ok := partitionOf(id, topic); ok && slices.Contains(aParts, p) {
			fromA++
		}
	}
	d.mu.Unlock()
	all, byB := d.deliveredBy(b.name)
	d.out.Printf("summary: %d records delivered (shipping %d, email %d), %d of them by %s, %d from the partitions %v that %s held when it crashed",
		all, ship, email, byB, b.name, fromA, aParts, a.name)
	for _, p := range b.g.Partitions() {
		if slices.Contains(aParts, p.Partition) {
			d.out.Printf("summary: partition %d taken over by %s: restore mode %s, %d changelog records applied in %v",
				p.Partition, b.name, p.Restore.Mode, p.Restore.Records, p.Restore.Duration.Round(time.Millisecond))
		}
	}
	rs := b.g.Metrics().Restores
	d.out.Printf("summary: %s's restores since it started: %d rebuilt from the changelog (no local store: its first partitions, %s's), "+
		"%d caught up from a checkpoint (partitions it handed over at a rebalance and got back)", b.name, rs.Rebuild, a.name, rs.Checkpoint)
	dl, err := b.deadLetters(ctx)
	if err != nil {
		return err
	}
	for _, ev := range dl {
		d.out.Printf("summary: dead letter %s: %s", ev.ID, ev.DeadReason)
	}
	return nil
}

// partitionOf returns the partition of an event ID the ingest made,
// kafka:<topic>:<partition>:<offset>.
func partitionOf(id, topic string) (int, bool) {
	rest, ok := strings.CutPrefix(id, "kafka:"+topic+":")
	if !ok {
		return 0, false
	}
	p, _, ok := strings.Cut(rest, ":")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(p)
	return n, err == nil
}
