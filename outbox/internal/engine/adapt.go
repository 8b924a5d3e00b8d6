package engine

import (
	"slices"
	"time"
)

// Adaptive configures the in-flight limit that each endpoint's deliveries
// adapt to what its receiver shows it can take: it starts at Initial,
// grows while deliveries succeed at a steady latency, and shrinks on
// retry-class failures and on rising latency, between 1 and the
// endpoint's ceiling (MaxPerEndpoint). Off keeps every endpoint at its
// ceiling.
type Adaptive struct {
	Off     bool
	Initial int
	// Fixed, when set, reports the endpoints whose limit stays at their
	// ceiling as with Off: those whose deliveries share requests, so that
	// latency rises with the batch, not with the receiver's load.
	Fixed func(endpoint string) bool
}

// adapts reports whether endpoint's limit adapts.
func (a *Adaptive) adapts(endpoint string) bool {
	return !a.Off && (a.Fixed == nil || !a.Fixed(endpoint))
}

// The adaptation works in rounds, as TCP's congestion control (RFC 5681)
// does: a round ends when as many deliveries as the limit (at least
// minRound) have ended since the last one. Below the initial limit, or
// until the first decrease, the limit grows by one per success (it doubles
// per round); beyond it, by one per round. A round in which most
// deliveries failed (retry class) halves it: a receiver that fails some
// requests at random is no reason to send it fewer at once, one that fails
// most of them is. A round whose smoothed latency rose above
// latencyTolerance times the floor shrinks it by latencyBackoff. The
// results of deliveries begun before a decrease are old news and count in
// no round. Latencies under latencyNoise are never "rising": a receiver
// that answers that fast holds a slot for no time.
const (
	minRound         = 4
	latencyTolerance = 2.0
	latencyBackoff   = 0.9
	latencyNoise     = 50 * time.Millisecond
	// floorWindow is how long the lowest latency seen stays the floor: the
	// floor is the lowest of the current and the previous window, so a
	// receiver that became slower for good sets a new floor within two.
	floorWindow = 30 * time.Second
)

// limit is one endpoint's adaptive in-flight limit. Its methods are called
// with the engine's lock held.
type limit struct {
	value     float64   // the limit, in [1, ceiling]
	initial   float64   // where it started: below it, it grows fast
	slowStart bool      // growing by one per success
	decreased time.Time // when it last shrank, by the monotonic clock
	ok, fail  int       // successes and failures of the round under way
	smoothed  time.Duration
	floor     [2]time.Duration // lowest smoothed latency of the previous and the current window
	windowAt  time.Time        // when the current window began
}

func newLimit(initial int) *limit {
	return &limit{value: float64(initial), initial: float64(initial), slowStart: true}
}

// get returns the limit, within [1, ceiling].
func (l *limit) get(ceiling int) int {
	return max(1, min(ceiling, int(l.value)))
}

// observe adapts the limit to one delivery's result: failed reports a
// retry-class failure, ok a success; begun is when the delivery started
// and lat its latency (both by the monotonic clock).
func (l *limit) observe(failed, ok bool, begun time.Time, lat time.Duration, ceiling int) {
	if begun.Before(l.decreased) || !failed && !ok {
		return
	}
	now := begun.Add(lat)
	if failed {
		l.fail++
	} else {
		l.ok++
		l.sample(now, lat)
		if l.slowStart || l.value < l.initial {
			l.value++
		}
	}
	if n := l.ok + l.fail; n >= max(minRound, int(l.value)) {
		l.endRound(now, lat)
	}
	l.value = max(1, min(l.value, float64(ceiling)))
}

// endRound decides on the round that ended at now.
func (l *limit) endRound(now time.Time, lat time.Duration) {
	failedMost := 2*l.fail > l.ok+l.fail
	l.ok, l.fail = 0, 0
	switch {
	case failedMost:
		l.decrease(now, 0.5)
	case lat > latencyNoise && float64(l.smoothed) > latencyTolerance*float64(l.lowest()):
		l.decrease(now, latencyBackoff)
	case !l.slowStart:
		l.value++
	}
}

// decrease shrinks the limit by factor.
func (l *limit) decrease(now time.Time, factor float64) {
	l.value = max(1, l.value*factor)
	l.slowStart = false
	l.decreased = now
}

// sample records a successful delivery's latency: the smoothed latency
// (an exponentially weighted average, weight 1/8 as TCP's SRTT) and the
// floor of the current window, the lowest smoothed latency in it (the
// lowest single latency would make a receiver's ordinary jitter look like
// a rise).
func (l *limit) sample(now time.Time, lat time.Duration) {
	if l.smoothed == 0 {
		l.smoothed = lat
	} else {
		l.smoothed += (lat - l.smoothed) / 8
	}
	if now.Sub(l.windowAt) >= floorWindow {
		l.floor[0], l.floor[1], l.windowAt = l.floor[1], 0, now
	}
	if l.floor[1] == 0 || l.smoothed < l.floor[1] {
		l.floor[1] = l.smoothed
	}
}

// lowest returns the floor: the lowest latency of the last two windows.
func (l *limit) lowest() time.Duration {
	if l.floor[0] == 0 {
		return l.floor[1]
	}
	return min(l.floor[0], l.floor[1])
}

// latencyWindow is how far back an endpoint's latency percentiles look.
const latencyWindow = time.Minute

// latencies keeps an endpoint's recent delivery latencies in a ring, for
// the percentiles of the last minute. Its methods are called with the
// engine's lock held.
type latencies struct {
	at   [256]time.Time
	lat  [256]time.Duration
	next int
}

func (r *latencies) add(now time.Time, lat time.Duration) {
	i := r.next % len(r.lat)
	r.at[i], r.lat[i] = now, lat
	r.next++
}

// percentiles returns the p50 and p99 of the latencies recorded within
// latencyWindow before now, and how many there were.
func (r *latencies) percentiles(now time.Time) (p50, p99 time.Duration, n int) {
	var in []time.Duration
	for i := range min(r.next, len(r.lat)) {
		if now.Sub(r.at[i]) <= latencyWindow {
			in = append(in, r.lat[i])
		}
	}
	if len(in) == 0 {
		return 0, 0, 0
	}
	slices.Sort(in)
	return in[(len(in)-1)*50/100], in[(len(in)-1)*99/100], len(in)
}

// slowLatency is the latency above which an endpoint counts as slow: a
// slow endpoint never takes the last reserved workers (Concurrency/8, at
// least one), which are kept for other endpoints' events whatever the
// slow one's backlog.
const slowLatency = 100 * time.Millisecond

// capLocked returns how many deliveries to endpoint may be under way at
// once: its adaptive limit (MaxPerEndpoint when adapting is off), within
// MaxPerEndpoint, and for a slow endpoint without the reserved workers.
func (e *Engine) capLocked(endpoint string) int {
	c := &e.cfg
	n := c.MaxPerEndpoint
	l := e.limits[endpoint]
	if c.Adaptive.adapts(endpoint) {
		if l == nil {
			n = min(n, c.Adaptive.Initial)
		} else {
			n = l.get(n)
		}
	}
	if l != nil && l.smoothed > slowLatency {
		n = min(n, c.Concurrency-max(1, c.Concurrency/8))
	}
	return max(1, n)
}

// observeLocked adapts the limit of j's endpoint to j's result and records
// its latency. An attempt that was not made (its endpoint held meanwhile)
// tells nothing.
func (e *Engine) observeLocked(j *job) {
	if j.res.Action == actionNone {
		return
	}
	name := j.rec.Endpoint
	l := e.limits[name]
	if l == nil {
		l = newLimit(e.cfg.Adaptive.Initial)
		e.limits[name] = l
	}
	l.observe(breakerFailure(j.res), j.res.Action == ActionSuccess, j.start, j.duration, e.cfg.MaxPerEndpoint)
	if j.res.Status != 0 {
		r := e.latencies[name]
		if r == nil {
			r = &latencies{}
			e.latencies[name] = r
		}
		r.add(j.start.Add(j.duration), j.duration)
	}
}

// quota returns how many of endpoint's events may be ready or under way at
// once: twice its cap, so that a second round waits ready while the first
// is delivered.
func (sc *scan) quota(endpoint string) int {
	e := sc.e
	e.mu.Lock()
	defer e.mu.Unlock()
	return 2 * e.capLocked(endpoint)
}

// EndpointLoad is what the engine knows of an endpoint's recent
// deliveries: its in-flight limit now, the deliveries under way, and the
// p50 and p99 latency of the attempts answered in the last minute
// (Samples of them; zero latencies when none).
type EndpointLoad struct {
	Limit, InFlight int
	P50, P99        time.Duration
	Samples         int
}

// Load returns the engine's view of an endpoint's recent deliveries.
func (e *Engine) Load(endpoint string) EndpointLoad {
	e.mu.Lock()
	defer e.mu.Unlock()
	ld := EndpointLoad{Limit: e.capLocked(endpoint), InFlight: e.perEndpoint[endpoint]}
	if r := e.latencies[endpoint]; r != nil {
		ld.P50, ld.P99, ld.Samples = r.percentiles(time.Now())
	}
	return ld
}
