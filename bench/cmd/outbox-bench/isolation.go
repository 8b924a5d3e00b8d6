package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/outboxd/outbox/httpsink"
	"github.com/outboxd/outbox/outbox"
)

// The isolation scenario measures what endpoint isolation promises: a dead,
// hanging, slow or flapping receiver delays only itself. Every receiver is a
// local HTTP server on 127.0.0.1; the outbox runs with outboxd's defaults
// (64 workers, adaptive per-endpoint limits starting at 4) unless a part
// says otherwise. -isolation-scale 1 is the size the targets are stated at
// (30,000 dead events, a 30 s trickle, a 10 s hang, 500 ms answers, a 60 s
// outage); smaller scales shrink event counts, durations and, below 1, the
// engine's own timers (punctuation interval, first backoff, breaker
// cool-down) by the same factor, so that every part still runs, briefly,
// and still checks that nothing is lost. Only scale 1 gives figures to
// compare with the targets.

// isoRow is one figure of the isolation table: a measured value, the
// baseline measured in the same run when there is one, and the target.
type isoRow struct {
	Figure   string
	Value    figure
	BaseName string
	Base     figure // Unit 0: no baseline
	Target   string
	Met      bool
}

func (r isoRow) ratioString() string {
	if r.Base.Unit == 0 {
		return "—"
	}
	return row{Figure: r.Value, Base: r.Base}.ratioString()
}

// writeIsolation prints the isolation figures as a Markdown table.
func writeIsolation(w io.Writer, scale float64, rows []isoRow) error {
	var b strings.Builder
	fmt.Fprintf(&b, "\nEndpoint isolation (-isolation-scale %g):\n\n", scale)
	b.WriteString("| figure | measured | baseline (same run) | baseline | ratio | target | met |\n")
	b.WriteString("|---|---:|---|---:|---:|---|---|\n")
	for _, r := range rows {
		base, baseName := "—", "—"
		if r.Base.Unit != 0 {
			base, baseName = r.Base.String(), r.BaseName
		}
		met := "no"
		if r.Met {
			met = "yes"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s |\n", r.Figure, r.Value, baseName, base, r.ratioString(), r.Target, met)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func (b *bench) addIso(r isoRow) {
	b.iso = append(b.iso, r)
	met := "met"
	if !r.Met {
		met = "MISSED"
	}
	if r.Base.Unit != 0 {
		b.logf("isolation: %s: %s vs %s %s (%s); target %s: %s", r.Figure, r.Value, r.BaseName, r.Base, r.ratioString(), r.Target, met)
	} else {
		b.logf("isolation: %s: %s; target %s: %s", r.Figure, r.Value, r.Target, met)
	}
}

// lost records a broken promise (an event not delivered, or dead): the run
// prints its tables and then fails.
func (b *bench) lost(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	b.failures = append(b.failures, msg)
	b.logf("isolation: FAILED: %s", msg)
}

// isoScale turns the full-scale numbers into this run's.
type isoScale float64

func (s isoScale) n(full, least int) int {
	return max(least, int(math.Round(float64(full)*float64(s))))
}

func (s isoScale) d(full, least time.Duration) time.Duration {
	return max(least, time.Duration(float64(full)*float64(s)))
}

// engine returns the outbox configuration of a part: outboxd's defaults
// at scale 1, with the engine's timers shrunk below it.
func (s isoScale) engine(cfg outbox.Config) outbox.Config {
	if s < 1 {
		cfg.Interval = s.d(outbox.DefaultInterval, 50*time.Millisecond)
		cfg.BackoffInitial = s.d(outbox.DefaultBackoffInitial, 50*time.Millisecond)
		cfg.Breaker.CoolDown = s.d(outbox.DefaultBreakerCoolDown, 100*time.Millisecond)
		// The cool-down's growth is capped low too: a probe that lands in
		// one of part 6's short 503 phases must not push the next one past
		// the run's wait.
		cfg.Breaker.MaxCoolDown = min(s.d(outbox.DefaultBreakerMaxCoolDown, time.Second), 8*cfg.Breaker.CoolDown)
	}
	return cfg
}

// isoReceiver is a loopback HTTP endpoint whose answer (a delay, then a
// status) is chosen per request, that can reset every connection it
// accepts instead of serving it, and that counts connections and requests
// and records when each event (webhook-id) first arrived in a request it
// answered 200.
type isoReceiver struct {
	URL    string
	ln     *countingListener
	srv    *http.Server
	served chan struct{}
	quit   chan struct{}
	answer func(now time.Time) (time.Duration, int)

	requests atomic.Int64

	mu   sync.Mutex
	seen map[string]time.Time
}

// countingListener counts accepted connections and, while reset is set,
// closes each at once with an RST (SO_LINGER 0) instead of serving it.
type countingListener struct {
	net.Listener
	accepted atomic.Int64
	reset    atomic.Bool
}

func (l *countingListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		l.accepted.Add(1)
		if !l.reset.Load() {
			return c, nil
		}
		if tc, ok := c.(*net.TCPConn); ok {
			tc.SetLinger(0)
		}
		c.Close()
	}
}

// startIsoReceiver serves answer on a loopback port; nil answer is 200 at
// once.
func startIsoReceiver(answer func(now time.Time) (time.Duration, int)) (*isoReceiver, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	if answer == nil {
		answer = func(time.Time) (time.Duration, int) { return 0, http.StatusOK }
	}
	r := &isoReceiver{
		URL:    "http://" + ln.Addr().String() + "/hook",
		ln:     &countingListener{Listener: ln},
		served: make(chan struct{}),
		quit:   make(chan struct{}),
		answer: answer,
		seen:   make(map[string]time.Time),
	}
	r.srv = &http.Server{Handler: r, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		defer close(r.served)
		r.srv.Serve(r.ln)
	}()
	return r, nil
}

func (r *isoReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	now := time.Now()
	r.requests.Add(1)
	io.Copy(io.Discard, req.Body)
	delay, status := r.answer(now)
	if delay > 0 {
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-req.Context().Done():
			t.Stop()
			return
		case <-r.quit:
			// Closing: drop the connection rather than answer, so a
			// hanging request is never counted as delivered.
			t.Stop()
			panic(http.ErrAbortHandler)
		}
	}
	if status == http.StatusOK {
		if id := req.Header.Get("webhook-id"); id != "" {
			r.mu.Lock()
			if _, ok := r.seen[id]; !ok {
				r.seen[id] = now
			}
			r.mu.Unlock()
		}
	}
	w.WriteHeader(status)
}

func (r *isoReceiver) arrival(id string) (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t, ok := r.seen[id]
	return t, ok
}

// abort releases the requests the receiver is holding, without an answer.
func (r *isoReceiver) abort() {
	select {
	case <-r.quit:
	default:
		close(r.quit)
	}
}

func (r *isoReceiver) Close() error {
	r.abort()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := r.srv.Shutdown(ctx)
	<-r.served
	return err
}

// refusedURL is a loopback URL on which nothing listens: every connection
// is refused.
func refusedURL() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr + "/hook", nil
}

// tally counts delivery attempts by endpoint through Hooks.OnDelivery.
type tally struct {
	mu       sync.Mutex
	ok       map[string]int
	attempts map[string]int
	dead     int
}

func newTally() *tally {
	return &tally{ok: make(map[string]int), attempts: make(map[string]int)}
}

func (t *tally) hooks() outbox.Hooks {
	return outbox.Hooks{OnDelivery: func(info outbox.DeliveryInfo) {
		t.mu.Lock()
		defer t.mu.Unlock()
		t.attempts[info.Endpoint]++
		if info.Action == outbox.ActionSuccess {
			t.ok[info.Endpoint]++
		}
		if info.Dead {
			t.dead++
		}
	}}
}

func (t *tally) delivered(ep string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.ok[ep]
}

func (t *tally) attempted(ep string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.attempts[ep]
}

func (t *tally) deadLetters() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.dead
}

// waitUntil polls cond every 10ms until it holds (true), d passes or ctx
// ends (false).
func waitUntil(ctx context.Context, d time.Duration, cond func() bool) bool {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline.C:
			return cond()
		case <-ctx.Done():
			return false
		}
	}
	return true
}

// sleepCtx waits d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// isoOutbox is one outbox delivering to named loopback endpoints.
type isoOutbox struct {
	o    *outbox.Outbox
	t    *tally
	stop func()
}

// openIso opens a new outbox file delivering to endpoints (name → URL)
// with cfg and 64 workers unless cfg says otherwise.
func (b *bench) openIso(name string, endpoints map[string]string, cfg outbox.Config) (*isoOutbox, error) {
	if cfg.Concurrency == 0 {
		cfg.Concurrency = outbox.DefaultConcurrency
	}
	var eps []httpsink.Endpoint
	for n, u := range endpoints {
		eps = append(eps, httpsink.Endpoint{Name: n, URL: u})
	}
	sink, err := httpsink.New(httpsink.Config{Endpoints: eps, AllowPrivateNetworks: true, PoolSize: cfg.Concurrency})
	if err != nil {
		return nil, err
	}
	t := newTally()
	cfg.Sink = sink
	cfg.Hooks = t.hooks()
	cfg.NoKeyIndex = true // as outboxd without ordering
	path := filepath.Join(b.dir, name)
	o, err := outbox.Open(path, cfg)
	if err != nil {
		sink.Close()
		return nil, err
	}
	return &isoOutbox{o: o, t: t, stop: func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := o.Stop(ctx); err != nil {
			b.logf("stop: %v", err)
		}
		sink.Close()
		os.Remove(path)
	}}, nil
}

// enqueueTo stores n events for endpoint ep in calls of up to 1,000.
func (b *bench) enqueueTo(ctx context.Context, o *outbox.Outbox, ep string, n int) ([]string, error) {
	p := b.payload()
	ids := make([]string, 0, n)
	for len(ids) < n {
		k := min(1000, n-len(ids))
		evs := make([]outbox.Event, k)
		for i := range evs {
			evs[i] = outbox.Event{Destination: ep, Payload: p}
		}
		got, err := o.Enqueue(ctx, evs...)
		if err != nil {
			return nil, err
		}
		ids = append(ids, got...)
	}
	return ids, nil
}

// trickle enqueues one event for ep every 1/rate s for d and returns when
// each Enqueue call started, by event ID.
func (b *bench) trickle(ctx context.Context, o *outbox.Outbox, ep string, rate int, d time.Duration) (map[string]time.Time, error) {
	n := max(1, int(d.Seconds()*float64(rate)))
	starts := make(map[string]time.Time, n)
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	p := b.payload()
	for range n {
		select {
		case <-tick.C:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		t0 := time.Now()
		ids, err := o.Enqueue(ctx, outbox.Event{Destination: ep, Payload: p})
		if err != nil {
			return nil, err
		}
		starts[ids[0]] = t0
	}
	return starts, nil
}

// trickleLatency waits (up to d) for every trickled event to reach r and
// returns the enqueue-to-arrival latencies, and how many did not arrive:
// those count with their age at the end of the wait, a lower bound.
func trickleLatency(ctx context.Context, r *isoReceiver, starts map[string]time.Time, d time.Duration) ([]time.Duration, int) {
	waitUntil(ctx, d, func() bool {
		for id := range starts {
			if _, ok := r.arrival(id); !ok {
				return false
			}
		}
		return true
	})
	end := time.Now()
	lat := make([]time.Duration, 0, len(starts))
	missing := 0
	for id, t0 := range starts {
		t, ok := r.arrival(id)
		if !ok {
			missing++
			t = end
		}
		lat = append(lat, t.Sub(t0))
	}
	return lat, missing
}

// undelivered qualifies a latency figure of which missing of n events
// never arrived.
func undelivered(missing, n int) string {
	if missing == 0 {
		return ""
	}
	return fmt.Sprintf(" (%s of %s never arrived: counted at the wait's end, a lower bound)", thousands(float64(missing)), thousands(float64(n)))
}

const (
	trickleRate = 20 // healthy events per second beside a failing endpoint
	latencyGoal = time.Second
)

func isolationScenario(ctx context.Context, b *bench) error {
	s := isoScale(b.cfg.IsolationScale)
	b.logf("load average before: %s", loadAvg())
	defer func() { b.logf("load average after: %s", loadAvg()) }()
	steps := []struct {
		parts []int
		run   func(context.Context, *bench, isoScale) error
	}{
		{[]int{1, 2}, isoDeadAndSlowEndpoints},
		{[]int{3}, isoSlowBeside},
		{[]int{4}, isoResetOutage},
		{[]int{5}, isoAdaptiveDrain},
		{[]int{6}, isoFlapping},
	}
	for _, step := range steps {
		if b.cfg.IsolationParts != nil && !slices.ContainsFunc(step.parts, func(p int) bool { return slices.Contains(b.cfg.IsolationParts, p) }) {
			continue
		}
		if err := step.run(ctx, b, s); err != nil {
			return err
		}
	}
	return nil
}

// loadAvg is the first three fields of /proc/loadavg, or "n/a".
func loadAvg() string {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "n/a"
	}
	f := strings.Fields(string(raw))
	if len(f) < 3 {
		return "n/a"
	}
	return strings.Join(f[:3], " ")
}

// isoDeadAndSlowEndpoints: a healthy endpoint's trickle (20 events/s for
// 30 s) alone (the baseline); beside 30,000 events for an endpoint that
// refuses connections; and beside 500 events for an endpoint that answers
// after 10 s, with the defaults and with MaxPerEndpoint 16.
func isoDeadAndSlowEndpoints(ctx context.Context, b *bench, s isoScale) error {
	healthy, err := startIsoReceiver(nil)
	if err != nil {
		return err
	}
	defer healthy.Close()
	span := s.d(30*time.Second, time.Second)
	grace := s.d(30*time.Second, 10*time.Second)

	// runTrickle trickles to the healthy endpoint of an outbox that also
	// delivers to other (pre-filled with backlog events) and returns the
	// latencies.
	runTrickle := func(name string, other map[string]string, backlog int, cfg outbox.Config) ([]time.Duration, int, error) {
		eps := map[string]string{"healthy": healthy.URL}
		for k, v := range other {
			eps[k] = v
		}
		ob, err := b.openIso(name, eps, s.engine(cfg))
		if err != nil {
			return nil, 0, err
		}
		defer ob.stop()
		for k := range other {
			if _, err := b.enqueueTo(ctx, ob.o, k, backlog); err != nil {
				return nil, 0, err
			}
		}
		if err := ob.o.Start(); err != nil {
			return nil, 0, err
		}
		starts, err := b.trickle(ctx, ob.o, "healthy", trickleRate, span)
		if err != nil {
			return nil, 0, err
		}
		lat, missing := trickleLatency(ctx, healthy, starts, grace)
		if missing > 0 {
			b.lost("%s: %d of %d healthy events not delivered %s after the trickle", name, missing, len(starts), grace)
		}
		for k := range other {
			b.logf("%s: %s: %d attempts, %d delivered while the healthy endpoint was trickled to", name, k, ob.t.attempted(k), ob.t.delivered(k))
		}
		return lat, missing, nil
	}

	base, missing, err := runTrickle("iso-alone.db", nil, 0, outbox.Config{})
	if err != nil {
		return err
	}
	if missing > 0 {
		return fmt.Errorf("baseline: %d of %d healthy events not delivered", missing, len(base))
	}
	baseP := map[float64]float64{50: ms(percentile(base, 50)), 99: ms(percentile(base, 99)), 100: ms(percentile(base, 100))}
	baseName := fmt.Sprintf("healthy endpoint alone, %d events/s", trickleRate)

	dead, err := refusedURL()
	if err != nil {
		return err
	}
	deadN := s.n(30000, 300)
	lat, missing, err := runTrickle("iso-dead.db", map[string]string{"dead": dead}, deadN, outbox.Config{})
	if err != nil {
		return err
	}
	for _, p := range []struct {
		q    float64
		name string
	}{{50, "p50"}, {99, "p99"}, {100, "max"}} {
		v := ms(percentile(lat, p.q))
		r := isoRow{
			Figure:   fmt.Sprintf("1. healthy %s beside %s events for a refusing endpoint%s", p.name, thousands(float64(deadN)), undelivered(missing, len(lat))),
			Value:    figure{v, millis, ""},
			BaseName: baseName, Base: figure{baseP[p.q], millis, ""},
			Target: "—", Met: true,
		}
		if p.q == 99 {
			r.Target, r.Met = "≤ 1,000 ms", missing == 0 && v <= ms(latencyGoal)
		}
		b.addIso(r)
	}

	hang := s.d(10*time.Second, 200*time.Millisecond)
	hangN := s.n(500, 20)
	hanging, err := startIsoReceiver(func(time.Time) (time.Duration, int) { return hang, http.StatusOK })
	if err != nil {
		return err
	}
	defer hanging.Close()
	for _, mpe := range []int{0, 16} {
		name, label := "iso-hang.db", "defaults"
		if mpe > 0 {
			name, label = fmt.Sprintf("iso-hang-%d.db", mpe), fmt.Sprintf("MaxPerEndpoint %d", mpe)
		}
		lat, missing, err := runTrickle(name, map[string]string{"hanging": hanging.URL}, hangN, outbox.Config{MaxPerEndpoint: mpe})
		if err != nil {
			return err
		}
		v := ms(percentile(lat, 99))
		b.addIso(isoRow{
			Figure:   fmt.Sprintf("2. healthy p99 beside %d events for an endpoint answering after %s, %s%s", hangN, hang, label, undelivered(missing, len(lat))),
			Value:    figure{v, millis, ""},
			BaseName: baseName, Base: figure{baseP[99], millis, ""},
			Target: "≤ 1,000 ms", Met: missing == 0 && v <= ms(latencyGoal),
		})
	}
	return nil
}

// isoSlowBeside: 5,000 events for an endpoint answering at once, alone
// (the baseline) and beside 5,000 events for one answering after 500 ms,
// 64 workers: the fast endpoint's drain rate, and how long the slow one
// takes to get all of its events.
func isoSlowBeside(ctx context.Context, b *bench, s isoScale) error {
	n := s.n(5000, 100)
	slowDelay := s.d(500*time.Millisecond, 20*time.Millisecond)
	fast, err := startIsoReceiver(nil)
	if err != nil {
		return err
	}
	defer fast.Close()
	slow, err := startIsoReceiver(func(time.Time) (time.Duration, int) { return slowDelay, http.StatusOK })
	if err != nil {
		return err
	}
	defer slow.Close()
	drainWait := s.d(2*time.Minute, 30*time.Second)

	// Baseline: the fast endpoint alone.
	ob, err := b.openIso("iso-fast.db", map[string]string{"fast": fast.URL}, s.engine(outbox.Config{}))
	if err != nil {
		return err
	}
	if _, err := b.enqueueTo(ctx, ob.o, "fast", n); err != nil {
		ob.stop()
		return err
	}
	start := time.Now()
	if err := ob.o.Start(); err != nil {
		ob.stop()
		return err
	}
	ok := waitUntil(ctx, drainWait, func() bool { return ob.t.delivered("fast") >= n })
	alone := float64(ob.t.delivered("fast")) / time.Since(start).Seconds()
	ob.stop()
	if !ok {
		b.lost("fast endpoint alone: %d of %d delivered in %s", ob.t.delivered("fast"), n, drainWait)
	}

	ob, err = b.openIso("iso-slow.db", map[string]string{"fast": fast.URL, "slow": slow.URL}, s.engine(outbox.Config{}))
	if err != nil {
		return err
	}
	defer ob.stop()
	// The slow endpoint's events are older: they come first in every
	// order but a fair one.
	if _, err := b.enqueueTo(ctx, ob.o, "slow", n); err != nil {
		return err
	}
	if _, err := b.enqueueTo(ctx, ob.o, "fast", n); err != nil {
		return err
	}
	start = time.Now()
	if err := ob.o.Start(); err != nil {
		return err
	}
	ok = waitUntil(ctx, drainWait, func() bool { return ob.t.delivered("fast") >= n })
	beside := float64(ob.t.delivered("fast")) / time.Since(start).Seconds()
	if !ok {
		b.lost("fast endpoint beside the slow one: %d of %d delivered in %s", ob.t.delivered("fast"), n, drainWait)
	}
	b.addIso(isoRow{
		Figure:   fmt.Sprintf("3. fast endpoint's drain beside a %s endpoint, %s events each, 64 workers", slowDelay, thousands(float64(n))),
		Value:    figure{beside, perSecond, "events"},
		BaseName: "fast endpoint alone", Base: figure{alone, perSecond, "events"},
		Target: "≥ 0.90×", Met: beside >= 0.9*alone,
	})
	slowWait := s.d(3*time.Minute, 30*time.Second)
	ok = waitUntil(ctx, slowWait, func() bool { return ob.t.delivered("slow") >= n })
	took := time.Since(start)
	if !ok {
		b.lost("slow endpoint: %d of %d delivered in %s", ob.t.delivered("slow"), n, slowWait)
	}
	ideal := time.Duration(float64(n)/float64(outbox.DefaultConcurrency)) * slowDelay
	what := fmt.Sprintf("all %s", thousands(float64(n)))
	if !ok {
		what = fmt.Sprintf("only %s of %s", thousands(float64(ob.t.delivered("slow"))), thousands(float64(n)))
	}
	b.addIso(isoRow{
		Figure: fmt.Sprintf("3. slow endpoint: %s events delivered after (%s at 64 in flight)", what, ideal),
		Value:  figure{took.Seconds(), seconds, ""},
		Target: "all delivered", Met: ok,
	})
	b.logf("slow endpoint: %d attempts for %d events", ob.t.attempted("slow"), n)
	return nil
}

// isoResetOutage: 2,000 events for an endpoint that resets every
// connection, 64 workers: connections it accepts in 60 s; then it answers
// 200: how long until all 2,000 are delivered.
func isoResetOutage(ctx context.Context, b *bench, s isoScale) error {
	n := s.n(2000, 50)
	window := s.d(60*time.Second, 2*time.Second)
	rcv, err := startIsoReceiver(nil)
	if err != nil {
		return err
	}
	defer rcv.Close()
	rcv.ln.reset.Store(true)
	ob, err := b.openIso("iso-reset.db", map[string]string{"resetting": rcv.URL}, s.engine(outbox.Config{Concurrency: 64}))
	if err != nil {
		return err
	}
	defer ob.stop()
	if _, err := b.enqueueTo(ctx, ob.o, "resetting", n); err != nil {
		return err
	}
	if err := ob.o.Start(); err != nil {
		return err
	}
	if err := sleepCtx(ctx, window); err != nil {
		return err
	}
	conns := rcv.ln.accepted.Load()
	attempts := ob.t.attempted("resetting")
	limit := max(1, int64(math.Round(30*float64(s))))
	b.addIso(isoRow{
		Figure: fmt.Sprintf("4. connections a resetting endpoint accepts in %s, %s pending, 64 workers", window, thousands(float64(n))),
		Value:  figure{float64(conns), count, "connections"},
		Target: fmt.Sprintf("≤ %d", limit), Met: conns <= limit,
	})
	b.logf("resetting endpoint: %d attempts recorded in %s", attempts, window)

	rcv.ln.reset.Store(false)
	recovered := time.Now()
	wait := s.d(5*time.Minute, 30*time.Second)
	ok := waitUntil(ctx, wait, func() bool { return ob.t.delivered("resetting") >= n })
	took := time.Since(recovered)
	var what string
	if !ok {
		b.lost("after the outage: %d of %d delivered in %s", ob.t.delivered("resetting"), n, wait)
	}
	goal := s.d(20*time.Second, 0)
	what = fmt.Sprintf("all %s", thousands(float64(n)))
	if !ok {
		what = fmt.Sprintf("only %s of %s", thousands(float64(ob.t.delivered("resetting"))), thousands(float64(n)))
	}
	b.addIso(isoRow{
		Figure: fmt.Sprintf("4. %s delivered after the endpoint recovers", what),
		Value:  figure{took.Seconds(), seconds, ""},
		Target: fmt.Sprintf("≤ %s", goal), Met: ok && took <= goal,
	})
	return nil
}

// isoAdaptiveDrain: a healthy endpoint (spending -receiver-delay per
// request) drained with adaptive limits and with them off, in interleaved
// rounds.
func isoAdaptiveDrain(ctx context.Context, b *bench, s isoScale) error {
	n := s.n(20000, 300)
	const pairs = 3
	d := b.cfg.ReceiverDelay
	rcv, err := startIsoReceiver(func(time.Time) (time.Duration, int) { return d, http.StatusOK })
	if err != nil {
		return err
	}
	defer rcv.Close()
	var took [2]time.Duration // adaptive, fixed
	round := 0
	drain := func(fixed bool) error {
		round++
		ob, err := b.openIso(fmt.Sprintf("iso-drain-%d.db", round), map[string]string{"recv": rcv.URL}, s.engine(outbox.Config{NoAdaptiveConcurrency: fixed}))
		if err != nil {
			return err
		}
		defer ob.stop()
		if _, err := b.enqueueTo(ctx, ob.o, "recv", n); err != nil {
			return err
		}
		start := time.Now()
		if err := ob.o.Start(); err != nil {
			return err
		}
		wait := s.d(2*time.Minute, 30*time.Second)
		if !waitUntil(ctx, wait, func() bool { return ob.t.delivered("recv") >= n }) {
			b.lost("drain round %d: %d of %d delivered in %s", round, ob.t.delivered("recv"), n, wait)
		}
		i := 0
		if fixed {
			i = 1
		}
		took[i] += time.Since(start)
		return nil
	}
	for p := range pairs {
		// ABBA order so that a trend in the machine's speed hits both.
		first := p%2 == 1
		if err := drain(first); err != nil {
			return err
		}
		if err := drain(!first); err != nil {
			return err
		}
	}
	adaptive := float64(pairs*n) / took[0].Seconds()
	fixed := float64(pairs*n) / took[1].Seconds()
	b.addIso(isoRow{
		Figure:   fmt.Sprintf("5. drain of %s events, receiver works %s, adaptive limits (%d rounds)", thousands(float64(n)), d, pairs),
		Value:    figure{adaptive, perSecond, "events"},
		BaseName: "same with --adaptive-concurrency=false, interleaved", Base: figure{fixed, perSecond, "events"},
		Target: "≥ 0.95×", Met: adaptive >= 0.95*fixed,
	})
	return nil
}

// isoFlapping: events enqueued at 100/s for 20 s for a receiver that
// answers 200 and 503 in alternating 2 s phases, until all are delivered:
// lost events and requests per event, adaptive limits against them off,
// in two pairs of runs in ABBA order.
func isoFlapping(ctx context.Context, b *bench, s isoScale) error {
	phase := s.d(2*time.Second, 100*time.Millisecond)
	span := s.d(20*time.Second, time.Second)
	const rate = 100
	// Per side (0: adaptive off, 1: adaptive): events, HTTP requests,
	// recorded attempts, events lost.
	var events, requests, attempts, lost [2]int
	for run, fixed := range []bool{true, false, false, true} {
		side := 1
		label := "adaptive"
		if fixed {
			side, label = 0, "adaptive off"
		}
		t0 := time.Now()
		rcv, err := startIsoReceiver(func(now time.Time) (time.Duration, int) {
			if (now.Sub(t0)/phase)%2 == 0 {
				return 0, http.StatusOK
			}
			return 0, http.StatusServiceUnavailable
		})
		if err != nil {
			return err
		}
		ob, err := b.openIso(fmt.Sprintf("iso-flap-%d.db", run), map[string]string{"flapping": rcv.URL}, s.engine(outbox.Config{NoAdaptiveConcurrency: fixed}))
		if err != nil {
			rcv.Close()
			return err
		}
		if err := ob.o.Start(); err != nil {
			ob.stop()
			rcv.Close()
			return err
		}
		// The first adaptive run's in-flight limit is sampled for
		// -isolation-chart, from the receiver's start to the run's end.
		var stopSampling func() *limitTrace
		if b.cfg.IsolationChart != "" && !fixed && b.limitTrace == nil {
			stopSampling = sampleLimit(ctx, ob.o, "flapping", t0, phase, span)
		}
		starts, err := b.trickle(ctx, ob.o, "flapping", rate, span)
		if err != nil {
			if stopSampling != nil {
				stopSampling()
			}
			ob.stop()
			rcv.Close()
			return err
		}
		n := len(starts)
		wait := s.d(5*time.Minute, 30*time.Second)
		waitUntil(ctx, wait, func() bool { return ob.t.delivered("flapping")+ob.t.deadLetters() >= n })
		if stopSampling != nil {
			b.limitTrace = stopSampling()
			b.logf("flapping receiver, %s: %d samples of the in-flight limit; %s", label, len(b.limitTrace.Samples), b.limitTrace.summary())
		}
		ob.stop()
		rcv.Close()
		missing := 0
		for id := range starts {
			if _, ok := rcv.arrival(id); !ok {
				missing++
			}
		}
		if missing > 0 || ob.t.deadLetters() > 0 {
			b.lost("flapping receiver, %s: %d of %d events never answered 200, %d dead letters", label, missing, n, ob.t.deadLetters())
		}
		events[side] += n
		requests[side] += int(rcv.requests.Load())
		attempts[side] += ob.t.attempted("flapping")
		lost[side] += max(missing, ob.t.deadLetters())
		b.logf("flapping receiver, %s: %d events, %d requests, %d recorded attempts, %d missing, %d dead", label, n, rcv.requests.Load(), ob.t.attempted("flapping"), missing, ob.t.deadLetters())
	}
	b.addIso(isoRow{
		Figure: fmt.Sprintf("6. events lost of %s to a receiver flapping 200/503 every %s, adaptive (2 runs)", thousands(float64(events[1])), phase),
		Value:  figure{float64(lost[1]), count, "events"},
		Target: "0", Met: lost[1] == 0,
	})
	per := func(k, side int) float64 { return float64(k) / float64(events[side]) }
	b.addIso(isoRow{
		Figure:   "6. HTTP requests per event, flapping receiver, adaptive",
		Value:    figure{per(requests[1], 1), count, "requests"},
		BaseName: "same receiver, adaptive off, interleaved", Base: figure{per(requests[0], 0), count, "requests"},
		Target: "≤ 1.00×", Met: per(requests[1], 1) <= per(requests[0], 0),
	})
	b.addIso(isoRow{
		Figure:   "6. recorded attempts per event, flapping receiver, adaptive",
		Value:    figure{per(attempts[1], 1), count, "attempts"},
		BaseName: "same receiver, adaptive off, interleaved", Base: figure{per(attempts[0], 0), count, "attempts"},
		Target: "≤ 1.00×", Met: per(attempts[1], 1) <= per(attempts[0], 0),
	})
	return nil
}

// formatCount prints a count, with three decimals when it is not whole.
func formatCount(v float64) string {
	if v == math.Trunc(v) {
		return thousands(v)
	}
	return strconv.FormatFloat(v, 'f', 3, 64)
}

// limitSample is one reading of an endpoint's in-flight limit and of its
// deliveries under way, At seconds after the trace's start.
type limitSample struct {
	At              float64
	Limit, InFlight int
	// BreakerOpen: the endpoint's breaker was not closed (open or
	// half-open).
	BreakerOpen bool
}

// limitTrace is an endpoint's in-flight limit sampled over one run against
// a receiver whose answer flips every Phase from the trace's start (200
// first, then 503), enqueued to for Span.
type limitTrace struct {
	Samples     []limitSample
	Phase, Span time.Duration
}

// limitSampleEvery is how often sampleLimit reads the limit.
const limitSampleEvery = 50 * time.Millisecond

// sampleLimit reads endpoint ep's in-flight limit and deliveries in flight
// through Outbox.Endpoints every limitSampleEvery, timed from t0, until the
// returned function is called (or ctx ends); that function returns the
// trace.
func sampleLimit(ctx context.Context, o *outbox.Outbox, ep string, t0 time.Time, phase, span time.Duration) func() *limitTrace {
	tr := &limitTrace{Phase: phase, Span: span}
	quit := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(limitSampleEvery)
		defer tick.Stop()
		for {
			if states, err := o.Endpoints(ctx); err == nil {
				for _, st := range states {
					if st.Name == ep {
						tr.Samples = append(tr.Samples, limitSample{
							At:    time.Since(t0).Seconds(),
							Limit: st.InFlightLimit, InFlight: st.InFlight,
							BreakerOpen: st.Breaker != outbox.BreakerClosed,
						})
					}
				}
			}
			select {
			case <-tick.C:
			case <-quit:
				return
			case <-ctx.Done():
				return
			}
		}
	}()
	return func() *limitTrace {
		close(quit)
		<-done
		return tr
	}
}

// summary describes a trace in words for the log: the limit's range and
// when the breaker was not closed.
func (tr *limitTrace) summary() string {
	if len(tr.Samples) == 0 {
		return "no samples"
	}
	lo, hi := tr.Samples[0].Limit, tr.Samples[0].Limit
	var open []string
	for i := 0; i < len(tr.Samples); i++ {
		lo, hi = min(lo, tr.Samples[i].Limit), max(hi, tr.Samples[i].Limit)
		if !tr.Samples[i].BreakerOpen {
			continue
		}
		j := i
		for j+1 < len(tr.Samples) && tr.Samples[j+1].BreakerOpen {
			j++
		}
		open = append(open, fmt.Sprintf("%.2f–%.2f s", tr.Samples[i].At, tr.Samples[j].At))
		i = j
	}
	s := fmt.Sprintf("limit from %d to %d; breaker not closed: ", lo, hi)
	if len(open) == 0 {
		return s + "never"
	}
	return s + strings.Join(open, ", ")
}
