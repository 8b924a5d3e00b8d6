package outbox_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outboxd/outbox/internal/testkit"
	"github.com/outboxd/outbox/outbox"
)

// The child process of TestKillRestart runs an outbox under load until it is
// killed. It is this test binary re-executed with these variables set.
const (
	childEnv         = "OUTBOX_TEST_CHILD"
	childDBEnv       = "OUTBOX_TEST_DB"
	childURLEnv      = "OUTBOX_TEST_URL"
	childFromEnv     = "OUTBOX_TEST_FROM"
	childCountEnv    = "OUTBOX_TEST_COUNT"
	childGenEnv      = "OUTBOX_TEST_GEN"
	childDrainEnv    = "OUTBOX_TEST_DRAIN"
	childConcurrency = 8
	// childMaxUncommitted keeps the redelivery bound small enough to check.
	childMaxUncommitted = 16
)

// runChild opens the outbox (durable: fsync on), enqueues its range of
// events from 4 goroutines, printing "ok <id>" once each is durable, and
// delivers until killed; in drain mode it delivers what is pending, stops
// cleanly and exits 0.
func runChild() int {
	from, _ := strconv.Atoi(os.Getenv(childFromEnv))
	count, _ := strconv.Atoi(os.Getenv(childCountEnv))
	gen := os.Getenv(childGenEnv)
	web := newWebSink()
	sink := sinkFunc(func(ctx context.Context, d *outbox.Delivery) outbox.Result {
		if d.Headers == nil {
			d.Headers = map[string]string{}
		}
		d.Headers["X-Gen"] = gen
		return web.Deliver(ctx, d)
	})
	cfg := outbox.Config{
		Sink:           sinkWithResolver{sink, web},
		Interval:       10 * time.Millisecond,
		Concurrency:    childConcurrency,
		MaxUncommitted: childMaxUncommitted,
		BackoffInitial: time.Millisecond,
		BackoffMax:     5 * time.Millisecond,
	}
	topic := os.Getenv(childTopicEnv)
	if topic != "" {
		cfg.Sink, cfg.Subscriptions = topicChild(sink, os.Getenv(childURLEnv), topic)
	}
	o, err := outbox.Open(os.Getenv(childDBEnv), cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		return 2
	}
	if err := o.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "start:", err)
		return 2
	}
	var out sync.Mutex
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := from + w; i < from+count; i += 4 {
				id := fmt.Sprintf("ev-%06d", i)
				ev := outbox.Event{ID: id, Destination: os.Getenv(childURLEnv) + "/hook", Payload: []byte(id)}
				if topic != "" {
					ev.Destination, ev.Topic = "", topic
				}
				_, err := o.Enqueue(context.Background(), ev)
				if err != nil {
					fmt.Fprintln(os.Stderr, "enqueue:", err)
					os.Exit(3)
				}
				out.Lock()
				fmt.Printf("ok %s\n", id)
				out.Unlock()
			}
		})
	}
	wg.Wait()
	if os.Getenv(childDrainEnv) == "" {
		select {} // deliver until killed
	}
	for o.Stats().Pending > 0 {
		time.Sleep(5 * time.Millisecond)
	}
	if err := o.Stop(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "stop:", err)
		return 4
	}
	fmt.Println("drained")
	return 0
}

// sinkWithResolver gives a sinkFunc the webSink's endpoint resolution.
type sinkWithResolver struct {
	outbox.Sink
	r outbox.EndpointResolver
}

func (s sinkWithResolver) ResolveEndpoint(d string) (string, error) { return s.r.ResolveEndpoint(d) }

// childRuns runs the generations of a kill test's child, one after the
// other, on one file.
type childRuns struct {
	db, url string
	env     []string        // more settings of every generation
	acked   map[string]bool // the IDs any generation acknowledged as durable
}

// run runs generation gen, enqueueing count events from ID number from. A
// drain generation delivers what is left and stops cleanly; any other is
// killed (SIGKILL) after acknowledging killAfter events as durable.
func (c *childRuns) run(t *testing.T, gen, from, count int, drain bool, killAfter int) {
	t.Helper()
	cmd := testkit.TestBinary(append([]string{
		childEnv + "=1", childDBEnv + "=" + c.db, childURLEnv + "=" + c.url,
		childFromEnv + "=" + strconv.Itoa(from), childCountEnv + "=" + strconv.Itoa(count),
		childGenEnv + "=" + strconv.Itoa(gen)}, c.env...)...)
	if drain {
		cmd.Env = append(cmd.Env, childDrainEnv+"=1")
	}
	p, lines := testkit.StartLines(t, cmd)
	n, killed := 0, false
	for line := range lines {
		if id, ok := strings.CutPrefix(line, "ok "); ok {
			c.acked[id] = true
			n++
		}
		if !drain && n >= killAfter && !killed {
			if err := p.Kill(); err != nil {
				t.Fatal(err)
			}
			killed = true
		}
	}
	if err := p.Err(); drain && err != nil {
		t.Fatalf("drain child: %v\n%s", err, p.Output())
	}
	if !drain && !killed {
		t.Fatalf("child %d exited before it was killed: %v\n%s", gen, p.Err(), p.Output())
	}
}

// killThenRestart runs gens generations of per events each, each killed
// at a random moment (after a random number of durable enqueues, while
// earlier events are being delivered), then one that drains what is left;
// then it checks that deletes stay deleted across a clean stop and start:
// the requests delivered (counted by delivered) do not grow.
func (c *childRuns) killThenRestart(t *testing.T, gens, per int, delivered func() int) {
	t.Helper()
	for g := range gens {
		c.run(t, g, g*per, per, false, 1+rand.IntN(per-1))
	}
	c.run(t, gens, 0, 0, true, 0)
	total := delivered()
	c.run(t, gens+1, 0, 0, true, 0)
	if after := delivered(); after != total {
		t.Fatalf("a clean restart delivered %d more requests", after-total)
	}
}

func TestKillRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	type delivery struct{ gen int }
	var mu sync.Mutex
	got := map[string][]delivery{}
	rc := newReceiver(t, func(r *http.Request, id string, n int) (int, http.Header) {
		g, _ := strconv.Atoi(r.Header.Get("X-Gen"))
		mu.Lock()
		got[id] = append(got[id], delivery{g})
		mu.Unlock()
		return http.StatusOK, nil
	})
	db := filepath.Join(t.TempDir(), "outbox.db")
	acked := map[string]bool{}

	runs := childRuns{db: db, url: rc.URL, acked: acked}
	const gens, per = 6, 300
	runs.killThenRestart(t, gens, per, func() int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, ds := range got {
			n += len(ds)
		}
		return n
	})

	mu.Lock()
	defer mu.Unlock()
	for id := range acked {
		if len(got[id]) == 0 {
			t.Errorf("event %s was acknowledged as durable but never delivered", id)
		}
	}
	// An event is delivered again only if it was in flight at a kill: its
	// earlier deliveries come from killed generations, and a kill leaves at
	// most Concurrency + MaxUncommitted deliveries uncommitted (those under
	// way and those whose outcome awaits its commit).
	redelivered := map[int]int{}
	for id, ds := range got {
		for _, d := range ds[:len(ds)-1] {
			if d.gen >= gens {
				t.Errorf("event %s delivered by the cleanly stopped generation %d and again later", id, d.gen)
			}
			redelivered[d.gen]++
		}
	}
	for g, n := range redelivered {
		if bound := childConcurrency + childMaxUncommitted; n > bound {
			t.Errorf("generation %d: %d events delivered again, more than the %d that can be in flight", g, n, bound)
		}
	}
	t.Logf("%d events acknowledged, %d delivered, redelivered after kills: %v", len(acked), len(got), redelivered)
}
