package scheduler

import (
	"context"
	"errors"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/outboxd/outbox/internal/testkit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// recorder collects the timestamps a Func was called with, relative to a base time.
type recorder struct {
	mu   sync.Mutex
	base time.Time
	got  []time.Duration
}

func (r *recorder) add(ts time.Time) {
	r.mu.Lock()
	r.got = append(r.got, ts.Sub(r.base))
	r.mu.Unlock()
}

func (r *recorder) runs() []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]time.Duration(nil), r.got...)
}

func equalDurations(a, b []time.Duration) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// noOverlap tracks how many runs of one punctuation are in flight at once.
type noOverlap struct{ now, max atomic.Int32 }

func (n *noOverlap) enter() {
	v := n.now.Add(1)
	for {
		m := n.max.Load()
		if v <= m || n.max.CompareAndSwap(m, v) {
			return
		}
	}
}
func (n *noOverlap) exit() { n.now.Add(-1) }

func mustClose(t *testing.T, s *Scheduler) {
	t.Helper()
	if err := s.Close(context.Background()); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

func mustSchedule(t *testing.T, s *Scheduler, iv time.Duration, typ Type, fn Func, opts ...Options) *Punctuation {
	t.Helper()
	p, err := s.Schedule(iv, typ, fn, opts...)
	if err != nil {
		t.Fatalf("Schedule: %v", err)
	}
	return p
}

// Row "grid" of the table in doc.go.
func TestWallClockFiresOnGrid(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{}) // the real clock: deterministic inside the bubble
		defer mustClose(t, s)
		rec := &recorder{base: time.Now()}
		p := mustSchedule(t, s, time.Second, WallClock, func(ctx context.Context, ts time.Time) {
			rec.add(ts)
			time.Sleep(300 * time.Millisecond) // work shorter than the interval: no drift
		}, Options{Name: "grid"})

		time.Sleep(3500 * time.Millisecond)
		synctest.Wait()
		if got, want := rec.runs(), []time.Duration{time.Second, 2 * time.Second, 3 * time.Second}; !equalDurations(got, want) {
			t.Fatalf("runs at %v, want %v", got, want)
		}
		st := p.Stats()
		if st.Name != "grid" || st.Type != WallClock || st.Runs != 3 || st.SkippedTicks != 0 || st.Overruns != 0 ||
			st.LastDuration != 300*time.Millisecond || !st.Next.Equal(rec.base.Add(4*time.Second)) {
			t.Fatalf("stats = %+v", st)
		}
	})
}

// Row "missed ticks" and "overlap" of the table in doc.go (issue 3, must show 2).
func TestWallClockLongRunSkipsTicks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{})
		defer mustClose(t, s)
		rec := &recorder{base: time.Now()}
		var ov noOverlap
		p := mustSchedule(t, s, time.Second, WallClock, func(ctx context.Context, ts time.Time) {
			ov.enter()
			defer ov.exit()
			rec.add(ts)
			time.Sleep(3500 * time.Millisecond)
		})

		time.Sleep(10 * time.Second)
		synctest.Wait()
		// 1s..4.5s, then the next grid point after 4.5s is 5s (2s, 3s, 4s skipped, no
		// catch-up run at 4.5s), 5s..8.5s, 9s..
		if got, want := rec.runs(), []time.Duration{time.Second, 5 * time.Second, 9 * time.Second}; !equalDurations(got, want) {
			t.Fatalf("runs started at %v, want %v", got, want)
		}
		if m := ov.max.Load(); m != 1 {
			t.Fatalf("%d runs overlapped", m)
		}
		st := p.Stats()
		if st.Runs != 2 || st.SkippedTicks != 6 || st.Overruns != 2 || !st.Running {
			t.Fatalf("stats = %+v, want 2 runs done, 6 skipped ticks (3 per run), 2 overruns, running", st)
		}
		if st.LastDuration != 3500*time.Millisecond {
			t.Fatalf("LastDuration = %v", st.LastDuration)
		}
	})
}

// manualClock is a Clock whose time and timer firings the test drives by hand, to simulate
// a timer that fires early or late (a paused process), which the real clock never does in a
// bubble.
type manualClock struct{ *testkit.Clock }

func (c manualClock) NewTimer(d time.Duration) Timer { return c.Clock.NewTimer(d) }

// Row "late timer" of the table in doc.go.
func TestWallClockLateTimerRunsOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		clk := manualClock{testkit.NewClock(base)}
		s := New(Config{Clock: clk})
		defer mustClose(t, s)
		rec := &recorder{base: base}
		p := mustSchedule(t, s, time.Second, WallClock, func(ctx context.Context, ts time.Time) { rec.add(ts) })
		synctest.Wait()

		// A spurious early firing runs nothing.
		clk.Set(base.Add(500 * time.Millisecond))
		clk.Fire()
		synctest.Wait()
		if got := rec.runs(); len(got) != 0 {
			t.Fatalf("early timer ran %v", got)
		}
		// The timer fires 2.5 intervals late: one run, ticks 1s and 2s skipped, tick 3s runs.
		clk.Set(base.Add(3500 * time.Millisecond))
		synctest.Wait()
		if got, want := rec.runs(), []time.Duration{3500 * time.Millisecond}; !equalDurations(got, want) {
			t.Fatalf("runs at %v, want %v", got, want)
		}
		st := p.Stats()
		if st.Runs != 1 || st.SkippedTicks != 2 || st.Overruns != 0 || !st.Next.Equal(base.Add(4*time.Second)) {
			t.Fatalf("stats = %+v", st)
		}
	})
}

// Row "jitter" of the table in doc.go.
func TestJitterShiftsGridByFixedPhase(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{})
		defer mustClose(t, s)
		const n = 20
		base := time.Now()
		recs := make([]*recorder, n)
		for i := range recs {
			recs[i] = &recorder{base: base}
			mustSchedule(t, s, time.Second, WallClock, func(ctx context.Context, ts time.Time) { recs[i].add(ts) },
				Options{Jitter: 500 * time.Millisecond})
		}
		time.Sleep(3600 * time.Millisecond)
		synctest.Wait()
		phases := map[time.Duration]bool{}
		for i, r := range recs {
			got := r.runs()
			if len(got) != 3 {
				t.Fatalf("punctuation %d ran at %v, want 3 runs", i, got)
			}
			phase := got[0] - time.Second
			if phase < 0 || phase >= 500*time.Millisecond {
				t.Fatalf("punctuation %d: first run at %v, want in [1s, 1.5s)", i, got[0])
			}
			for k := 1; k < len(got); k++ {
				if got[k]-got[k-1] != time.Second {
					t.Fatalf("punctuation %d: runs at %v are not one interval apart", i, got)
				}
			}
			phases[phase] = true
		}
		if len(phases) < 2 {
			t.Fatalf("all %d punctuations got the same phase", n)
		}
	})
}

// Row "early run" of the table in doc.go.
func TestWakeRunsEarlyGridUnchanged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{})
		defer mustClose(t, s)
		rec := &recorder{base: time.Now()}
		p := mustSchedule(t, s, time.Second, WallClock, func(ctx context.Context, ts time.Time) { rec.add(ts) })
		time.Sleep(300 * time.Millisecond)
		p.Wake()
		time.Sleep(2 * time.Second) // to 2.3s
		synctest.Wait()
		if got, want := rec.runs(), []time.Duration{300 * time.Millisecond, time.Second, 2 * time.Second}; !equalDurations(got, want) {
			t.Fatalf("runs at %v, want %v", got, want)
		}
		if st := p.Stats(); st.Runs != 3 || st.WakeRuns != 1 || st.SkippedTicks != 0 {
			t.Fatalf("stats = %+v", st)
		}
	})
}

// Row "early run" of the table in doc.go (issue 3, must show 3).
func TestWakeBurstCoalesces(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{})
		defer mustClose(t, s)
		var ov noOverlap
		p := mustSchedule(t, s, time.Second, WallClock, func(ctx context.Context, ts time.Time) {
			ov.enter()
			defer ov.exit()
			time.Sleep(250 * time.Millisecond)
		})
		time.Sleep(100 * time.Millisecond)

		// 1,000 wakes from 4 goroutines, spread over 200ms of the first interval.
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for range 250 {
					p.Wake()
					time.Sleep(800 * time.Microsecond)
				}
			})
		}
		wg.Wait()
		time.Sleep(550 * time.Millisecond) // to 0.85s: before the first grid point
		synctest.Wait()
		st := p.Stats()
		if st.WakeRuns > 2 || st.Runs > 2 {
			t.Fatalf("1,000 wakes caused %d runs (%d woken), want at most 2", st.Runs, st.WakeRuns)
		}
		// Here exactly: the first wake starts a run (0.1s-0.35s), every later wake lands while
		// it runs and they queue one re-run (0.35s-0.6s).
		if st.WakeRuns != 2 {
			t.Fatalf("WakeRuns = %d, want 2", st.WakeRuns)
		}
		if m := ov.max.Load(); m != 1 {
			t.Fatalf("%d runs overlapped", m)
		}
		// The grid is untouched: the tick at 1s runs as usual.
		time.Sleep(200 * time.Millisecond) // to 1.05s
		synctest.Wait()
		if st := p.Stats(); st.Runs != 2 || !st.Running || st.SkippedTicks != 0 {
			t.Fatalf("after the tick at 1s: stats = %+v", st)
		}
	})
}

// Row "early run" of the table in doc.go: wakes while a scheduled run is going.
func TestWakeDuringRunQueuesOneRerun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{})
		defer mustClose(t, s)
		rec := &recorder{base: time.Now()}
		var ov noOverlap
		p := mustSchedule(t, s, time.Second, WallClock, func(ctx context.Context, ts time.Time) {
			ov.enter()
			defer ov.exit()
			rec.add(ts)
			time.Sleep(500 * time.Millisecond)
		})
		time.Sleep(1100 * time.Millisecond)
		for range 100 {
			p.Wake()
		}
		time.Sleep(1300 * time.Millisecond) // to 2.4s
		synctest.Wait()
		// 1s-1.5s scheduled, 1.5s-2s the one re-run, 2s the next grid point (exactly at the
		// end of the re-run: due, so it runs and is not skipped).
		if got, want := rec.runs(), []time.Duration{time.Second, 1500 * time.Millisecond, 2 * time.Second}; !equalDurations(got, want) {
			t.Fatalf("runs at %v, want %v", got, want)
		}
		if st := p.Stats(); st.WakeRuns != 1 || st.SkippedTicks != 0 {
			t.Fatalf("stats = %+v", st)
		}
		if m := ov.max.Load(); m != 1 {
			t.Fatalf("%d runs overlapped", m)
		}
	})
}

var t0 = time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)

// Row "stream-time first run" of the table in doc.go.
func TestStreamTimeFirstRunAsSoonAsStreamTimeKnown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{})
		defer mustClose(t, s)
		rec := &recorder{base: t0}
		p := mustSchedule(t, s, time.Minute, StreamTime, func(ctx context.Context, ts time.Time) { rec.add(ts) })
		synctest.Wait()
		if got := rec.runs(); len(got) != 0 {
			t.Fatalf("ran before any stream time: %v", got)
		}
		s.Advance(t0.Add(30 * time.Second))
		synctest.Wait()
		if got, want := rec.runs(), []time.Duration{30 * time.Second}; !equalDurations(got, want) {
			t.Fatalf("runs at %v, want %v", got, want)
		}
		if st := p.Stats(); !st.Next.Equal(t0.Add(time.Minute)) {
			t.Fatalf("Next = %v, want the next multiple of the interval %v", st.Next, t0.Add(time.Minute))
		}
		// Scheduled once stream time is known: runs at once, at the current stream time.
		rec2 := &recorder{base: t0}
		mustSchedule(t, s, time.Minute, StreamTime, func(ctx context.Context, ts time.Time) { rec2.add(ts) })
		synctest.Wait()
		if got, want := rec2.runs(), []time.Duration{30 * time.Second}; !equalDurations(got, want) {
			t.Fatalf("late schedule ran at %v, want %v", got, want)
		}
	})
}

// Row "stream-time boundary" of the table in doc.go.
func TestStreamTimeFiresOnBoundary(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{})
		defer mustClose(t, s)
		rec := &recorder{base: t0}
		p := mustSchedule(t, s, time.Minute, StreamTime, func(ctx context.Context, ts time.Time) { rec.add(ts) })
		for _, d := range []time.Duration{10 * time.Second, 50 * time.Second, 59 * time.Second, 60 * time.Second, 61 * time.Second, 119 * time.Second} {
			s.Advance(t0.Add(d))
			synctest.Wait()
		}
		if got, want := rec.runs(), []time.Duration{10 * time.Second, 60 * time.Second}; !equalDurations(got, want) {
			t.Fatalf("runs at %v, want %v", got, want)
		}
		if st := p.Stats(); st.Runs != 2 || st.SkippedTicks != 0 || !st.Next.Equal(t0.Add(2*time.Minute)) {
			t.Fatalf("stats = %+v", st)
		}
	})
}

// Row "stream-time jump" of the table in doc.go.
func TestStreamTimeJumpFiresOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{})
		defer mustClose(t, s)
		rec := &recorder{base: t0}
		p := mustSchedule(t, s, time.Minute, StreamTime, func(ctx context.Context, ts time.Time) { rec.add(ts) })
		s.Advance(t0.Add(30 * time.Second))
		synctest.Wait()
		s.Advance(t0.Add(5*time.Minute + 30*time.Second)) // crosses 10:01 .. 10:05
		synctest.Wait()
		if got, want := rec.runs(), []time.Duration{30 * time.Second, 5*time.Minute + 30*time.Second}; !equalDurations(got, want) {
			t.Fatalf("runs at %v, want %v", got, want)
		}
		if st := p.Stats(); st.Runs != 2 || st.SkippedTicks != 4 || !st.Next.Equal(t0.Add(6*time.Minute)) {
			t.Fatalf("stats = %+v, want 4 boundaries skipped and next 10:06", st)
		}
	})
}

// Row "stream time backwards" of the table in doc.go.
func TestStreamTimeBackwardsIgnored(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{})
		defer mustClose(t, s)
		rec := &recorder{base: t0}
		p := mustSchedule(t, s, time.Minute, StreamTime, func(ctx context.Context, ts time.Time) { rec.add(ts) })
		s.Advance(t0.Add(90 * time.Second)) // runs; next boundary 10:02
		s.Advance(t0)                       // back: ignored
		s.Advance(t0.Add(90 * time.Second)) // same: ignored
		synctest.Wait()
		s.Advance(t0.Add(119 * time.Second)) // forward, before the boundary
		synctest.Wait()
		s.Advance(t0.Add(3 * time.Minute)) // crosses 10:02 and reaches 10:03
		synctest.Wait()
		if got, want := rec.runs(), []time.Duration{90 * time.Second, 3 * time.Minute}; !equalDurations(got, want) {
			t.Fatalf("runs at %v, want %v", got, want)
		}
		if st := p.Stats(); st.Runs != 2 || st.SkippedTicks != 1 {
			t.Fatalf("stats = %+v", st)
		}
	})
}

// Row "boundary crossed during a run" of the table in doc.go.
func TestStreamTimeCrossedWhileRunningFiresAfter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{})
		defer mustClose(t, s)
		rec := &recorder{base: t0}
		release := make(chan struct{})
		var ov noOverlap
		p := mustSchedule(t, s, time.Minute, StreamTime, func(ctx context.Context, ts time.Time) {
			ov.enter()
			defer ov.exit()
			rec.add(ts)
			if len(rec.runs()) == 1 {
				<-release
			}
		})
		s.Advance(t0)
		synctest.Wait()
		s.Advance(t0.Add(70 * time.Second))  // crosses 10:01 while the first run blocks
		s.Advance(t0.Add(150 * time.Second)) // and 10:02
		synctest.Wait()
		if got := rec.runs(); len(got) != 1 {
			t.Fatalf("a second run started while the first was running: %v", got)
		}
		close(release)
		synctest.Wait()
		if got, want := rec.runs(), []time.Duration{0, 150 * time.Second}; !equalDurations(got, want) {
			t.Fatalf("runs at %v, want %v", got, want)
		}
		if st := p.Stats(); st.Runs != 2 || st.Overruns != 1 || st.SkippedTicks != 1 || !st.Next.Equal(t0.Add(3*time.Minute)) {
			t.Fatalf("stats = %+v", st)
		}
		if m := ov.max.Load(); m != 1 {
			t.Fatalf("%d runs overlapped", m)
		}
	})
}

// Row "cancel from inside" of the table in doc.go.
func TestCancelFromInside(t *testing.T) {
	for _, typ := range []Type{WallClock, StreamTime} {
		t.Run(typ.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := New(Config{})
				defer mustClose(t, s)
				var self atomic.Pointer[Punctuation]
				var runs atomic.Int32
				p := mustSchedule(t, s, time.Second, typ, func(ctx context.Context, ts time.Time) {
					if runs.Add(1) == 2 {
						self.Load().Cancel() // must not deadlock
						self.Load().Wake()   // nor run again
					}
				})
				self.Store(p)
				base := time.Now()
				for i := range 6 {
					s.Advance(base.Add(time.Duration(i) * time.Second))
					time.Sleep(time.Second)
				}
				synctest.Wait()
				if n := runs.Load(); n != 2 {
					t.Fatalf("%d runs, want 2 (cancelled during the second)", n)
				}
				if st := p.Stats(); !st.Cancelled || st.Running || !st.Next.IsZero() {
					t.Fatalf("stats = %+v", st)
				}
			})
		})
	}
}

// Cancel from outside stops future runs but lets the current one finish.
func TestCancelLetsRunningFinish(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{})
		defer mustClose(t, s)
		var finished, ctxErr atomic.Bool
		var runs atomic.Int32
		p := mustSchedule(t, s, time.Second, WallClock, func(ctx context.Context, ts time.Time) {
			runs.Add(1)
			time.Sleep(500 * time.Millisecond)
			ctxErr.Store(ctx.Err() != nil)
			finished.Store(true)
		})
		time.Sleep(1200 * time.Millisecond)
		p.Cancel()
		p.Cancel() // idempotent
		time.Sleep(3 * time.Second)
		synctest.Wait()
		if !finished.Load() || ctxErr.Load() || runs.Load() != 1 {
			t.Fatalf("finished=%v ctx cancelled=%v runs=%d; want the running call to finish normally and no other run",
				finished.Load(), ctxErr.Load(), runs.Load())
		}
	})
}

// Row "shutdown" of the table in doc.go (issue 3, must show 4, first half).
func TestCloseWaitsForBlockedPunctuation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{})
		var returned atomic.Bool
		mustSchedule(t, s, time.Second, WallClock, func(ctx context.Context, ts time.Time) {
			<-ctx.Done()
			time.Sleep(100 * time.Millisecond) // some cleanup after cancellation
			returned.Store(true)
		})
		time.Sleep(1500 * time.Millisecond)
		start := time.Now()
		if err := s.Close(context.Background()); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if !returned.Load() {
			t.Fatal("Close returned before the punctuation did")
		}
		if d := time.Since(start); d != 100*time.Millisecond {
			t.Fatalf("Close took %v, want the 100ms the punctuation needed after its context was cancelled", d)
		}
	})
}

// Row "shutdown" of the table in doc.go (issue 3, must show 4, second half). synctest.Test
// fails if any goroutine of the bubble is left, so returning proves the run exited.
func TestCloseExpiredContextReturnsErrAndRunExits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{})
		release := make(chan struct{})
		var returned atomic.Bool
		p := mustSchedule(t, s, time.Second, WallClock, func(ctx context.Context, ts time.Time) {
			<-release // ignores its context
			returned.Store(true)
		})
		time.Sleep(1500 * time.Millisecond)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := s.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Close = %v, want context.DeadlineExceeded", err)
		}
		if _, err := s.Schedule(time.Second, WallClock, func(context.Context, time.Time) {}); !errors.Is(err, ErrClosed) {
			t.Fatalf("Schedule after Close = %v, want ErrClosed", err)
		}
		close(release)
		// A second Close waits for what is left and succeeds.
		if err := s.Close(context.Background()); err != nil {
			t.Fatalf("second Close: %v", err)
		}
		if !returned.Load() {
			t.Fatal("second Close returned before the punctuation did")
		}
		if st := p.Stats(); st.Runs != 1 || st.Running || !st.Cancelled {
			t.Fatalf("stats = %+v", st)
		}
	})
}

func TestCloseIdempotentAndAfterClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{})
		var runs atomic.Int32
		p := mustSchedule(t, s, time.Second, WallClock, func(context.Context, time.Time) { runs.Add(1) })
		q := mustSchedule(t, s, time.Second, StreamTime, func(context.Context, time.Time) { runs.Add(1) })
		mustClose(t, s)
		mustClose(t, s)
		expired, cancel := context.WithCancel(context.Background())
		cancel()
		if err := s.Close(expired); err != nil {
			t.Fatalf("Close after everything exited, with a done context: %v", err)
		}
		if _, err := s.Schedule(time.Second, StreamTime, func(context.Context, time.Time) {}); !errors.Is(err, ErrClosed) {
			t.Fatalf("Schedule after Close = %v, want ErrClosed", err)
		}
		p.Wake()
		q.Wake()
		s.Advance(t0)
		p.Cancel()
		time.Sleep(5 * time.Second)
		if n := runs.Load(); n != 0 {
			t.Fatalf("%d runs after Close", n)
		}
	})
}

func TestCloseWithoutSchedule(t *testing.T) {
	s := New(Config{})
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// Row "panic" of the table in doc.go.
func TestPanicRecoveredAndReported(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs testkit.Buffer
		type report struct {
			name string
			v    any
		}
		var mu sync.Mutex
		var reports []report
		s := New(Config{
			Logger: slog.New(slog.NewTextHandler(&logs, nil)),
			OnPanic: func(name string, v any) {
				mu.Lock()
				reports = append(reports, report{name, v})
				mu.Unlock()
				panic("the hook fails too") // recovered and logged
			},
		})
		defer mustClose(t, s)
		var n atomic.Int32
		flaky := mustSchedule(t, s, time.Second, WallClock, func(context.Context, time.Time) {
			if n.Add(1) == 1 {
				panic("boom")
			}
		}, Options{Name: "flaky"})
		var other atomic.Int32
		mustSchedule(t, s, time.Second, WallClock, func(context.Context, time.Time) { other.Add(1) })
		time.Sleep(3500 * time.Millisecond)
		synctest.Wait()

		if st := flaky.Stats(); st.Runs != 3 || st.Panics != 1 {
			t.Fatalf("stats = %+v, want 3 runs, 1 panic", st)
		}
		if other.Load() != 3 {
			t.Fatalf("other punctuation ran %d times, want 3", other.Load())
		}
		mu.Lock()
		defer mu.Unlock()
		if len(reports) != 1 || reports[0].name != "flaky" || reports[0].v != "boom" {
			t.Fatalf("OnPanic reports = %v", reports)
		}
		out := logs.String()
		for _, want := range []string{"punctuation panicked", "punctuation=flaky", "panic=boom", "OnPanic hook panicked"} {
			if !strings.Contains(out, want) {
				t.Fatalf("log lacks %q:\n%s", want, out)
			}
		}
	})
}

func TestScheduleRejectsBadArguments(t *testing.T) {
	s := New(Config{})
	defer mustClose(t, s)
	fn := func(context.Context, time.Time) {}
	for _, tc := range []struct {
		name string
		iv   time.Duration
		typ  Type
		fn   Func
		opts []Options
		want string
	}{
		{"zero interval", 0, WallClock, fn, nil, "interval must be positive"},
		{"negative interval", -time.Second, StreamTime, fn, nil, "interval must be positive"},
		{"nil func", time.Second, WallClock, nil, nil, "fn is nil"},
		{"zero type", time.Second, 0, fn, nil, "type must be WallClock or StreamTime"},
		{"unknown type", time.Second, 9, fn, nil, "Type(9)"},
		{"two options", time.Second, WallClock, fn, []Options{{}, {}}, "at most one Options"},
		{"negative jitter", time.Second, WallClock, fn, []Options{{Jitter: -1}}, "jitter must be in"},
		{"jitter over interval", time.Second, WallClock, fn, []Options{{Jitter: 2 * time.Second}}, "jitter must be in"},
		{"stream-time jitter", time.Second, StreamTime, fn, []Options{{Jitter: time.Millisecond}}, "WallClock punctuations only"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := s.Schedule(tc.iv, tc.typ, tc.fn, tc.opts...)
			if p != nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Schedule = %v, %v; want ErrInvalid mentioning %q", p, err, tc.want)
			}
		})
	}
}

func TestDefaultNames(t *testing.T) {
	s := New(Config{})
	defer mustClose(t, s)
	fn := func(context.Context, time.Time) {}
	a := mustSchedule(t, s, time.Hour, StreamTime, fn)
	b := mustSchedule(t, s, time.Hour, StreamTime, fn, Options{Name: "maintenance"})
	c := mustSchedule(t, s, time.Hour, StreamTime, fn)
	if a.Name() != "punctuation-1" || b.Name() != "maintenance" || c.Stats().Name != "punctuation-3" {
		t.Fatalf("names %q %q %q", a.Name(), b.Name(), c.Name())
	}
}

// countingClock counts the timer operations of the scheduler's one timer goroutine: each
// wake-up of that goroutine re-arms (Reset) or disarms (Stop) the timer.
type countingClock struct {
	Clock
	ops atomic.Int64
}

type countingTimer struct {
	Timer
	c *countingClock
}

func (c *countingClock) NewTimer(d time.Duration) Timer {
	c.ops.Add(1)
	return countingTimer{c.Clock.NewTimer(d), c}
}
func (t countingTimer) Reset(d time.Duration) bool { t.c.ops.Add(1); return t.Timer.Reset(d) }
func (t countingTimer) Stop() bool                 { t.c.ops.Add(1); return t.Timer.Stop() }

// Row "idle cost" of the table in doc.go (issue 3, must show 5, as a deterministic test;
// BenchmarkIdle measures CPU time).
func TestIdleSchedulerOneGoroutineOneTimer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := &countingClock{Clock: RealClock()}
		s := New(Config{Clock: clk})
		defer mustClose(t, s)
		var runs atomic.Int64
		const n = 1000
		for range n {
			mustSchedule(t, s, time.Second, WallClock, func(context.Context, time.Time) { runs.Add(1) })
		}
		synctest.Wait()
		if g := schedulerGoroutines(); g != 1 {
			t.Fatalf("%d goroutines for %d idle punctuations, want 1", g, n)
		}
		ops := clk.ops.Load()
		time.Sleep(999 * time.Millisecond) // idle: nothing may wake up
		synctest.Wait()
		if d := clk.ops.Load() - ops; d != 0 || runs.Load() != 0 {
			t.Fatalf("idle window: %d timer operations, %d runs; want 0, 0", d, runs.Load())
		}
		for tick := 1; tick <= 3; tick++ {
			ops = clk.ops.Load()
			time.Sleep(time.Second)
			synctest.Wait()
			if got := runs.Load(); got != int64(tick*n) {
				t.Fatalf("after tick %d: %d runs, want %d", tick, got, tick*n)
			}
			// The timer fires once; the first runner to finish re-queues and kicks the
			// goroutine to re-arm; the other 999 find it armed already.
			if d := clk.ops.Load() - ops; d > 3 {
				t.Fatalf("tick %d: %d timer operations for %d punctuations, want at most 3", tick, d, n)
			}
			if g := schedulerGoroutines(); g != 1 {
				t.Fatalf("after tick %d: %d goroutines, want 1", tick, g)
			}
		}
	})
}

// schedulerGoroutines counts the goroutines running this package's code: the timer goroutine
// and runners (other goroutines of the process, such as the test framework's, are not counted).
func schedulerGoroutines() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	count := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "scheduler.(*Scheduler).loop") || strings.Contains(g, "scheduler.(*Scheduler).run(") {
			count++
		}
	}
	return count
}

// A Func that calls runtime.Goexit (as t.FailNow does) ends its punctuation but leaves the
// scheduler able to close, and other punctuations running.
func TestGoexitInFuncCancelsPunctuation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{})
		var runs, other atomic.Int32
		p := mustSchedule(t, s, time.Second, WallClock, func(context.Context, time.Time) {
			runs.Add(1)
			runtime.Goexit()
		})
		mustSchedule(t, s, time.Second, WallClock, func(context.Context, time.Time) { other.Add(1) })
		time.Sleep(3500 * time.Millisecond)
		synctest.Wait()
		if runs.Load() != 1 || other.Load() != 3 || !p.Stats().Cancelled {
			t.Fatalf("runs=%d other=%d stats=%+v", runs.Load(), other.Load(), p.Stats())
		}
		mustClose(t, s)
	})
}
