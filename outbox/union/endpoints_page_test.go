package union_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/outboxd/outbox/outbox"
	"github.com/outboxd/outbox/outbox/httpapi"
	"github.com/outboxd/outbox/outbox/union"
)

// listSink has configured endpoints.
type listSink struct {
	*sink
	names []string
}

func (s listSink) EndpointNames() []string { return s.names }

// openListing opens an outbox (not started) whose Sink lists the endpoints
// ep-from to ep-to (excluded).
func openListing(t *testing.T, from, to int) *outbox.Outbox {
	t.Helper()
	s := listSink{sink: newSink()}
	for i := from; i < to; i++ {
		s.names = append(s.names, fmt.Sprintf("ep-%03d", i))
	}
	o, err := outbox.Open(filepath.Join(t.TempDir(), "outbox.db"), outbox.Config{Sink: s, Interval: 20 * time.Millisecond, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stop(t, o) })
	return o
}

// Two stores whose endpoints overlap page as one list: every name once, in
// order, merged over the stores, in the View and through the HTTP API.
func TestEndpointsPageMergesStores(t *testing.T) {
	a, b := openListing(t, 0, 180), openListing(t, 60, 250)
	v := union.New(a, func() []*outbox.Outbox { return []*outbox.Outbox{b} })
	want := make([]string, 250)
	for i := range want {
		want[i] = fmt.Sprintf("ep-%03d", i)
	}
	var got []string
	var nexts []string
	for after := ""; ; {
		eps, next, err := v.EndpointsPage(context.Background(), after, 100)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range eps {
			got = append(got, e.Name)
		}
		nexts = append(nexts, next)
		if next == "" {
			break
		}
		after = next
	}
	if !slices.Equal(got, want) || !slices.Equal(nexts, []string{"ep-099", "ep-199", ""}) {
		t.Fatalf("pages %v (next %q), want ep-000 to ep-249 in three pages", got, nexts)
	}

	srv := httptest.NewServer(httpapi.New(v, httpapi.Config{}))
	defer srv.Close()
	got = nil
	pages := 0
	for after := ""; ; pages++ {
		code, m := callAPI(t, srv, "GET", "/v1/endpoints?limit=100&after="+url.QueryEscape(after), "")
		if code != http.StatusOK {
			t.Fatalf("GET /v1/endpoints after %q: %d %v", after, code, m)
		}
		for _, e := range m["endpoints"].([]any) {
			got = append(got, e.(map[string]any)["name"].(string))
		}
		if after = m["next"].(string); after == "" {
			break
		}
	}
	if pages != 2 || !slices.Equal(got, want) {
		t.Fatalf("HTTP pages: %d, %v", pages+1, got)
	}
	code, m := callAPI(t, srv, "GET", "/v1/endpoints", "")
	if code != http.StatusOK || len(m["endpoints"].([]any)) != 100 || m["next"] != "ep-099" {
		t.Fatalf("GET /v1/endpoints: %d, %d endpoints, next %v; want the default page of 100", code, len(m["endpoints"].([]any)), m["next"])
	}
}

// A bad limit or after is a 400 naming the parameter.
func TestEndpointsPageRefusesBadParameters(t *testing.T) {
	v, _, _ := newView(t, 2)
	srv := httptest.NewServer(httpapi.New(v, httpapi.Config{}))
	defer srv.Close()
	for query, param := range map[string]string{
		"limit=0":                            "limit:",
		"limit=1001":                         "limit:",
		"limit=x":                            "limit:",
		"limit=99999999999999999999":         "limit:",
		"limit=1&limit=2":                    "limit:",
		"after=a&after=b":                    "after:",
		"after=%ff":                          "after:",
		"after=" + strings.Repeat("a", 1025): "after:",
	} {
		code, m := callAPI(t, srv, "GET", "/v1/endpoints?"+query, "")
		if msg, _ := m["error"].(string); code != http.StatusBadRequest || !strings.HasPrefix(msg, param) {
			t.Errorf("GET /v1/endpoints?%.40s: %d %v, want a 400 naming %s", query, code, m, param)
		}
	}
}
