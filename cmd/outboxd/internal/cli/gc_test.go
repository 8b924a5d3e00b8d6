package cli

import (
	"runtime/debug"
	"testing"
)

// gcSettings reads the current GC percent and memory limit.
func gcSettings() (percent int, limit int64) {
	percent = debug.SetGCPercent(100)
	debug.SetGCPercent(percent)
	return percent, debug.SetMemoryLimit(-1)
}

func TestServeTunesGCUnlessTheEnvironmentDoes(t *testing.T) {
	percent0, limit0 := gcSettings()

	restore := tuneGC(func(string) (string, bool) { return "", false })
	if p, l := gcSettings(); p != serveGCPercent || l != serveMemoryLimit {
		t.Errorf("with neither GOGC nor GOMEMLIMIT set: GC percent %d, memory limit %d; want %d, %d", p, l, serveGCPercent, serveMemoryLimit)
	}
	restore()
	if p, l := gcSettings(); p != percent0 || l != limit0 {
		t.Errorf("restore left GC percent %d, memory limit %d; want %d, %d", p, l, percent0, limit0)
	}

	// An operator's GOGC or GOMEMLIMIT (already applied by the runtime) wins.
	restore = tuneGC(func(k string) (string, bool) { return "50", k == "GOGC" || k == "GOMEMLIMIT" })
	if p, l := gcSettings(); p != percent0 || l != limit0 {
		t.Errorf("with GOGC and GOMEMLIMIT set: GC percent %d, memory limit %d; want them untouched (%d, %d)", p, l, percent0, limit0)
	}
	restore()
}
