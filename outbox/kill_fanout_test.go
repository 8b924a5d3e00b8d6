package outbox_test

import (
	"context"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/outboxd/outbox/outbox"
)

// childTopicEnv makes the child of the kill tests (runChild) publish its
// events on a topic that childTopicEndpoints subscribe to.
const childTopicEnv = "OUTBOX_TEST_TOPIC"

// childTopicEndpoints subscribe to the topic of a child in topic mode.
var childTopicEndpoints = []string{"billing", "shipping"}

// topicChild returns the sink and subscriptions of a child in topic mode:
// each endpoint is the path /<name> of the receiver at url.
func topicChild(sink outbox.Sink, url, topic string) (outbox.Sink, []outbox.Subscription) {
	byName := sinkFunc(func(ctx context.Context, d *outbox.Delivery) outbox.Result {
		d.Destination = url + "/" + d.Endpoint
		return sink.Deliver(ctx, d)
	})
	var subs []outbox.Subscription
	for _, ep := range childTopicEndpoints {
		subs = append(subs, outbox.Subscription{Endpoint: ep, Topics: []string{topic}})
	}
	return byName, subs
}

// A process publishing events on a topic with two subscribers is killed
// (SIGKILL) at random moments, six times, and restarted: every event
// acknowledged as durable reaches both endpoints, each with the event's ID;
// a delivery is repeated only if it was in flight at a kill; and a clean
// restart delivers nothing again.
func TestKillRestartFanOut(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	var mu sync.Mutex
	got := map[string][]int{} // endpoint + " " + ID -> generations that delivered it
	rc := newReceiver(t, func(r *http.Request, id string, n int) (int, http.Header) {
		g, _ := strconv.Atoi(r.Header.Get("X-Gen"))
		mu.Lock()
		got[strings.TrimPrefix(r.URL.Path, "/")+" "+id] = append(got[strings.TrimPrefix(r.URL.Path, "/")+" "+id], g)
		mu.Unlock()
		return http.StatusOK, nil
	})
	db := filepath.Join(t.TempDir(), "outbox.db")
	acked := map[string]bool{}
	runs := childRuns{db: db, url: rc.URL, env: []string{childTopicEnv + "=order.paid"}, acked: acked}
	const gens, per = 6, 200
	runs.killThenRestart(t, gens, per, func() int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, gs := range got {
			n += len(gs)
		}
		return n
	})

	mu.Lock()
	defer mu.Unlock()
	for id := range acked {
		for _, ep := range childTopicEndpoints {
			if len(got[ep+" "+id]) == 0 {
				t.Errorf("event %s was acknowledged as durable but never reached %s", id, ep)
			}
		}
	}
	for key := range got {
		ep, _, _ := strings.Cut(key, " ")
		if !slices.Contains(childTopicEndpoints, ep) {
			t.Errorf("a delivery to %q, which subscribes to nothing", key)
		}
	}
	redelivered := map[int]int{}
	for key, gs := range got {
		for _, g := range gs[:len(gs)-1] {
			if g >= gens {
				t.Errorf("%s delivered by the cleanly stopped generation %d and again later", key, g)
			}
			redelivered[g]++
		}
	}
	for g, n := range redelivered {
		if bound := childConcurrency + childMaxUncommitted; n > bound {
			t.Errorf("generation %d: %d deliveries repeated, more than the %d that can be in flight", g, n, bound)
		}
	}
	t.Logf("%d events acknowledged, %d deliveries made, repeated after kills: %v", len(acked), len(got), redelivered)
}
