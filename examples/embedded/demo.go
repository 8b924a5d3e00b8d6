package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/outboxd/outbox/examples/internal/console"
	"github.com/outboxd/outbox/outbox"
)

// demoReceiver is the downstream service of the demo. It misbehaves on
// purpose:
//
//	order.created  answers 500 to the first attempt for order o-2 (retried:
//	               o-2's later events wait for it), and 422 for an order of
//	               0 cents (dead letter: o-3's later events go on without it)
//	order.shipped  answers 404 twice per order (parked: "not registered yet")
//	rooms          keeps the snapshot with the highest revision, and takes
//	               its time (25ms a snapshot): changes made meanwhile are
//	               coalesced into the room's one pending snapshot
type demoReceiver struct {
	out  *console.Console
	ln   net.Listener
	srv  *http.Server
	done chan struct{}

	mu       sync.Mutex
	tries    map[string]int      // event ID -> attempts
	orders   map[string][]string // order ID -> event types accepted, in arrival order
	rooms    map[string]Room     // latest snapshot per room
	accepted int                 // room snapshots accepted
	stale    int                 // room snapshots older than the one held
}

func startDemoReceiver(out *console.Console) (*demoReceiver, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	d := &demoReceiver{out: out, ln: ln, done: make(chan struct{}),
		tries: map[string]int{}, orders: map[string][]string{}, rooms: map[string]Room{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /orders", d.order)
	mux.HandleFunc("POST /rooms", d.room)
	d.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		defer close(d.done)
		_ = d.srv.Serve(ln)
	}()
	out.Printf("demo receiver at %s: fails o-2's first event once, refuses 0-cent orders, parks each shipment twice", d.url())
	return d, nil
}

func (d *demoReceiver) url() string { return "http://" + d.ln.Addr().String() }

func (d *demoReceiver) close() {
	_ = d.srv.Close()
	<-d.done
}

func (d *demoReceiver) order(w http.ResponseWriter, r *http.Request) {
	var ev struct {
		Type  string `json:"type"`
		Order Order  `json:"order"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&ev); err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	id := r.Header.Get("webhook-id")
	d.tries[id]++
	switch {
	case ev.Type == "order.created" && ev.Order.ID == "o-2" && d.tries[id] == 1:
		w.WriteHeader(http.StatusInternalServerError)
		return
	case ev.Type == "order.created" && ev.Order.TotalCents == 0:
		w.WriteHeader(http.StatusUnprocessableEntity)
		_, _ = io.WriteString(w, "free orders need approval")
		return
	case ev.Type == "order.shipped" && d.tries[id] <= 2:
		w.WriteHeader(http.StatusNotFound)
		return
	}
	if !slices.Contains(d.orders[ev.Order.ID], ev.Type) { // deliveries are at-least-once
		d.orders[ev.Order.ID] = append(d.orders[ev.Order.ID], ev.Type)
	}
	w.WriteHeader(http.StatusNoContent)
}

func (d *demoReceiver) room(w http.ResponseWriter, r *http.Request) {
	var rm Room
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&rm); err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	work := time.NewTimer(25 * time.Millisecond) // a slow downstream
	defer work.Stop()
	select {
	case <-work.C:
	case <-r.Context().Done():
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if rm.Revision > d.rooms[rm.Name].Revision {
		d.rooms[rm.Name] = rm
		d.accepted++
	} else {
		d.stale++
	}
	w.WriteHeader(http.StatusNoContent)
}

// run sends the demo traffic to the service at base, waits for the outbox to
// settle and checks what the receiver ended up with.
func (d *demoReceiver) run(ctx context.Context, base string, box *outbox.Outbox) error {
	c := newDemoClient(ctx, base)
	defer c.close()
	if err := d.sendOrders(c); err != nil {
		return err
	}
	members, err := d.changeLobby(c)
	if err != nil {
		return err
	}
	// Wait until every event was delivered or dead.
	if err := d.out.WaitIdle(ctx, box, 2*time.Minute, nil); err != nil {
		return err
	}
	return d.summarize(ctx, box, members)
}

// demoOrders are the demo's orders: o-2's first event fails once, and o-3,
// a free sample, is refused.
var demoOrders = []Order{
	{ID: "o-1", Customer: "ada", TotalCents: 1999},
	{ID: "o-2", Customer: "grace", TotalCents: 4500},
	{ID: "o-3", Customer: "alan", TotalCents: 0},
}

// sendOrders creates, pays and ships each order, the orders at once.
func (d *demoReceiver) sendOrders(c *demoClient) error {
	d.out.Printf("▶ 3 orders, each created, paid and shipped (o-3 is a free sample)")
	return concurrently(len(demoOrders), func(i int) error {
		o := demoOrders[i]
		b, _ := json.Marshal(o)
		for _, step := range []struct{ path, body string }{{"/orders", string(b)}, {"/orders/" + o.ID + "/pay", ""}, {"/orders/" + o.ID + "/ship", ""}} {
			if err := c.post(step.path, step.body); err != nil {
				return err
			}
		}
		return nil
	})
}

// changeLobby has 100 users join the lobby at once, then 60 of them leave
// while 140 others join, and returns the members the lobby must end with.
func (d *demoReceiver) changeLobby(c *demoClient) ([]string, error) {
	d.out.Printf("▶ room lobby: 100 users join at once")
	err := concurrently(100, func(i int) error { return c.post("/rooms/lobby/join", fmt.Sprintf(`{"user":"u%03d"}`, i)) })
	if err != nil {
		return nil, err
	}
	d.out.Printf("▶ room lobby: 60 of them leave while 140 others join, 200 requests at once")
	err = concurrently(200, func(i int) error {
		if i < 60 {
			return c.post("/rooms/lobby/leave", fmt.Sprintf(`{"user":"u%03d"}`, i))
		}
		return c.post("/rooms/lobby/join", fmt.Sprintf(`{"user":"u%03d"}`, i+40))
	})
	if err != nil {
		return nil, err
	}
	var want []string
	for i := 60; i < 240; i++ {
		want = append(want, fmt.Sprintf("u%03d", i))
	}
	return want, nil
}

// summarize prints what reached the receiver and the dead letters, and
// checks that the receiver's lobby has exactly the members it must have.
func (d *demoReceiver) summarize(ctx context.Context, box *outbox.Outbox, want []string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, o := range demoOrders {
		d.out.Printf("summary: order %s reached the receiver as %s", o.ID, strings.Join(d.orders[o.ID], " → "))
	}
	dead, _, err := box.List(ctx, outbox.ListOptions{State: outbox.StateDead})
	if err != nil {
		return err
	}
	for _, ev := range dead {
		d.out.Printf("summary: dead letter %s (%s): kept, replayable", ev.ID, ev.DeadReason)
	}
	lobby := d.rooms["lobby"]
	d.out.Printf("summary: room lobby changed 300 times; the receiver got %d snapshots (older ones coalesced away, %d arrived late and were ignored)", d.accepted, d.stale)
	if !slices.Equal(lobby.Members, want) {
		return fmt.Errorf("the receiver's lobby has %d members, want the %d u060..u239", len(lobby.Members), len(want))
	}
	d.out.Printf("summary: the receiver's lobby has exactly the expected %d members u060..u239 (revision %d) ✓", len(lobby.Members), lobby.Revision)
	return nil
}

// demoClient sends the demo's requests to the service.
type demoClient struct {
	ctx    context.Context
	base   string
	client *http.Client
}

func newDemoClient(ctx context.Context, base string) *demoClient {
	return &demoClient{ctx: ctx, base: base,
		client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}, Timeout: time.Minute}}
}

func (c *demoClient) close() { c.client.CloseIdleConnections() }

// post POSTs body to the service's path and wants a 2xx answer.
func (c *demoClient) post(path, body string) error {
	req, err := http.NewRequestWithContext(c.ctx, http.MethodPost, c.base+path, strings.NewReader(body))
	if err != nil {
		return err
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("POST %s: %d %s", path, resp.StatusCode, bytes.TrimSpace(b))
	}
	return nil
}

// concurrently runs fn(0) to fn(n-1) at once and returns the first error
// by index.
func concurrently(n int, fn func(i int) error) error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs[i] = fn(i) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
