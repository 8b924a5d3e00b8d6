//go:build linux || darwin

package scheduler

import (
	"context"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"
)

// cpuTime is the CPU time (user + system) the process has used so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkIdle measures what 1,000 scheduled but idle punctuations cost between ticks: each
// op is 1ms of idle wall time; cpu-ns/op is the CPU the whole process used in it, goroutines
// the goroutines added, timer-ops the operations on the scheduler's timer in the window.
// Baselines in the same run: "nothing" (the process alone) and "goroutine-per-punctuation"
// (1,000 goroutines each waiting on its own time.Ticker, the design the scheduler avoids).
func BenchmarkIdle(b *testing.B) {
	const n = 1000
	const interval = time.Hour // no tick falls in the measured window
	setups := []struct {
		name  string
		start func(clk *countingClock) (stop func())
	}{
		{"nothing", func(*countingClock) func() { return func() {} }},
		{"scheduler", func(clk *countingClock) func() {
			s := New(Config{Clock: clk})
			for range n {
				if _, err := s.Schedule(interval, WallClock, func(context.Context, time.Time) {}); err != nil {
					b.Fatal(err)
				}
			}
			return func() {
				if err := s.Close(context.Background()); err != nil {
					b.Fatal(err)
				}
			}
		}},
		{"goroutine-per-punctuation", func(*countingClock) func() {
			quit := make(chan struct{})
			var wg sync.WaitGroup
			for range n {
				wg.Go(func() {
					tk := time.NewTicker(interval)
					defer tk.Stop()
					for {
						select {
						case <-tk.C:
						case <-quit:
							return
						}
					}
				})
			}
			return func() { close(quit); wg.Wait() }
		}},
	}
	for _, su := range setups {
		b.Run(su.name, func(b *testing.B) {
			clk := &countingClock{Clock: RealClock()}
			before := runtime.NumGoroutine()
			stop := su.start(clk)
			defer stop()
			time.Sleep(10 * time.Millisecond) // let the goroutines park
			goroutines := runtime.NumGoroutine() - before
			ops := clk.ops.Load()
			cpu := cpuTime(b)
			b.ResetTimer()
			for b.Loop() {
				time.Sleep(time.Millisecond)
			}
			b.StopTimer()
			b.ReportMetric(float64(cpuTime(b)-cpu)/float64(b.N), "cpu-ns/op")
			b.ReportMetric(float64(goroutines), "goroutines")
			b.ReportMetric(float64(clk.ops.Load()-ops), "timer-ops")
		})
	}
}

// BenchmarkWake measures one Wake-triggered run of an idle punctuation, end to end (Wake,
// goroutine start, Func, bookkeeping), against the same-run baseline of starting a goroutine
// and waiting for it.
func BenchmarkWake(b *testing.B) {
	b.Run("go-statement", func(b *testing.B) {
		done := make(chan struct{})
		for b.Loop() {
			go func() { done <- struct{}{} }()
			<-done
		}
	})
	b.Run("scheduler", func(b *testing.B) {
		s := New(Config{})
		defer s.Close(context.Background())
		done := make(chan struct{})
		p, err := s.Schedule(time.Hour, WallClock, func(context.Context, time.Time) { done <- struct{}{} })
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			p.Wake()
			<-done
			for p.Stats().Running { // the run's bookkeeping ends just after the send
				runtime.Gosched()
			}
		}
	})
}
