package cli

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// Set at link time by release builds and the Containerfile's build command:
//
//	-ldflags "-X github.com/outboxd/outbox/cmd/outboxd/internal/cli.stampedVersion=v1.2.3
//	          -X github.com/outboxd/outbox/cmd/outboxd/internal/cli.stampedCommit=<sha>"
//
// When empty, the binary's build information supplies them (the module
// version for go install, the VCS revision for a build in a checkout).
var stampedVersion, stampedCommit string

// versionString describes this binary: version, commit and Go version.
func versionString() string {
	bi, _ := debug.ReadBuildInfo()
	return describeBuild(stampedVersion, stampedCommit, bi, runtime.Version())
}

// describeBuild is "outboxd VERSION COMMIT GOVERSION": stamped values win
// over the build information; a commit built from a modified tree ends in
// "+dirty", and one that is unknown is left out.
func describeBuild(version, commit string, bi *debug.BuildInfo, goVersion string) string {
	biVersion, biCommit, dirty := "", "", false
	if bi != nil {
		biVersion = bi.Main.Version
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				biCommit = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
	}
	if version == "" {
		version = biVersion
	}
	if version == "" {
		version = "(devel)"
	}
	if commit == "" && biCommit != "" {
		commit = shortCommit(biCommit)
		if dirty {
			commit += "+dirty"
		}
	}
	s := "outboxd " + version
	if commit != "" {
		s += " " + shortCommit(commit)
	}
	return s + " " + goVersion
}

// shortCommit keeps the first 12 characters of a revision, git's
// abbreviated form.
func shortCommit(rev string) string {
	if len(rev) > 12 && !strings.Contains(rev, "+") {
		return rev[:12]
	}
	return rev
}

func version(e Env) int {
	fmt.Fprintln(e.Stdout, versionString())
	return exitOK
}
