// Package scheduler is the punctuator: it calls functions periodically, on wall-clock time
// or on stream (event) time, the way Kafka Streams' ProcessorContext.schedule(interval, type,
// punctuator) does, and it knows nothing of what they do.
//
//	s := scheduler.New(scheduler.Config{Logger: logger})
//	p, err := s.Schedule(time.Second, scheduler.WallClock, deliver, scheduler.Options{Name: "deliver"})
//	...
//	p.Wake()           // new work: run now, coalesced, grid unchanged
//	s.Advance(eventTs) // stream time, for StreamTime punctuations
//	...
//	err = s.Close(ctx) // cancel running punctuations' context, wait for them up to ctx
//
// # Cost
//
// One goroutine with one timer waits for the earliest WallClock grid point of all
// punctuations (a heap of next-fire times); an idle scheduler with 1,000 punctuations is one
// parked goroutine and no timer wake-ups between grid points (TestIdleSchedulerOneGoroutineOneTimer,
// BenchmarkIdle). Each run of a Func gets a goroutine of its own, owned by the scheduler and
// joined by Close; a punctuation never has two. StreamTime punctuations need no goroutine
// until they fire: Advance pops them from a heap of boundaries.
//
// # Semantics, side by side with Kafka Streams
//
// Kafka Streams runs punctuators synchronously on the stream thread, between records; here
// each punctuation runs in a goroutine of its own, so different punctuations run concurrently
// and neither Advance nor Wake ever waits for one. Each row is backed by the test named in it.
//
//	| Aspect                      | Kafka Streams                                  | this package                                                  | test
//	|-----------------------------|------------------------------------------------|---------------------------------------------------------------|------------------------------------------------
//	| grid                        | WALL_CLOCK_TIME: first at schedule time +      | same: start + k·interval, k ≥ 1; ts is the clock's time at    | TestWallClockFiresOnGrid
//	|                             | interval, then every interval, no drift        | the start of the run (as Kafka passes the current time)       |
//	| missed ticks (slow          | the thread is blocked, so the overdue          | no catch-up run: the next run is at the first grid point at   | TestWallClockLongRunSkipsTicks
//	| punctuator)                 | punctuation runs once, late, as soon as it is  | or after the end of the slow one; the ticks in between are    |
//	|                             | free; then back on the grid                    | skipped and counted (SkippedTicks, Overruns)                  |
//	| late timer (pause, GC)      | runs once, later ticks skipped, back on grid   | same: one run, skipped ticks counted, back on the grid        | TestWallClockLateTimerRunsOnce
//	| overlap                     | impossible (one thread)                        | a punctuation never overlaps itself (checked with an atomic   | TestWallClockLongRunSkipsTicks,
//	|                             |                                                | counter under ticks, wakes and stream time)                   | TestWakeBurstCoalesces, TestStreamTimeCrossedWhileRunningFiresAfter
//	| jitter                      | none                                           | Options.Jitter: a random phase in [0, Jitter) drawn once per  | TestJitterShiftsGridByFixedPhase
//	|                             |                                                | punctuation; runs stay exactly one interval apart             |
//	| early run                   | none                                           | Wake: runs now, grid unchanged; a burst of wakes costs at     | TestWakeRunsEarlyGridUnchanged, TestWakeBurstCoalesces,
//	|                             |                                                | most two runs (one now, one queued behind a running one)      | TestWakeDuringRunQueuesOneRerun
//	| stream-time first run       | STREAM_TIME is aligned to 0 and punctuates as  | same: as soon as stream time is known (on the first Advance,  | TestStreamTimeFirstRunAsSoonAsStreamTimeKnown
//	|                             | soon as the task has data                      | or at Schedule if Advance was called before)                  |
//	| stream-time boundary        | fires when stream time reaches the next        | same: boundaries are multiples of the interval since the Unix | TestStreamTimeFiresOnBoundary
//	|                             | multiple of the interval; ts is stream time    | epoch; ts is the stream time                                  |
//	| stream-time jump            | a jump over several intervals fires once       | same; the boundaries jumped over are counted as skipped       | TestStreamTimeJumpFiresOnce
//	| stream time backwards       | stream time is the max timestamp seen; it      | same: Advance with a time not after the current one is        | TestStreamTimeBackwardsIgnored
//	|                             | never goes back                                | ignored                                                       |
//	| boundary crossed during a   | impossible (stream time only moves between     | fires once right after the run returns (stream time moves     | TestStreamTimeCrossedWhileRunningFiresAfter
//	| run                         | punctuations)                                  | only with data, so the crossing is not dropped)               |
//	| cancel from inside          | Cancellable.cancel() inside punctuate works    | same: Cancel (and Wake) inside the Func neither deadlock nor  | TestCancelFromInside, TestCancelLetsRunningFinish
//	|                             |                                                | run again; Cancel from outside lets the current run finish    |
//	| shutdown                    | the task closes between punctuations           | Close(ctx) cancels the running Funcs' context and waits up to | TestCloseWaitsForBlockedPunctuation,
//	|                             |                                                | ctx; on expiry returns ctx.Err() and the runs still exit      | TestCloseExpiredContextReturnsErrAndRunExits,
//	|                             |                                                | later; idempotent; Schedule after Close is ErrClosed          | TestCloseIdempotentAndAfterClose
//	| exception / panic           | an exception in punctuate fails the stream     | recovered, logged, passed to Config.OnPanic and counted       | TestPanicRecoveredAndReported
//	|                             | thread (StreamsException)                      | (Panics); later runs of it and of others go on                |
//	| idle cost                   | checked on each loop of the stream thread      | one goroutine and one timer for all punctuations              | TestIdleSchedulerOneGoroutineOneTimer, BenchmarkIdle
//
// # Testing code that uses a Scheduler
//
// The default [RealClock] is deterministic inside a testing/synctest bubble: create the
// Scheduler inside synctest.Test, let fake time pass with time.Sleep, and use synctest.Wait
// to let due punctuations run, as this package's own tests do.
package scheduler
