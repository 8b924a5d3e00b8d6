package cli

import (
	"runtime/debug"
	"testing"
)

func TestDescribeBuild(t *testing.T) {
	checkout := &debug.BuildInfo{
		Main: debug.Module{Version: "(devel)"},
		Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"},
			{Key: "vcs.modified", Value: "true"},
		},
	}
	installed := &debug.BuildInfo{Main: debug.Module{Version: "v1.4.0"}}
	for _, c := range []struct {
		name, version, commit string
		bi                    *debug.BuildInfo
		want                  string
	}{
		{"stamped at link time", "v1.2.3", "fedcba9876543210fedcba9876543210fedcba98", checkout,
			"outboxd v1.2.3 fedcba987654 go1.26.0"},
		{"built in a modified checkout", "", "", checkout,
			"outboxd (devel) 0123456789ab+dirty go1.26.0"},
		{"go install of a release", "", "", installed, "outboxd v1.4.0 go1.26.0"},
		{"no build information", "", "", nil, "outboxd (devel) go1.26.0"},
	} {
		if got := describeBuild(c.version, c.commit, c.bi, "go1.26.0"); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}
