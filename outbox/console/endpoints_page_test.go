package console_test

import (
	"context"
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/outboxd/outbox/outbox"
	"github.com/outboxd/outbox/outbox/console"
)

// listingSink has configured endpoints (and delivers nothing: its outbox
// is never started).
type listingSink struct {
	nopSink
	names []string
}

func (s listingSink) EndpointNames() []string { return s.names }

var (
	endpointRowRE = regexp.MustCompile(`<tr id="ep-([^"]*)">`)
	nextLinkRE    = regexp.MustCompile(`<a href="([^"]*)" rel="next">`)
)

// The endpoints page lists a page of endpoints with a Next link carrying
// the cursor, escaped; following the links shows every endpoint once, in
// name order, hostile names included.
func TestEndpointsPagePages(t *testing.T) {
	var names []string
	for i := range 119 {
		names = append(names, fmt.Sprintf("ep-%03d", i))
	}
	hostile := `ep-049"><script>alert(1)</script>&x=`
	names = append(names, hostile) // sorts right after ep-049: the cursor of page 1
	o, err := outbox.Open(filepath.Join(t.TempDir(), "outbox.db"), outbox.Config{Sink: listingSink{names: names}, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := o.Stop(context.Background()); err != nil {
			t.Error(err)
		}
	})
	c, err := console.New(o, console.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	mux := http.NewServeMux()
	mux.Handle("/ui/", c)
	srv := httptest.NewServer(mux)
	defer srv.Close()

	var got []string
	path, pages := "/ui/endpoints", 0
	for path != "" {
		resp, body := do(t, srv.Client(), http.MethodGet, srv.URL+path, nil)
		pages++
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d\n%.2000s", path, resp.StatusCode, body)
		}
		if strings.Contains(body, "<script>alert") {
			t.Fatalf("page %d shows a name unescaped:\n%s", pages, body)
		}
		rows := endpointRowRE.FindAllStringSubmatch(body, -1)
		for _, m := range rows {
			got = append(got, html.UnescapeString(m[1]))
		}
		path = ""
		if m := nextLinkRE.FindStringSubmatch(body); m != nil {
			if len(rows) != 50 {
				t.Fatalf("page %d: %d endpoints and a Next link, want 50", pages, len(rows))
			}
			path = html.UnescapeString(m[1])
		}
		if pages > 1 && !strings.Contains(body, `>First page</a>`) {
			t.Errorf("page %d has no link to the first page", pages)
		}
	}
	want := slices.Sorted(slices.Values(names))
	if pages != 3 || !slices.Equal(got, want) {
		t.Fatalf("%d pages of %q, want 3 pages of %q", pages, got, want)
	}
	if resp, _ := do(t, srv.Client(), http.MethodGet, srv.URL+"/ui/endpoints?after=%ff", nil); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("a cursor that is not UTF-8: %d, want 400", resp.StatusCode)
	}
}
