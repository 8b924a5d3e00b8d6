package cli

import (
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

// tuneRuntime applies serveGCPercent and serveMemoryLimit where the
// environment does not set GOGC and GOMEMLIMIT, and returns a function that
// restores the previous settings.
func tuneRuntime(getenv config.Env) (restore func()) {
	prevPercent, prevLimit := -2, int64(-1)
	if _, set := getenv("GOGC"); !set {
		prevPercent = debug.SetGCPercent(serveGCPercent)
	}
	if _, set := getenv("GOMEMLIMIT"); !set {
		prevLimit = debug.SetMemoryLimit(serveMemoryLimit)
	}
	return func() {
		if prevPercent != -2 {
			debug.SetGCPercent(prevPercent)
		}
		if prevLimit >= 0 {
			debug.SetMemoryLimit(prevLimit)
		}
	}
}
