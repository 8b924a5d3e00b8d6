package main

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/outboxd/outbox/internal/testkit"
)

// An endpoint whose host resolves to loopback is refused by the address
// guard at dial time and disabled: its reason names the settings that allow
// it, and does not blame the receiver, which never answered. A real 410 does.
func TestGuardRefusalDisablesNamingTheFlags(t *testing.T) {
	rc := newReceiver(t, func(r *http.Request, id string) int { return http.StatusGone })
	port := rc.URL[strings.LastIndex(rc.URL, ":")+1:]
	p := start(t, t.TempDir(),
		"--endpoint", "local=http://localhost:"+port+"/hook",
		"--endpoint", rc.endpoint("gone"))
	call(t, "POST", p.url("/v1/events"), "", `[{"id":"l-1","destination":"local"},{"id":"g-1","destination":"gone"}]`)
	reasons := map[string]string{}
	testkit.WaitFor(t, 10*time.Second, "both endpoints disabled", func() bool {
		_, m := call(t, "GET", p.url("/v1/endpoints"), "", "")
		for _, e := range m["endpoints"].([]any) {
			e := e.(map[string]any)
			if r, _ := e["disabled_reason"].(string); e["disabled"] == true {
				reasons[e["name"].(string)] = r
			}
		}
		return len(reasons) == 2
	})

	local := reasons["local"]
	if !strings.HasPrefix(local, "disabled: ") || strings.Contains(local, "receiver") {
		t.Errorf("guard refusal: reason %q, want one that starts with \"disabled: \" and does not blame the receiver", local)
	}
	for _, want := range []string{"loopback", ",allow-private", "--allow-private-networks"} {
		if !strings.Contains(local, want) {
			t.Errorf("guard refusal: reason %q does not name %s", local, want)
		}
	}
	if rc.attemptCount("l-1") != 0 {
		t.Error("the guard let a request through")
	}
	if gone := reasons["gone"]; !strings.HasPrefix(gone, "disabled by the receiver: status 410") {
		t.Errorf("410: reason %q, want \"disabled by the receiver: status 410...\"", gone)
	}
}
