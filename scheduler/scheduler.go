package scheduler

import (
	"container/heap"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"runtime/debug"
	"sync"
	"time"
)

// Type selects the time a punctuation follows.
type Type uint8

const (
	// WallClock punctuations fire on the grid start + k·interval of the scheduler's [Clock],
	// where start is the time of [Scheduler.Schedule] (plus the jitter phase, if any) and k ≥ 1.
	WallClock Type = iota + 1
	// StreamTime punctuations fire when the stream time given to [Scheduler.Advance] reaches
	// the next multiple of the interval since the Unix epoch. Boundaries are computed in
	// nanoseconds since the epoch: stream times outside the years 1678 to 2262 are clamped.
	StreamTime
)

// String returns "wall-clock", "stream-time" or "Type(n)".
func (t Type) String() string {
	switch t {
	case WallClock:
		return "wall-clock"
	case StreamTime:
		return "stream-time"
	default:
		return fmt.Sprintf("Type(%d)", uint8(t))
	}
}

// Func is the work of a punctuation. ctx is cancelled when the scheduler is closed; ts is the
// punctuation's timestamp: the [Clock]'s time when the run started (WallClock) or the stream
// time that triggered it (StreamTime), as Kafka Streams passes to Punctuator.punctuate.
type Func func(ctx context.Context, ts time.Time)

// Options are the optional settings of one punctuation.
type Options struct {
	// Name identifies the punctuation in logs, panic reports and [PunctuationStats].
	// Default: "punctuation-N", N counting from 1 per scheduler.
	Name string
	// Jitter shifts the grid of a WallClock punctuation by a phase drawn once, uniformly at
	// random, in [0, Jitter) when it is scheduled, so that many processes scheduling the same
	// interval at the same moment do not fire in lockstep. The phase is fixed for the life of
	// the punctuation: runs stay exactly one interval apart. Default 0 (no shift). Must be in
	// [0, interval]; not allowed for StreamTime.
	Jitter time.Duration
}

// Config configures a [Scheduler]. The zero value is ready to use.
type Config struct {
	// Clock is the time source. Default: [RealClock].
	Clock Clock
	// Logger receives panic reports (Error) and overruns (Debug). Default: discards.
	Logger *slog.Logger
	// OnPanic, if set, is called with the punctuation's name and the recovered value after
	// a Func panics. It runs on the punctuation's goroutine; a panic in it is recovered and
	// logged. Default: nil.
	OnPanic func(name string, v any)
}

// PunctuationStats are the counters of one punctuation, as returned by [Punctuation.Stats].
type PunctuationStats struct {
	Name     string
	Type     Type
	Interval time.Duration
	// Runs counts completed runs of the Func, panicked and woken ones included.
	Runs uint64
	// WakeRuns counts the runs (included in Runs) that [Punctuation.Wake] caused.
	WakeRuns uint64
	// SkippedTicks counts grid points (WallClock) or interval boundaries (StreamTime) that
	// passed without a run of their own: ticks missed while a run was still going or while the
	// process was paused, and boundaries jumped over by one Advance.
	SkippedTicks uint64
	// Overruns counts runs that were still going when their next tick or boundary arrived.
	Overruns uint64
	// Panics counts runs whose Func panicked.
	Panics uint64
	// LastDuration is how long the last completed run took.
	LastDuration time.Duration
	// LastStart is when the last completed run started (by the scheduler's Clock).
	LastStart time.Time
	// Running reports whether the Func is running now.
	Running bool
	// Cancelled reports whether the punctuation was cancelled (or its scheduler closed).
	Cancelled bool
	// Next is the next grid point (WallClock) or boundary (StreamTime); zero when cancelled,
	// or for a StreamTime punctuation that will fire on the first Advance.
	Next time.Time
}

// Scheduler runs punctuations. One goroutine with one timer waits for the earliest WallClock
// punctuation however many are scheduled; each run of a Func gets a goroutine of its own that
// the scheduler owns and [Scheduler.Close] joins. A Scheduler is safe for concurrent use.
type Scheduler struct {
	clock   Clock
	logger  *slog.Logger
	onPanic func(string, any)
	ctx     context.Context // passed to every Func; cancelled by Close
	cancel  context.CancelFunc

	kick chan struct{} // cap 1: the earliest wall-clock time may have moved earlier
	quit chan struct{} // closed by Close: the timer goroutine exits
	done chan struct{} // closed when closed and every goroutine has exited

	mu          sync.Mutex
	wall        queue // idle WallClock punctuations by next grid point
	stream      queue // idle StreamTime punctuations by next boundary (first-run ones on top)
	streamTime  time.Time
	streamKnown bool
	armed       time.Time // what the timer goroutine waits for, if armedOK
	armedOK     bool
	looping     bool // the timer goroutine was started
	closed      bool
	doneClosed  bool
	active      int // goroutines running: the timer goroutine and runners
	seq         int
}

// New returns a Scheduler. It starts no goroutine until the first WallClock punctuation is
// scheduled; call [Scheduler.Close] to stop it.
func New(cfg Config) *Scheduler {
	if cfg.Clock == nil {
		cfg.Clock = RealClock()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Scheduler{
		clock:   cfg.Clock,
		logger:  cfg.Logger,
		onPanic: cfg.OnPanic,
		ctx:     ctx,
		cancel:  cancel,
		kick:    make(chan struct{}, 1),
		quit:    make(chan struct{}),
		done:    make(chan struct{}),
	}
}

// Punctuation is the handle of a scheduled Func.
type Punctuation struct {
	s        *Scheduler
	name     string
	typ      Type
	interval time.Duration
	fn       Func

	// Guarded by s.mu.
	origin    time.Time // WallClock: grid point k is origin + k·interval
	k         int64     // WallClock: index of the next grid point not yet consumed (≥ 1)
	first     bool      // StreamTime: fire as soon as stream time is known
	boundary  time.Time // StreamTime: next boundary
	at        time.Time // heap key
	index     int       // position in its queue, -1 when not queued
	running   bool
	wake      bool // a Wake arrived while running: run again once
	cancelled bool
	stats     PunctuationStats
}

// Schedule starts calling fn every interval, following the time of typ, until the returned
// Punctuation is cancelled or the scheduler closed. At most one Options may be given.
//
// A WallClock punctuation first runs one interval (plus its jitter phase) after Schedule.
// A StreamTime punctuation first runs as soon as stream time is known (at once if
// [Scheduler.Advance] was already called, else on the first Advance), then whenever stream
// time reaches the next multiple of interval since the Unix epoch, as Kafka Streams does.
//
// Errors wrap [ErrInvalid] for bad arguments and are [ErrClosed] after Close.
func (s *Scheduler) Schedule(interval time.Duration, typ Type, fn Func, opts ...Options) (*Punctuation, error) {
	if interval <= 0 {
		return nil, fmt.Errorf("%w: interval must be positive, got %v", ErrInvalid, interval)
	}
	if fn == nil {
		return nil, fmt.Errorf("%w: fn is nil", ErrInvalid)
	}
	if typ != WallClock && typ != StreamTime {
		return nil, fmt.Errorf("%w: type must be WallClock or StreamTime, got %v", ErrInvalid, typ)
	}
	if len(opts) > 1 {
		return nil, fmt.Errorf("%w: at most one Options, got %d", ErrInvalid, len(opts))
	}
	var o Options
	if len(opts) == 1 {
		o = opts[0]
	}
	if o.Jitter < 0 || o.Jitter > interval {
		return nil, fmt.Errorf("%w: jitter must be in [0, interval=%v], got %v", ErrInvalid, interval, o.Jitter)
	}
	if o.Jitter > 0 && typ == StreamTime {
		return nil, fmt.Errorf("%w: jitter applies to WallClock punctuations only", ErrInvalid)
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	s.seq++
	if o.Name == "" {
		o.Name = fmt.Sprintf("punctuation-%d", s.seq)
	}
	p := &Punctuation{s: s, name: o.Name, typ: typ, interval: interval, fn: fn, index: -1}
	p.stats = PunctuationStats{Name: o.Name, Type: typ, Interval: interval}

	switch typ {
	case WallClock:
		var phase time.Duration
		if o.Jitter > 0 {
			phase = rand.N(o.Jitter)
		}
		p.origin = s.clock.Now().Add(phase)
		p.k = 1
		s.pushWallLocked(p)
		if !s.looping {
			s.looping = true
			s.active++
			go s.loop()
		}
	case StreamTime:
		if s.streamKnown {
			p.first = true
			s.consumeStreamLocked(p)
			s.startLocked(p, s.streamTime, false)
		} else {
			p.first = true
			p.at = time.Time{}
			heap.Push(&s.stream, p)
		}
	}
	return p, nil
}

// Cancel stops future runs of the punctuation. A run in progress is not interrupted (its
// context is the scheduler's); Cancel does not wait for it, so fn may cancel its own
// punctuation. Cancel is idempotent.
func (p *Punctuation) Cancel() {
	s := p.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if p.cancelled {
		return
	}
	p.cancelled = true
	p.wake = false
	s.dequeueLocked(p)
}

// Wake runs the punctuation now, out of turn, without moving its grid: the next WallClock
// run is still at the next grid point, the next StreamTime run still at the next boundary.
// Wakes coalesce: if the Func is idle it starts at once and wakes arriving before it starts
// running add nothing; if it is running, any number of wakes queue a single re-run after it
// returns. So a burst of wakes costs at most two runs. The re-run's timestamp is the Clock's
// time (WallClock) or the current stream time (StreamTime; zero while unknown). Wake on a
// cancelled punctuation or closed scheduler does nothing.
func (p *Punctuation) Wake() {
	s := p.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if p.cancelled || s.closed {
		return
	}
	if p.running {
		p.wake = true
		return
	}
	s.dequeueLocked(p)
	s.startLocked(p, s.timestampLocked(p), true)
}

// Stats returns a snapshot of the punctuation's counters.
func (p *Punctuation) Stats() PunctuationStats {
	s := p.s
	s.mu.Lock()
	defer s.mu.Unlock()
	st := p.stats
	st.Running = p.running
	st.Cancelled = p.cancelled || s.closed
	switch {
	case st.Cancelled:
	case p.typ == WallClock:
		st.Next = p.tick(p.k)
	case !p.first:
		st.Next = p.boundary
	}
	return st
}

// Name returns the punctuation's name.
func (p *Punctuation) Name() string { return p.name }

// Advance moves stream time forward to t. Every StreamTime punctuation whose next boundary
// is at or before t fires once, however many boundaries t jumps over (the others are counted
// as skipped); one still running from an earlier boundary fires once right after it returns.
// A t that is not after the current stream time is ignored: stream time never goes back.
// Advance never blocks on a Func.
func (s *Scheduler) Advance(t time.Time) {
	t = t.Round(0) // stream time is event time: compare wall readings only
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || (s.streamKnown && !t.After(s.streamTime)) {
		return
	}
	s.streamTime, s.streamKnown = t, true
	for len(s.stream) > 0 {
		p := s.stream[0]
		if !p.first && p.at.After(t) {
			break
		}
		heap.Pop(&s.stream)
		s.consumeStreamLocked(p)
		s.startLocked(p, t, false)
	}
}

// Close stops the scheduler: no punctuation runs again, the context of running Funcs is
// cancelled, and Close waits for them to return. If ctx ends first Close returns ctx.Err();
// the runs still exit on their own once their Funcs return. Close is idempotent: a later
// call waits again (with its own ctx) and returns nil once everything has exited.
// Schedule after Close returns [ErrClosed]; Wake, Advance and Cancel do nothing.
func (s *Scheduler) Close(ctx context.Context) error {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		s.cancel()
		close(s.quit)
		for _, q := range []*queue{&s.wall, &s.stream} {
			for _, p := range *q {
				p.index = -1
			}
			*q = nil
		}
		s.maybeDoneLocked()
	}
	s.mu.Unlock()
	select {
	case <-s.done:
		return nil
	default:
	}
	select {
	case <-s.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// loop is the one timer goroutine: it sleeps until the earliest WallClock grid point and
// starts the punctuations that are due.
func (s *Scheduler) loop() {
	var t Timer
	defer func() {
		if t != nil {
			t.Stop()
		}
		s.mu.Lock()
		s.active--
		s.maybeDoneLocked()
		s.mu.Unlock()
	}()
	for {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return
		}
		now := s.clock.Now()
		for len(s.wall) > 0 && !s.wall[0].at.After(now) {
			p := heap.Pop(&s.wall).(*Punctuation)
			// Consume every grid point up to now: all but the last are skipped (the timer
			// fired late, e.g. the process was paused), the last one runs.
			due := int64(now.Sub(p.origin) / p.interval)
			if due > p.k {
				p.stats.SkippedTicks += uint64(due - p.k)
			}
			p.k = due + 1
			s.startLocked(p, now, false)
		}
		var wait time.Duration
		s.armedOK = len(s.wall) > 0
		if s.armedOK {
			s.armed = s.wall[0].at
			wait = s.armed.Sub(now)
		}
		s.mu.Unlock()

		var c <-chan time.Time
		switch {
		case wait > 0 && t == nil:
			t = s.clock.NewTimer(wait)
			c = t.C()
		case wait > 0:
			t.Reset(wait)
			c = t.C()
		case t != nil:
			t.Stop()
		}
		select {
		case <-c:
		case <-s.kick:
		case <-s.quit:
			return
		}
	}
}

// startLocked starts a run of p on a goroutine of its own.
func (s *Scheduler) startLocked(p *Punctuation, ts time.Time, woken bool) {
	p.running = true
	p.wake = false
	s.active++
	go s.run(p, ts, woken)
}

// run calls p's Func, then keeps calling it for as long as finishLocked asks for another run
// right away (a queued wake, a grid point or boundary reached while it ran).
func (s *Scheduler) run(p *Punctuation, ts time.Time, woken bool) {
	returned := false
	defer func() {
		if returned {
			return
		}
		// The Func called runtime.Goexit (t.FailNow in a test, say): this goroutine is
		// ending under us. Keep the books straight and stop the punctuation.
		s.logger.Error("scheduler: punctuation called runtime.Goexit; cancelled", "punctuation", p.name)
		s.mu.Lock()
		p.running, p.wake, p.cancelled = false, false, true
		s.active--
		s.maybeDoneLocked()
		s.mu.Unlock()
	}()
	for {
		start := s.clock.Now()
		v, stack, panicked := s.call(p, ts)
		end := s.clock.Now()
		if panicked {
			s.reportPanic(p, v, stack)
		}
		s.mu.Lock()
		p.stats.Runs++
		if woken {
			p.stats.WakeRuns++
		}
		if panicked {
			p.stats.Panics++
		}
		p.stats.LastDuration = end.Sub(start)
		p.stats.LastStart = start
		var again bool
		ts, woken, again = s.finishLocked(p, end)
		if !again {
			returned = true
			s.active--
			s.maybeDoneLocked()
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
	}
}

func (s *Scheduler) call(p *Punctuation, ts time.Time) (v any, stack []byte, panicked bool) {
	defer func() {
		if panicked {
			if v = recover(); v == nil {
				return // runtime.Goexit, not a panic: let it unwind (run books it)
			}
			stack = debug.Stack()
		}
	}()
	panicked = true
	p.fn(s.ctx, ts)
	return nil, nil, false
}

func (s *Scheduler) reportPanic(p *Punctuation, v any, stack []byte) {
	s.logger.Error("scheduler: punctuation panicked", "punctuation", p.name, "panic", v, "stack", string(stack))
	if s.onPanic == nil {
		return
	}
	defer func() {
		if r := recover(); r != nil {
			s.logger.Error("scheduler: OnPanic hook panicked", "punctuation", p.name, "panic", r)
		}
	}()
	s.onPanic(p.name, v)
}

// finishLocked books the end of a run at time end and decides what comes next: another run
// right away (returning its timestamp and whether it is a wake run), or back to the queue.
func (s *Scheduler) finishLocked(p *Punctuation, end time.Time) (ts time.Time, woken, again bool) {
	p.running = false
	if s.closed || p.cancelled {
		p.wake = false
		return time.Time{}, false, false
	}
	switch p.typ {
	case WallClock:
		// Grid points before end went by while the Func ran: skip them. One exactly at end
		// is due now and runs.
		next := ceilDiv(end.Sub(p.origin), p.interval)
		if next > p.k {
			skipped := next - p.k
			p.stats.SkippedTicks += uint64(skipped)
			p.stats.Overruns++
			p.k = next
			s.logger.Debug("scheduler: punctuation overran its interval", "punctuation", p.name,
				"interval", p.interval, "took", p.stats.LastDuration, "skipped_ticks", skipped)
		}
		if !p.tick(p.k).After(end) {
			p.k++
			p.running, p.wake = true, false
			return end, false, true
		}
		if p.wake {
			p.running, p.wake = true, false
			return end, true, true
		}
		s.pushWallLocked(p)
	case StreamTime:
		if s.streamKnown && !s.streamTime.Before(p.boundary) {
			// Stream time reached the boundary while the Func ran: stream time only moves
			// when data arrives, so the crossing is not dropped but fires once now.
			p.stats.Overruns++
			s.consumeStreamLocked(p)
			p.running, p.wake = true, false
			return s.streamTime, false, true
		}
		if p.wake {
			p.running, p.wake = true, false
			return s.timestampLocked(p), true, true
		}
		p.at = p.boundary
		heap.Push(&s.stream, p)
	}
	return time.Time{}, false, false
}

// consumeStreamLocked books a StreamTime firing at the current stream time: the boundaries
// jumped over are skipped and the next boundary is the first multiple of the interval after
// stream time.
func (s *Scheduler) consumeStreamLocked(p *Punctuation) {
	iv := int64(p.interval)
	k := floorDiv(sinceEpoch(s.streamTime), iv)
	if !p.first {
		if crossed := k - sinceEpoch(p.boundary)/iv + 1; crossed > 1 {
			p.stats.SkippedTicks += uint64(crossed - 1)
		}
	}
	p.first = false
	p.boundary = time.Unix(0, (k+1)*iv).UTC()
}

func (s *Scheduler) timestampLocked(p *Punctuation) time.Time {
	if p.typ == StreamTime {
		return s.streamTime
	}
	return s.clock.Now()
}

func (s *Scheduler) pushWallLocked(p *Punctuation) {
	p.at = p.tick(p.k)
	heap.Push(&s.wall, p)
	if s.looping && (!s.armedOK || p.at.Before(s.armed)) {
		select {
		case s.kick <- struct{}{}:
		default:
		}
	}
}

func (s *Scheduler) dequeueLocked(p *Punctuation) {
	if p.index < 0 {
		return
	}
	if p.typ == WallClock {
		heap.Remove(&s.wall, p.index)
	} else {
		heap.Remove(&s.stream, p.index)
	}
}

func (s *Scheduler) maybeDoneLocked() {
	if s.closed && s.active == 0 && !s.doneClosed {
		s.doneClosed = true
		close(s.done)
	}
}

func (p *Punctuation) tick(k int64) time.Time {
	return p.origin.Add(time.Duration(k) * p.interval)
}

func ceilDiv(d, iv time.Duration) int64 {
	q := int64(d / iv)
	if d%iv > 0 {
		q++
	}
	return q
}

// sinceEpoch returns nanoseconds since the Unix epoch, clamped to the int64 range (years
// 1678 to 2262) rather than overflowing as UnixNano does.
func sinceEpoch(t time.Time) int64 {
	return int64(t.Sub(time.Unix(0, 0)))
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// queue is a min-heap of punctuations by their next time (container/heap).
type queue []*Punctuation

func (q queue) Len() int { return len(q) }
func (q queue) Less(i, j int) bool {
	if q[i].first != q[j].first {
		return q[i].first
	}
	return q[i].at.Before(q[j].at)
}
func (q queue) Swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].index = i
	q[j].index = j
}
func (q *queue) Push(x any) {
	p := x.(*Punctuation)
	p.index = len(*q)
	*q = append(*q, p)
}
func (q *queue) Pop() any {
	old := *q
	p := old[len(old)-1]
	old[len(old)-1] = nil
	*q = old[:len(old)-1]
	p.index = -1
	return p
}
