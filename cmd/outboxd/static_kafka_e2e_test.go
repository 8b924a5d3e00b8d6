//go:build unix

package main

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/outboxd/outbox/internal/openapitest"
	"github.com/outboxd/outbox/internal/testkit"
)

// tuningWith writes the harness's settings with endpoints added, as
// another file, and returns its path.
func (f *fleet) tuningWith(name, endpoints string) string {
	f.t.Helper()
	b, err := os.ReadFile(f.tuning)
	if err != nil {
		f.t.Fatal(err)
	}
	path := strings.TrimSuffix(f.tuning, ".yaml") + "-" + name + ".yaml"
	if err := os.WriteFile(path, append(b, "endpoints:\n"+endpoints...), 0o600); err != nil {
		f.t.Fatal(err)
	}
	return path
}

// readiness is an instance's GET /readyz: the status code and the reason
// of the static-endpoints check ("" when it passed or did not run).
type readiness struct {
	code   int
	status string
	static string
}

// ready reads in's GET /readyz, checked against the OpenAPI document; ok
// is false when it did not answer.
func ready(t *testing.T, in *instance) (readiness, bool) {
	resp, err := statsClient.Get(in.p.url("/readyz"))
	if err != nil {
		return readiness{}, false
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return readiness{}, false
	}
	openapitest.Check(t, resp.Request, nil, resp.StatusCode, resp.Header, b)
	var a struct {
		Status string `json:"status"`
		Checks []struct {
			Name   string `json:"name"`
			Reason string `json:"reason"`
		} `json:"checks"`
	}
	if json.Unmarshal(b, &a) != nil {
		return readiness{}, false
	}
	r := readiness{code: resp.StatusCode, status: a.Status}
	for _, c := range a.Checks {
		if c.Name == "static-endpoints" {
			r.static = c.Reason
		}
	}
	return r, true
}

// Must show (bad input) of issue 30: static endpoints that the members of
// a group define differently make /readyz of every member not ready,
// naming those endpoints only; once the settings agree every member is
// ready.
func TestStaticEndpointsMustAgreeAcrossTheGroup(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	common := "  - name: audit\n    url: " + f.rc.URL + "/audit\n    allow_private: true\n    headers:\n      X-Team: billing\n"
	refunds := "  - name: refunds\n    url: " + f.rc.URL + "/refunds\n    allow_private: true\n    timeout: "
	agreed := f.tuningWith("agreed", common+refunds+"5s\n")
	other := f.tuningWith("other", common+refunds+"7s\n")

	f.tuning = agreed
	a := f.add("a")
	f.tuning = other
	b := f.add("b")
	f.waitBalanced(waitLong, a, b)
	testkit.WaitFor(t, waitLong, "both instances not ready, naming refunds", func() bool {
		for _, in := range []*instance{a, b} {
			r, ok := ready(t, in)
			if !ok || r.code != http.StatusServiceUnavailable || !strings.Contains(r.static, "refunds") {
				return false
			}
		}
		return true
	})
	for _, in := range []*instance{a, b} {
		r, _ := ready(t, in)
		t.Logf("%s: %d %s", in.name, r.code, r.status)
		if strings.Contains(r.static, "audit") || strings.Contains(r.static, "orders") {
			t.Errorf("%s: %q names endpoints defined alike", in.name, r.static)
		}
	}

	// The same settings on both: ready.
	b.stop()
	f.tuning = agreed
	b.restart()
	f.waitBalanced(waitLong, a, b)
	testkit.WaitFor(t, waitLong, "both instances ready", func() bool {
		for _, in := range []*instance{a, b} {
			if r, ok := ready(t, in); !ok || r.code != http.StatusOK {
				return false
			}
		}
		return true
	})
}
