package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
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

// endpointGroup is a group of outboxd instances on a 6-partition kfake
// cluster, delivering the topic "events" to one endpoint.
type endpointGroup struct {
	procs   []*proc
	dirs    []string // each instance's state directory
	args    []string // what they were started with
	brokers []string
}

// startEndpointGroup starts a 6-partition kfake cluster and n outboxd
// instances in one group delivering the topic "events" to the endpoint
// name at url, with extra arguments, and waits until every one is ready.
func startEndpointGroup(tb testing.TB, n int, name, url string, extra ...string) *endpointGroup {
	tb.Helper()
	cluster := newEventsCluster(tb, 6)
	tb.Cleanup(cluster.Close)
	base := tb.TempDir()
	brokers := cluster.ListenAddrs()
	args := append([]string{"--config", writeTuning(tb, base, kafkaTuning),
		"--endpoint", name + "=" + url + ",allow-private",
		"--kafka-brokers", strings.Join(brokers, ","), "--kafka-topic", "events", "--kafka-group", "e2e-" + name,
		"--kafka-destination", name, "--changelog-topic", "outboxd-changelog", "--max-attempts", "100000"}, extra...)
	dirs, procs := startInstances(tb, base, n, args...)
	g := &endpointGroup{procs: procs, dirs: dirs, args: args, brokers: brokers}
	g.stopAtCleanup(tb)
	g.waitReady(tb)
	return g
}

// stopAtCleanup stops the instances still running when the test ends.
func (g *endpointGroup) stopAtCleanup(tb testing.TB) {
	for _, p := range g.procs {
		tb.Cleanup(func() {
			select {
			case <-p.done:
			default:
				p.signal(syscall.SIGTERM, 20*time.Second)
			}
		})
	}
}

// waitReady waits until every instance is ready and the partitions are
// all assigned.
func (g *endpointGroup) waitReady(tb testing.TB) {
	tb.Helper()
	testkit.WaitFor(tb, 30*time.Second, "every instance ready with all partitions assigned", func() bool {
		owned := 0
		for _, p := range g.procs {
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
}

// restart starts every instance again on its state directory (they have
// exited) and waits until they are ready.
func (g *endpointGroup) restart(tb testing.TB) {
	tb.Helper()
	for i := range g.procs {
		g.procs[i] = start(tb, g.dirs[i], g.args...)
	}
	g.stopAtCleanup(tb)
	g.waitReady(tb)
}

// write writes n records for the endpoint over the 6 partitions.
func (g *endpointGroup) write(tb testing.TB, n int) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tr := &kafkago.Transport{DialTimeout: time.Second}
	defer tr.CloseIdleConnections()
	writeOrders(ctx, tb, g.brokers, tr, &kafkago.Murmur2Balancer{}, n)
}

// deadGroup is a group of outboxd instances delivering a backlog to an
// endpoint whose every connection is reset.
type deadGroup struct {
	*endpointGroup
	dead *resetListener
}

// startDeadGroup starts a dead receiver and n outboxd instances in one
// group delivering to it with extra arguments (startEndpointGroup), and
// writes 3,000 records for the dead endpoint over the 6 partitions.
func startDeadGroup(tb testing.TB, n int, extra ...string) *deadGroup {
	tb.Helper()
	dead := newResetListener(tb)
	g := startEndpointGroup(tb, n, "dead", "http://"+dead.l.Addr().String()+"/hook", extra...)
	g.write(tb, 3000)
	return &deadGroup{endpointGroup: g, dead: dead}
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

// groupMsgSuffix ends the log lines of a transition applied from another
// instance of the group.
const groupMsgSuffix = " by the group"

// checkOneBreaker checks that p's log shows one breaker for endpoint:
// opened, a probe, opened again, a probe, ... In a group, an opening may
// come from another instance (a line ending in groupMsgSuffix): the
// instance's own openings still have a probe of its own between each two
// (one breaker, not one per store), and its probes an opening, its own or
// the group's, between each two (one probe per cool-down). It returns the
// instance's own openings and probes.
func checkOneBreaker(t *testing.T, p *proc, endpoint string) (opened, probed int) {
	t.Helper()
	lastOwn, openedSinceProbe := "", true
	for i, l := range breakerLog(p, endpoint) {
		switch {
		case l.Msg == breakerOpenedMsg:
			if lastOwn == breakerOpenedMsg {
				t.Fatalf("breaker log line %d: opened again without a probe since its last opening (two breakers):\n%s", i, p.log)
			}
			lastOwn, openedSinceProbe = l.Msg, true
			opened++
		case l.Msg == breakerHalfOpenMsg:
			if !openedSinceProbe {
				t.Fatalf("breaker log line %d: a probe without an opening since the last probe (two probes per cool-down):\n%s", i, p.log)
			}
			lastOwn, openedSinceProbe = l.Msg, false
			probed++
		case strings.HasSuffix(l.Msg, "opened"+groupMsgSuffix):
			openedSinceProbe = true
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

// groupBreakerArgs make cool-downs short, so that a test sees several, but
// long next to the time a transition takes to reach the other instances.
var groupBreakerArgs = []string{"--interval", "50ms", "--backoff-initial", "50ms", "--backoff-max", "100ms",
	"--breaker-cool-down", "1s", "--breaker-max-cool-down", "1s"}

// groupCoolDown is the shortest cool-down of groupBreakerArgs: a second
// less the jitter of the breaker's cool-down (±20%).
const groupCoolDown = 800 * time.Millisecond

// quiet returns when the deliveries under way as the instances first held
// the endpoint are over: the inline budget after the last of the
// instances' first holds (its own opening, or one applied from the group);
// zero while an instance has not held it yet.
func (g *deadGroup) quiet() time.Time {
	var last time.Time
	for _, p := range g.procs {
		lines := breakerLog(p, "dead")
		if len(lines) == 0 {
			return time.Time{}
		}
		if lines[0].Time.After(last) {
			last = lines[0].Time
		}
	}
	return last.Add(inlineBudget)
}

// Three instances, two partitions each, share the dead endpoint's state
// through the group's endpoints topic: each instance opens at most one
// breaker (its own log alternates openings and probes), and once the
// deliveries under way at the first openings are over, the probes of the
// one instance that owns the endpoint's partition are all that reaches
// the receiver: at most one connection per cool-down across the group,
// and one per probe.
func TestDeadEndpointOneBreakerPerInstanceOfThree(t *testing.T) {
	g := startDeadGroup(t, 3, groupBreakerArgs...)
	var from time.Time
	testkit.WaitFor(t, 60*time.Second, "every record ingested and four connections after the inline retries", func() bool {
		_, stats := call(t, "GET", g.procs[0].url("/v1/stats?scope=cluster"), "", "")
		if from = g.quiet(); from.IsZero() {
			return false
		}
		n := 0
		for _, at := range g.dead.connections() {
			if at.After(from) {
				n++
			}
		}
		return stats["pending"] == 3000.0 && n >= 4
	})
	for _, p := range g.procs {
		p.signal(syscall.SIGTERM, 20*time.Second)
	}
	probers := 0
	for i, p := range g.procs {
		opened, probed := checkOneBreaker(t, p, "dead")
		after := 0
		for _, l := range breakerLog(p, "dead") {
			if l.Msg == breakerHalfOpenMsg && l.Time.After(from) {
				after++
			}
		}
		if after > 0 {
			probers++
		}
		t.Logf("instance %d: %d openings, %d probes (%d since %s)", i, opened, probed, after, from.Format(time.StampMilli))
	}
	var late []time.Time
	for _, at := range g.dead.connections() {
		if at.After(from) {
			late = append(late, at)
		}
	}
	after := len(late)
	for i := 1; i < len(late); i++ {
		if gap := late[i].Sub(late[i-1]); gap < groupCoolDown {
			t.Errorf("connections at %s and %s, %s apart; want at most one per cool-down across the group (at least %s apart)",
				late[i-1].Format(time.StampMilli), late[i].Format(time.StampMilli), gap, groupCoolDown)
		}
	}
	checkOneConnectionPerProbe(t, g.procs, late)
	t.Logf("%d connections in all, %d since the inline retries ended; %d instances probed since", len(g.dead.connections()), after, probers)
}

// checkOneConnectionPerProbe checks that each of the connections late
// (in order, all made by probes) had a probe of its own: a probe logged by
// one of procs since the connection before it. A probe that retried inline
// would make connections with no probe logged between them.
func checkOneConnectionPerProbe(t *testing.T, procs []*proc, late []time.Time) {
	t.Helper()
	var logged []time.Time
	for _, p := range procs {
		for _, l := range breakerLog(p, "dead") {
			if l.Msg == breakerHalfOpenMsg {
				logged = append(logged, l.Time)
			}
		}
	}
	for i := 1; i < len(late); i++ {
		if !slices.ContainsFunc(logged, func(at time.Time) bool { return at.After(late[i-1]) && !at.After(late[i]) }) {
			t.Errorf("connections at %s and %s with no probe logged between them; want one connection per probe",
				late[i-1].Format(time.StampMilli), late[i].Format(time.StampMilli))
		}
	}
}

// endpointDisabled returns whether p holds endpoint disabled, from its own
// GET /v1/endpoints/{name} (answered for the instance alone).
func endpointDisabled(t *testing.T, p *proc, endpoint string) bool {
	t.Helper()
	code, ep := call(t, "GET", p.url("/v1/endpoints/"+endpoint+"?scope=local"), "", "")
	if code != http.StatusOK {
		t.Fatalf("GET /v1/endpoints/%s: %d %v", endpoint, code, ep)
	}
	return ep["disabled"] == true
}

// A receiver answering 410 to the one event of the group (and 204 to what
// follows) disables the
// endpoint on the instance that delivered it, which publishes the disable:
// every instance holds it within a second (logged), and holds it still
// after every instance is SIGKILLed and started again (the instances that
// never delivered to it learn it from the group's endpoints topic). An
// enable sent to one instance alone lifts it on all of them.
func TestGoneEndpointDisabledOnEveryInstance(t *testing.T) {
	var answers atomic.Int64 // 410 to the first request, then 204
	gone := newReceiver(t, func(*http.Request, string) int {
		if answers.Add(1) == 1 {
			return http.StatusGone
		}
		return http.StatusNoContent
	})
	g := startEndpointGroup(t, 3, "gone", gone.URL+"/hook", groupBreakerArgs...)
	g.write(t, 1)
	testkit.WaitFor(t, 30*time.Second, "the event's 410", func() bool { return len(gone.Requests()) > 0 })
	answered := gone.Requests()[0].At
	seen := make([]time.Time, len(g.procs))
	testkit.WaitFor(t, 10*time.Second, "every instance to hold the endpoint disabled", func() bool {
		all := true
		for i, p := range g.procs {
			if seen[i].IsZero() && endpointDisabled(t, p, "gone") {
				seen[i] = time.Now()
			}
			all = all && !seen[i].IsZero()
		}
		return all
	})
	for i, at := range seen {
		t.Logf("instance %d held the endpoint disabled %s after the 410", i, at.Sub(answered).Round(time.Millisecond))
	}

	for _, p := range g.procs {
		p.signal(syscall.SIGKILL, 20*time.Second)
	}
	g.restart(t)
	for i, p := range g.procs {
		if !endpointDisabled(t, p, "gone") {
			t.Errorf("instance %d does not hold the endpoint disabled after the group's restart", i)
		}
	}

	// Sent to one instance alone (as a member forwards it): the others
	// learn it from the group's endpoints topic.
	req, err := http.NewRequest("POST", g.procs[1].url("/v1/endpoints/gone/enable"), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Outbox-Forwarded-By", "e2e")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /v1/endpoints/gone/enable to instance 1: %d", resp.StatusCode)
	}
	testkit.WaitFor(t, 10*time.Second, "every instance to lift the disable", func() bool {
		for _, p := range g.procs {
			if endpointDisabled(t, p, "gone") {
				return false
			}
		}
		return true
	})
}

// BenchmarkDeadEndpointConnections reports how many connections a dead
// endpoint (every connection reset) sees in the first 60s of a backlog of
// 3,000 events over 6 partitions, on one instance and on three, with the
// default breaker and backoff settings; of them, how many came once the
// deliveries under way at the instances' first holds were over (late: the
// probes); and how many "circuit breaker opened" lines the instances
// logged meanwhile. Run with -benchtime=1x.
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
				late := 0
				if quiet := g.quiet(); !quiet.IsZero() {
					for _, at := range g.dead.connections() {
						if at.After(quiet) && at.Sub(first) <= window {
							late++
						}
					}
				}
				b.ReportMetric(float64(g.dead.connectionsWithin(window)), "conns/60s")
				b.ReportMetric(float64(late), "late-conns/60s")
				b.ReportMetric(float64(opened), "opened/60s")
			}
		})
	}
}
