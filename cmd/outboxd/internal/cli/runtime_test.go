package cli

import (
	"runtime"
	"runtime/debug"
	"testing"
)

// runtimeSettings reads the current GC percent, memory limit and GOMAXPROCS.
func runtimeSettings() (percent int, limit int64, procs int) {
	percent = debug.SetGCPercent(100)
	debug.SetGCPercent(percent)
	return percent, debug.SetMemoryLimit(-1), runtime.GOMAXPROCS(0)
}

func TestServeTunesTheRuntimeUnlessTheEnvironmentDoes(t *testing.T) {
	percent0, limit0, procs0 := runtimeSettings()

	restore := tuneRuntime(func(string) (string, bool) { return "", false })
	if p, l, n := runtimeSettings(); p != serveGCPercent || l != serveMemoryLimit || n != procs0 {
		t.Errorf("with neither GOGC, GOMEMLIMIT nor GOMAXPROCS set: GC percent %d, memory limit %d, GOMAXPROCS %d; want %d, %d, %d",
			p, l, n, serveGCPercent, serveMemoryLimit, procs0)
	}
	restore()
	if p, l, n := runtimeSettings(); p != percent0 || l != limit0 || n != procs0 {
		t.Errorf("restore left GC percent %d, memory limit %d, GOMAXPROCS %d; want %d, %d, %d", p, l, n, percent0, limit0, procs0)
	}

	// An operator's GOGC, GOMEMLIMIT or GOMAXPROCS (already applied by the
	// runtime) wins.
	restore = tuneRuntime(func(k string) (string, bool) {
		return "50", k == "GOGC" || k == "GOMEMLIMIT" || k == "GOMAXPROCS"
	})
	if p, l, n := runtimeSettings(); p != percent0 || l != limit0 || n != procs0 {
		t.Errorf("with GOGC, GOMEMLIMIT and GOMAXPROCS set: GC percent %d, memory limit %d, GOMAXPROCS %d; want them untouched (%d, %d, %d)",
			p, l, n, percent0, limit0, procs0)
	}
	restore()
}
