//go:build unix

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"

	"github.com/outboxd/outbox/internal/testkit"
	"github.com/outboxd/outbox/kafka"
	"github.com/outboxd/outbox/outbox/cluster"
)

// The group's views and operations (issue 30): three outboxd instances of
// the failover harness on a kfake broker, whose listing, dead replay and
// stats answer for every instance, and whose GET of an event that names
// its partition goes to the owner alone.

// listPage is one page of GET /v1/events as a group answers it.
type listPage struct {
	Events []struct {
		ID string `json:"id"`
	} `json:"events"`
	Next     string `json:"next"`
	Scope    string `json:"scope"`
	Complete bool   `json:"complete"`
	Members  []struct {
		API      string `json:"api"`
		Answered bool   `json:"answered"`
	} `json:"members"`
}

// listAll pages through GET /v1/events?query on in, limit events a page,
// and returns the IDs in the order listed and the number of pages; every
// page must answer for the whole group, complete.
func listAll(t *testing.T, in *instance, query string, limit int) ([]string, int) {
	t.Helper()
	var out []string
	pages := 0
	for after := ""; ; {
		got := ask(t, in, http.MethodGet, fmt.Sprintf("/v1/events?%slimit=%d&after=%s", query, limit, url.QueryEscape(after)))
		var p listPage
		if err := json.Unmarshal(got.body, &p); err != nil || got.status != http.StatusOK || p.Scope != "cluster" || !p.Complete {
			t.Fatalf("listing on %s after %q: %d %s", in.name, after, got.status, got.body)
		}
		pages++
		for _, e := range p.Events {
			out = append(out, e.ID)
		}
		if after = p.Next; after == "" {
			return out, pages
		}
		if pages > 10_000 {
			t.Fatalf("listing on %s does not end", in.name)
		}
	}
}

// Must show 4: listing and dead replay through any instance see every
// instance's events; a paged listing of 3,000 events across 3 members
// returns each exactly once; a GET for an ID that names its partition (or
// with its key) makes one forwarded request.
func TestGroupListsAndReplaysAsOneOutbox(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	var mu sync.Mutex
	healed := false
	f.rc.setRespond(func(_ *http.Request, id string) int {
		mu.Lock()
		defer mu.Unlock()
		if strings.HasPrefix(id, "dead-") && !healed {
			return http.StatusUnprocessableEntity // a dead letter at once
		}
		return http.StatusNoContent
	})
	f.withToken(fleetSession)
	a, b, c := f.add("a"), f.add("b"), f.add("c")
	fleet := []*instance{a, b, c}
	waitShared(t, fleet...)

	// 3,000 events an hour ahead: they stay pending while listed.
	later := ids("page", 0, 3000)
	f.produceScheduled(t, later, time.Now().Add(time.Hour), false)
	testkit.WaitFor(t, waitLong, "3,000 events pending in the group", func() bool {
		got := ask(t, a, http.MethodGet, "/v1/stats")
		var s struct {
			Pending  int  `json:"pending"`
			Complete bool `json:"complete"`
		}
		return json.Unmarshal(got.body, &s) == nil && s.Complete && s.Pending == len(later)
	})
	held := map[string]int{}
	for _, in := range fleet {
		s, ok := memberStats(in)
		if !ok {
			t.Fatalf("the stats of %s", in.name)
		}
		held[in.name] = s.pendingIngested()
	}
	if held["a"] == 0 || held["b"] == 0 || held["c"] == 0 {
		t.Fatalf("the events are held by %v: the listing must gather them from every instance", held)
	}
	listed, pages := listAll(t, b, "", 100)
	if len(listed) != len(later) {
		t.Errorf("the listing through b: %d events in %d pages, want %d", len(listed), pages, len(later))
	}
	for i := range min(len(listed), len(later)) {
		if listed[i] != later[i] {
			t.Fatalf("the listing through b: event %d is %s, want %s (each once, in ID order)", i, listed[i], later[i])
		}
	}
	t.Logf("3,000 events held %v listed through b in %d pages of 100", held, pages)

	// Dead letters on every instance: listed and replayed through any.
	dead := ids("dead", 0, 12)
	f.producer().mustWrite(t, dead)
	testkit.WaitFor(t, waitLong, "the dead letters", func() bool {
		got, _ := listAll(t, c, "state=dead&", 5)
		return len(got) == len(dead)
	})
	deadOn := 0
	for _, in := range fleet {
		if s, ok := memberStats(in); ok && s.Dead > 0 {
			deadOn++
		}
	}
	mu.Lock()
	healed = true
	mu.Unlock()
	got := ask(t, a, http.MethodPost, "/v1/dead/replay")
	var rep struct {
		Replayed int  `json:"replayed"`
		Complete bool `json:"complete"`
		Members  []struct {
			Replayed int `json:"replayed"`
		} `json:"members"`
	}
	if err := json.Unmarshal(got.body, &rep); err != nil || got.status != http.StatusAccepted || rep.Replayed != len(dead) || !rep.Complete || len(rep.Members) != 3 {
		t.Fatalf("dead replay through a: %d %s, want all %d replayed", got.status, got.body, len(dead))
	}
	f.waitDelivered(waitLong, dead)
	t.Logf("the dead letters, on %d instances, replayed through a: %s", deadOn, got.body)

	oneForward(t, f, fleet)
}

// oneForward checks that a GET through an instance that does not own the
// event's partition makes one forwarded request, for events produced
// without an ID (theirs names the partition) and with a key (given as
// key=).
func oneForward(t *testing.T, f *fleet, fleet []*instance) {
	t.Helper()
	at := time.Now().Add(time.Hour)
	f.produceScheduled(t, ids("noid", 0, 12), at, true)
	keyed := ids("keyed", 0, 12)
	w := &kafkago.Writer{Addr: kafkago.TCP(f.cluster.ListenAddrs()...), Topic: fleetTopic, Transport: f.producer().tr,
		Balancer: kafka.KeyBalancer{}, BatchTimeout: time.Millisecond, RequiredAcks: kafkago.RequireAll}
	defer w.Close()
	var msgs []kafkago.Message
	for i, id := range keyed {
		msgs = append(msgs, kafkago.Message{Key: fmt.Appendf(nil, "customer-%d", i), Value: []byte(`{}`), Headers: []kafkago.Header{
			{Key: kafka.DefaultIDHeader, Value: []byte(id)},
			{Key: kafka.DefaultDeliverAtHeader, Value: []byte(at.UTC().Format(time.RFC3339))},
		}})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		t.Fatal(err)
	}
	a := fleet[0]
	var paths []string
	testkit.WaitFor(t, waitLong, "the events without an ID and with a key", func() bool {
		listed, _ := listAll(t, a, "", 1000)
		paths = paths[:0]
		for _, id := range listed {
			switch {
			case strings.HasPrefix(id, "kafka:"):
				paths = append(paths, "/v1/events/"+url.PathEscape(id))
			case strings.HasPrefix(id, "keyed-"):
				var i int
				fmt.Sscanf(id, "keyed-%05d", &i)
				paths = append(paths, fmt.Sprintf("/v1/events/%s?key=customer-%d", id, i))
			}
		}
		return len(paths) == 24
	})
	forwarded := 0
	for _, p := range paths {
		before, _ := a.metric("outboxd_cluster_requests_sent_total", "")
		got := ask(t, a, http.MethodGet, p)
		after, _ := a.metric("outboxd_cluster_requests_sent_total", "")
		if got.status != http.StatusOK {
			t.Fatalf("GET %s through a: %d %s", p, got.status, got.body)
		}
		if got.header.Get(cluster.ServedByHeader) == "" {
			continue // a owns it: no request forwarded
		}
		forwarded++
		if after-before != 1 {
			t.Errorf("GET %s through a, served by %s: %v forwarded requests, want 1", p, got.header.Get(cluster.ServedByHeader), after-before)
		}
	}
	if forwarded == 0 {
		t.Errorf("a owns every event: no GET was forwarded")
	}
	t.Logf("%d of %d GETs through a were forwarded, each in one request", forwarded, len(paths))
}
