//go:build unix

package main

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"

	"github.com/outboxd/outbox/internal/openapitest"
	"github.com/outboxd/outbox/internal/testkit"
	"github.com/outboxd/outbox/outbox/cluster"
)

// readTally counts the answers to the GETs of events polled while the
// partitions move.
type readTally struct {
	mu       sync.Mutex
	byStatus map[int]int
	stale    int
	refused  []string          // the 503s: event, instance, time and body
	others   []string          // the other answers but 200
	sample   *http.Response    // one stale answer, for the OpenAPI check
	body     []byte            // its body
	offsets  map[string]string // the last stale offset seen per event
}

// poll GETs each of idList on in, over and over, until stop is closed.
func (rt *readTally) poll(in *instance, idList []string, stop <-chan struct{}) {
	for {
		for _, id := range idList {
			select {
			case <-stop:
				return
			default:
			}
			req, _ := http.NewRequest(http.MethodGet, in.p.url("/v1/events/"+id), nil)
			req.Header.Set("Authorization", "Bearer "+clusterToken)
			resp, err := statsClient.Do(req)
			if err != nil {
				rt.note(in, id, 0, nil, nil)
				continue
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			rt.note(in, id, resp.StatusCode, resp, b)
		}
	}
}

func (rt *readTally) note(in *instance, id string, status int, resp *http.Response, body []byte) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	rt.byStatus[status]++
	switch {
	case status == http.StatusServiceUnavailable:
		rt.refused = append(rt.refused, fmt.Sprintf("%s on %s at %s: %s", id, in.name, time.Now().Format("15:04:05.000"), body))
	case status != http.StatusOK:
		rt.others = append(rt.others, fmt.Sprintf("%d for %s on %s: %s", status, id, in.name, body))
	case status == http.StatusOK && resp.Header.Get(cluster.StaleHeader) == "true":
		rt.stale++
		rt.offsets[id] = resp.Header.Get(cluster.StaleOffsetHeader)
		if rt.sample == nil {
			rt.sample, rt.body = resp, body
		}
	}
}

// Must show: during a forced rebalance, GETs of events on moving
// partitions answer 200, marked stale, rather than 503. Two instances with
// a standby replica each hold pending events (scheduled an hour ahead, so
// that they do not change); every event is read on both, over and over,
// while a third instance joins (every partition is handed over, its stores
// closed with their checkpoints, and restored, some by the newcomer from
// the whole changelog) and then leaves again with SIGTERM (it hands its
// partitions over and leaves before it closes its API). Every event has
// a copy throughout: a standby, a store being caught up from its
// checkpoint or handed over, or one closed with its checkpoint. Reads are
// answered from copies while the partitions move, never 503: a member
// whose copy is passing from one holder to the next (its file being
// opened by the partition's new task or standby, or a store stopping to
// be handed over) waits for it rather than answering that it has none,
// and no event is ever answered 404.
func TestReadsDuringARebalanceAreAnsweredFromCopies(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	f.rc.setRespond(answerAll503)
	// A session long enough that no member is expelled while it hands its
	// partitions over under the race detector: an expelled member's copies
	// are nobody's to ask until it joins again.
	f.withToken(5 * time.Second)
	f.extra = []string{"--standby-replicas", "1"}
	a, b := f.add("a"), f.add("b")
	waitShared(t, a, b)

	later := ids("later", 0, 60)
	f.produceScheduled(t, later, time.Now().Add(time.Hour), false)
	testkit.WaitFor(t, waitLong, "the events ingested", func() bool {
		n := 0
		for _, in := range []*instance{a, b} {
			s, ok := memberStats(in)
			if !ok {
				return false
			}
			n += s.pendingIngested()
		}
		return n == len(later)
	})
	tr := &kafkago.Transport{DialTimeout: time.Second}
	defer tr.CloseIdleConnections()
	cl := &kafkago.Client{Addr: kafkago.TCP(f.cluster.ListenAddrs()...), Transport: tr, Timeout: 5 * time.Second}
	parts := []int{0, 1, 2, 3, 4, 5}
	testkit.WaitFor(t, waitLong, "every partition's standby caught up with its changelog", func() bool {
		ends := changelogEnds(t, cl, fleetChangelog, parts)
		for _, p := range parts {
			if max(standbyApplied(a.p, p), standbyApplied(b.p, p)) < ends[p] {
				return false
			}
		}
		return true
	})

	rt := &readTally{byStatus: map[int]int{}, offsets: map[string]string{}}
	stop := make(chan struct{})
	var pollers sync.WaitGroup
	for _, in := range []*instance{a, b} {
		pollers.Go(func() { rt.poll(in, later, stop) })
	}
	c := f.add("c")
	waitShared(t, a, b, c)
	c.stop()
	waitShared(t, a, b)
	close(stop)
	pollers.Wait()

	rt.mu.Lock()
	defer rt.mu.Unlock()
	t.Logf("answers while the partitions moved, by status: %v; %d of them stale", rt.byStatus, rt.stale)
	if len(rt.refused) > 0 {
		t.Errorf("%d reads answered 503 while a copy of every partition existed: %v", len(rt.refused), rt.refused)
	}
	// Every event exists throughout: no 404. A 502 is the forwarding's
	// answer (a member that could not be asked), not the copies'. The
	// member that stops leaves the group before it closes its API, so it
	// can be asked until the others see it gone. A member that joins is
	// described without its address until the group is stable again: it
	// holds nothing yet, but cannot be asked (a 502 naming no address).
	for _, o := range rt.others {
		if !strings.HasPrefix(o, "502 ") {
			t.Errorf("an answer neither 200 nor 502: %s", o)
		}
		if strings.Contains(o, c.p.url("")) {
			t.Errorf("the member that stops could not be asked: %s", o)
		}
	}
	if len(rt.others) > 0 {
		t.Logf("%d answers 502 (a member that could not be asked), first: %s", len(rt.others), rt.others[0])
	}
	if rt.stale == 0 {
		t.Fatal("no read was answered from a copy: the partitions never moved while they were read")
	}
	openapitest.Check(t, rt.sample.Request, nil, rt.sample.StatusCode, rt.sample.Header, rt.body)
	for id, off := range rt.offsets {
		if n, err := strconv.ParseInt(off, 10, 64); err != nil || n <= 0 {
			t.Errorf("%s: stale at offset %q, want a changelog offset past its record", id, off)
		}
	}
}
