package cli

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// versionString describes the build: module version, VCS revision and Go
// version, from the binary's build information.
func versionString() string {
	v, rev, dirty := "(devel)", "", false
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" {
			v = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
	}
	s := "outboxd " + v
	if rev != "" {
		if len(rev) > 12 {
			rev = rev[:12]
		}
		s += " " + rev
		if dirty {
			s += "+dirty"
		}
	}
	return s + " " + runtime.Version()
}

func version(e Env) int {
	fmt.Fprintln(e.Stdout, versionString())
	return exitOK
}
