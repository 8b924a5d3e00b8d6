package scheduler_test

import (
	"context"
	"fmt"
	"time"

	"github.com/outboxd/outbox/scheduler"
)

// A wall-clock punctuation delivers on its grid; Wake runs it at once when new work arrives,
// without moving the grid.
func Example() {
	s := scheduler.New(scheduler.Config{})

	ran := make(chan string)
	p, err := s.Schedule(time.Hour, scheduler.WallClock, func(ctx context.Context, ts time.Time) {
		select {
		case ran <- "delivered":
		case <-ctx.Done():
		}
	}, scheduler.Options{Name: "deliver"})
	if err != nil {
		fmt.Println(err)
		return
	}

	p.Wake() // a new event arrived: do not wait an hour
	fmt.Println(<-ran)

	if err := s.Close(context.Background()); err != nil {
		fmt.Println(err)
	}
	st := p.Stats()
	fmt.Printf("%s: runs=%d woken=%d skipped=%d\n", st.Name, st.Runs, st.WakeRuns, st.SkippedTicks)
	// Output:
	// delivered
	// deliver: runs=1 woken=1 skipped=0
}

// Stream-time punctuations follow the event time passed to Advance: the first runs as soon
// as stream time is known, then once per crossed boundary (a jump over several fires once),
// and time going backwards is ignored.
func ExampleScheduler_Advance() {
	s := scheduler.New(scheduler.Config{})
	defer s.Close(context.Background())

	fired := make(chan time.Time)
	p, err := s.Schedule(time.Minute, scheduler.StreamTime, func(ctx context.Context, ts time.Time) {
		fired <- ts
	})
	if err != nil {
		fmt.Println(err)
		return
	}

	at := func(hms string) time.Time {
		t, _ := time.Parse(time.DateTime, "2026-12-02 "+hms)
		return t
	}
	s.Advance(at("10:00:30")) // first data: fires
	fmt.Println("fired at", (<-fired).Format(time.TimeOnly))
	s.Advance(at("10:00:50")) // no boundary crossed
	s.Advance(at("10:03:10")) // crosses 10:01, 10:02, 10:03: fires once
	fmt.Println("fired at", (<-fired).Format(time.TimeOnly))
	s.Advance(at("10:02:00")) // backwards: ignored
	s.Advance(at("10:04:00")) // boundary 10:04 reached: fires
	fmt.Println("fired at", (<-fired).Format(time.TimeOnly))

	p.Cancel()
	// Output:
	// fired at 10:00:30
	// fired at 10:03:10
	// fired at 10:04:00
}
