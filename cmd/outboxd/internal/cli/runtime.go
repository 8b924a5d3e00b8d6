package cli

import (
	"runtime"
	"runtime/debug"

	"github.com/outboxd/outbox/cmd/outboxd/internal/config"
)

// Garbage collector settings of outboxd serve, used unless the GOGC or
// GOMEMLIMIT environment variable is set. The sidecar's live heap is small
// (request bodies and the events of the commit under way) but it allocates
// fast, so the heap may grow to five times the live data before a
// collection; the soft memory limit makes the collector work harder instead
// of letting the heap pass 1 GiB.
const (
	serveGCPercent   = 400
	serveMemoryLimit = 1 << 30
)

// serveExtraProcs is how many processors (Ps) outboxd serve runs above the
// runtime's default GOMAXPROCS, unless the GOMAXPROCS variable is set. Every
// write waits for the store's one committer, which spends most of a commit
// blocked in fdatasync; the runtime hands its processor to the HTTP handlers
// meanwhile, and when the sync returns the committer waits for a processor
// behind them, and every request of the commit with it. One spare processor
// lets it go on at once (the kernel runs a thread woken from I/O promptly).
const serveExtraProcs = 1

// tuneRuntime applies serveGCPercent, serveMemoryLimit and serveExtraProcs
// where the environment does not set GOGC, GOMEMLIMIT and GOMAXPROCS, and
// returns a function that restores the previous settings.
func tuneRuntime(getenv config.Env) (restore func()) {
	prevPercent, prevLimit, prevProcs := -2, int64(-1), 0
	if _, set := getenv("GOGC"); !set {
		prevPercent = debug.SetGCPercent(serveGCPercent)
	}
	if _, set := getenv("GOMEMLIMIT"); !set {
		prevLimit = debug.SetMemoryLimit(serveMemoryLimit)
	}
	if _, set := getenv("GOMAXPROCS"); !set {
		prevProcs = runtime.GOMAXPROCS(runtime.GOMAXPROCS(0) + serveExtraProcs)
	}
	return func() {
		if prevPercent != -2 {
			debug.SetGCPercent(prevPercent)
		}
		if prevLimit >= 0 {
			debug.SetMemoryLimit(prevLimit)
		}
		if prevProcs > 0 {
			runtime.GOMAXPROCS(prevProcs)
		}
	}
}
