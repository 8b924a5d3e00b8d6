package main

import (
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/outboxd/outbox/internal/testkit"
)

// An endpoint whose host name resolves to a non-public address (here the
// machine's own name; localhost and numeric forms are refused at start-up
// already) is refused by the address guard at dial time and disabled: its
// reason names the settings that allow it, and does not blame the
// receiver, which never answered. A real 410 does.
func TestGuardRefusalDisablesNamingTheFlags(t *testing.T) {
	host := privateHostName(t)
	rc := newReceiver(t, func(r *http.Request, id string) int { return http.StatusGone })
	port := rc.URL[strings.LastIndex(rc.URL, ":")+1:]
	p := start(t, t.TempDir(),
		"--endpoint", "local=http://"+host+":"+port+"/hook",
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
	for _, want := range []string{"address", ",allow-private", "--allow-private-networks"} {
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

// privateHostName returns the machine's host name when every address it
// resolves to is loopback, private or link-local; the test is skipped when
// it does not (a name resolving to a public address cannot show the
// guard).
func privateHostName(t *testing.T) string {
	t.Helper()
	host, err := os.Hostname()
	if err != nil {
		t.Skipf("no host name: %v", err)
	}
	addrs, err := net.LookupHost(host)
	if err != nil || len(addrs) == 0 {
		t.Skipf("the host name %q does not resolve: %v", host, err)
	}
	for _, a := range addrs {
		ip, err := netip.ParseAddr(a)
		if err != nil || !(ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast()) {
			t.Skipf("the host name %q resolves to %s, not a private address", host, a)
		}
	}
	return host
}
