package cli

import (
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/outboxd/outbox/internal/openapitest"
	"github.com/outboxd/outbox/outbox/httpapi"
)

// notAPI are the path prefixes outboxd serves beside the API that are not
// part of it: the console's pages, for people.
var notAPI = []string{"/ui"}

// TestServedRoutesAreDocumented: the routes outboxd serve mounts, read from
// its mux, are the operations of the OpenAPI document: its own (/metrics,
// /healthz, /readyz, tagged outboxd) and, behind its fallback "/", those of
// the API handler (whose own test holds them against its mux).
func TestServedRoutesAreDocumented(t *testing.T) {
	s := newReadyServer(t, nil)
	mux, ok := s.routes(prometheus.NewRegistry()).(*routeMux)
	if !ok {
		t.Fatal("routes does not return its routeMux")
	}
	var own, paths []string
	for _, p := range mux.patterns {
		if _, path, ok := strings.Cut(p, " "); ok && !underNotAPI(path) {
			own = append(own, p)
			paths = append(paths, path)
		}
	}
	api := false
	for _, p := range mux.patterns {
		switch {
		case strings.Contains(p, " "), underNotAPI(p), slices.Contains(paths, p): // a route, or the 405 of its path
		case p == "/":
			api = true
		default:
			t.Errorf("pattern %q serves every method of a path that has no documented one", p)
		}
	}
	if !api {
		t.Fatal(`the API is not mounted at "/"`)
	}
	if problems := openapitest.Compare(own, openapitest.Documented(t, true)); len(problems) > 0 {
		t.Errorf("the routes of outboxd serve and the OpenAPI document differ:\n%s", strings.Join(problems, "\n"))
	}
	var mounted []string
	for _, r := range httpapi.Routes() {
		mounted = append(mounted, r.String())
	}
	if problems := openapitest.Compare(mounted, openapitest.Documented(t, false)); len(problems) > 0 {
		t.Errorf("the routes of the API and the OpenAPI document differ:\n%s", strings.Join(problems, "\n"))
	}
}

// TestServedRoutesAnswerAsDocumented: outboxd's own routes, and the API's
// document beside them, answer as the OpenAPI document says.
func TestServedRoutesAnswerAsDocumented(t *testing.T) {
	s := newReadyServer(t, nil)
	srv := httptest.NewServer(openapitest.Handler(t, s.routes(prometheus.NewRegistry())))
	t.Cleanup(srv.Close)
	for _, c := range []struct {
		method, path string
		want         int
	}{
		{http.MethodGet, "/metrics", http.StatusOK},
		{http.MethodGet, "/healthz", http.StatusOK},
		{http.MethodHead, "/healthz", http.StatusOK},
		{http.MethodGet, "/readyz?verbose&exclude=kafka,restores", http.StatusOK},
		{http.MethodGet, httpapi.OpenAPIPath, http.StatusOK},
		{http.MethodPost, "/metrics", http.StatusMethodNotAllowed},
		{http.MethodGet, "/nowhere", http.StatusNotFound},
	} {
		req, err := http.NewRequest(c.method, srv.URL+c.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("%s %s: %d, want %d", c.method, c.path, resp.StatusCode, c.want)
		}
	}
}

func underNotAPI(path string) bool {
	return slices.ContainsFunc(notAPI, func(p string) bool { return path == p || strings.HasPrefix(path, p+"/") })
}
