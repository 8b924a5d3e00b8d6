package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"

	"github.com/outboxd/outbox/internal/testkit"
)

// resetListener is a dead receiver: it accepts every TCP connection and
// resets it at once (SO_LINGER 0, so the close sends an RST), and counts
// the connections it saw.
type resetListener struct {
	l    net.Listener
	mu   sync.Mutex
	at   []time.Time
	done chan struct{}
}

// newResetListener listens on loopback until the test ends.
func newResetListener(tb testing.TB) *resetListener {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	r := &resetListener{l: l, done: make(chan struct{})}
	go r.serve()
	tb.Cleanup(func() {
		r.l.Close()
		<-r.done
	})
	return r
}

func (r *resetListener) serve() {
	defer close(r.done)
	for {
		c, err := r.l.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		r.mu.Lock()
		r.at = append(r.at, time.Now())
		r.mu.Unlock()
		_ = c.(*net.TCPConn).SetLinger(0)
		c.Close()
	}
}

// connections returns the times of the connections seen so far.
func (r *resetListener) connections() []time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]time.Time(nil), r.at...)
}

// connectionsWithin counts the connections seen within d of the first.
func (r *resetListener) connectionsWithin(d time.Duration) int {
	at := r.connections()
	n := 0
	for _, t := range at {
		if t.Sub(at[0]) <= d {
			n++
		}
	}
	return n
}

// breakerLine is one of an instance's log lines about the breaker of an
// endpoint.
type breakerLine struct {
	Time     time.Time `json:"time"`
	Msg      string    `json:"msg"`
	Endpoint string    `json:"endpoint"`
}

// breakerLog returns p's log lines about the breaker of endpoint, in order.
func breakerLog(p *proc, endpoint string) []breakerLine {
	var out []breakerLine
	for line := range strings.Lines(p.log.String()) {
		var rec breakerLine
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Endpoint == endpoint &&
			strings.HasPrefix(rec.Msg, "outbox: circuit breaker") {
			out = append(out, rec)
		}
	}
	return out
}

// Breaker log messages.
const (
	breakerOpenedMsg   = "outbox: circuit breaker opened"
	breakerHalfOpenMsg = "outbox: circuit breaker half-open, sending a probe"
)

// deadGroup is a group of outboxd instances delivering a backlog to an
// endpoint whose every connection is reset.
type deadGroup struct {
	procs []*proc
	dead  *resetListener
}

// startDeadGroup starts a 6-partition kfake cluster, a dead receiver and n
// outboxd instances in one group with extra arguments, waits until every
// one is ready, and writes 3,000 records for the dead endpoint over the 6
// partitions.
func startDeadGroup(tb testing.TB, n int, extra ...string) *deadGroup {
	tb.Helper()
	cluster := newEventsCluster(tb, 6)
	tb.Cleanup(cluster.Close)
	base := tb.TempDir()
	dead := newResetListener(tb)
	brokers := cluster.ListenAddrs()
	args := append([]string{"--config", writeTuning(tb, base, kafkaTuning),
		"--endpoint", "dead=http://" + dead.l.Addr().String() + "/hook,allow-private",
		"--kafka-brokers", strings.Join(brokers, ","), "--kafka-topic", "events", "--kafka-group", "e2e-dead",
		"--kafka-destination", "dead", "--changelog-topic", "outboxd-changelog", "--max-attempts", "100000"}, extra...)
	_, procs := startInstances(tb, base, n, args...)
	for _, p := range procs {
		tb.Cleanup(func() {
			select {
			case <-p.done:
			default:
				p.signal(syscall.SIGTERM, 20*time.Second)
			}
		})
	}
	testkit.WaitFor(tb, 30*time.Second, "every instance ready with all partitions assigned", func() bool {
		owned := 0
		for _, p := range procs {
			resp, err := client.Get(p.url("/readyz"))
			if err != nil {
				return false
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return false
			}
			_, parts := lastAssignment(p)
			owned += len(parts)
		}
		return owned == 6
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tr := &kafkago.Transport{DialTimeout: time.Second}
	defer tr.CloseIdleConnections()
	writeOrders(ctx, tb, brokers, tr, &kafkago.Murmur2Balancer{}, 3000)
	return &deadGroup{procs: procs, dead: dead}
}

// probes counts p's half-open lines for endpoint.
func probes(p *proc, endpoint string) int {
	n := 0
	for _, l := range breakerLog(p, endpoint) {
		if l.Msg == breakerHalfOpenMsg {
			n++
		}
	}
	return n
}

// checkOneBreaker checks that p's log shows one breaker for endpoint:
// opened, a probe, opened again, a probe, ... It returns the openings and
// the probes.
func checkOneBreaker(t *testing.T, p *proc, endpoint string) (opened, probed int) {
	t.Helper()
	for i, l := range breakerLog(p, endpoint) {
		want := breakerOpenedMsg
		if i%2 == 1 {
			want = breakerHalfOpenMsg
		}
		if l.Msg != want {
			t.Fatalf("breaker log line %d is %q; want %q (one breaker: opened, a probe, opened again, ...):\n%s",
				i, l.Msg, want, p.log)
		}
		if l.Msg == breakerOpenedMsg {
			opened++
		} else {
			probed++
		}
	}
	return opened, probed
}

// breakerArgs make cool-downs short, so that a test sees several.
var breakerArgs = []string{"--interval", "50ms", "--backoff-initial", "50ms", "--backoff-max", "100ms",
	"--breaker-cool-down", "300ms", "--breaker-max-cool-down", "300ms"}

// inlineBudget is how long after its first request a delivery may retry
// inline (httpsink's default InlineRetryBudget): the deliveries under way
// when the breaker first opened may connect until then.
const inlineBudget = 2 * time.Second

// settled returns the first of lines that is an opening later than the
// inline budget after the dead receiver's first connection: from then on,
// only probes connect.
func (g *deadGroup) settled(lines []breakerLine) (breakerLine, bool) {
	conns := g.dead.connections()
	if len(conns) == 0 {
		return breakerLine{}, false
	}
	for _, l := range lines {
		if l.Msg == breakerOpenedMsg && l.Time.After(conns[0].Add(inlineBudget)) {
			return l, true
		}
	}
	return breakerLine{}, false
}

// In group mode the partition stores of an instance share one breaker per
// endpoint: a dead endpoint with 3,000 pending events over 6 partitions
// opens one breaker (one log line and one transition in the metrics per
// opening), and each cool-down sends one probe, so the breaker's log is
// opened, half-open, opened, half-open, ... and once the deliveries under
// way at the first opening are over, the receiver sees one connection per
// probe.
func TestDeadEndpointOneBreakerPerInstance(t *testing.T) {
	g := startDeadGroup(t, 1, breakerArgs...)
	p := g.procs[0]
	testkit.WaitFor(t, 60*time.Second, "every record ingested and four probes after the inline retries", func() bool {
		_, stats := call(t, "GET", p.url("/v1/stats"), "", "")
		lines := breakerLog(p, "dead")
		from, ok := g.settled(lines)
		n := 0
		for _, l := range lines {
			if ok && l.Msg == breakerHalfOpenMsg && l.Time.After(from.Time) {
				n++
			}
		}
		return stats["pending"] == 3000.0 && n >= 4
	})
	// One transition in the metrics per opening line (read together, as
	// the breaker keeps reopening).
	testkit.WaitFor(t, 30*time.Second, "the metrics to count one transition per opening in the log", func() bool {
		opened := 0
		for _, l := range breakerLog(p, "dead") {
			if l.Msg == breakerOpenedMsg {
				opened++
			}
		}
		_, metrics := get(t, p.url("/metrics"))
		return strings.Contains(metrics, `outbox_breaker_transitions_total{endpoint="dead",state="open"} `+strconv.Itoa(opened)+"\n")
	})
	p.signal(syscall.SIGTERM, 20*time.Second)

	opened, probed := checkOneBreaker(t, p, "dead")
	lines := breakerLog(p, "dead")
	from, _ := g.settled(lines)
	probesAfter, connsAfter := 0, 0
	for _, l := range lines {
		if l.Msg == breakerHalfOpenMsg && l.Time.After(from.Time) {
			probesAfter++
		}
	}
	for _, at := range g.dead.connections() {
		if at.After(from.Time) {
			connsAfter++
		}
	}
	if connsAfter > probesAfter {
		t.Errorf("%d connections and %d probes since %s; want at most one connection per probe", connsAfter, probesAfter, from.Time)
	}
	t.Logf("%d openings, %d probes, %d connections in all; since the inline retries ended, %d probes and %d connections",
		opened, probed, len(g.dead.connections()), probesAfter, connsAfter)
}

// Three instances, two partitions each: each instance opens one breaker
// for the dead endpoint, whose log alternates openings and probes.
func TestDeadEndpointOneBreakerPerInstanceOfThree(t *testing.T) {
	g := startDeadGroup(t, 3, breakerArgs...)
	testkit.WaitFor(t, 60*time.Second, "every record ingested and probes from every instance", func() bool {
		_, stats := call(t, "GET", g.procs[0].url("/v1/stats?scope=cluster"), "", "")
		for _, p := range g.procs {
			if probes(p, "dead") < 2 {
				return false
			}
		}
		return stats["pending"] == 3000.0
	})
	for _, p := range g.procs {
		p.signal(syscall.SIGTERM, 20*time.Second)
	}
	for i, p := range g.procs {
		opened, probed := checkOneBreaker(t, p, "dead")
		t.Logf("instance %d: %d openings, %d probes", i, opened, probed)
	}
	t.Logf("%d connections in all", len(g.dead.connections()))
}

// BenchmarkDeadEndpointConnections reports how many connections a dead
// endpoint (every connection reset) sees in the first 60s of a backlog of
// 3,000 events over 6 partitions, on one instance and on three, with the
// default breaker and backoff settings, and how many "circuit breaker
// opened" lines the instances logged meanwhile. Run with -benchtime=1x.
func BenchmarkDeadEndpointConnections(b *testing.B) {
	const window = 60 * time.Second
	for _, n := range []int{1, 3} {
		b.Run(fmt.Sprintf("instances=%d", n), func(b *testing.B) {
			for range b.N {
				g := startDeadGroup(b, n)
				testkit.WaitFor(b, 30*time.Second, "the first connection", func() bool { return len(g.dead.connections()) > 0 })
				first := g.dead.connections()[0]
				testkit.WaitFor(b, window+10*time.Second, "the window to pass", func() bool { return time.Since(first) > window })
				opened := 0
				for _, p := range g.procs {
					for _, l := range breakerLog(p, "dead") {
						if l.Msg == breakerOpenedMsg && l.Time.Sub(first) <= window {
							opened++
						}
					}
				}
				b.ReportMetric(float64(g.dead.connectionsWithin(window)), "conns/60s")
				b.ReportMetric(float64(opened), "opened/60s")
			}
		})
	}
}
