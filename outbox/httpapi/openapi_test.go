package httpapi_test

import (
	"bytes"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/outboxd/outbox/internal/openapitest"
	"github.com/outboxd/outbox/outbox/httpapi"
)

// TestOpenAPIDocumentIsValid: the document is an OpenAPI 3.1 document that
// the validator accepts (its schemas are valid JSON Schema 2020-12).
func TestOpenAPIDocumentIsValid(t *testing.T) {
	doc, err := openapitest.Document()
	if err != nil {
		t.Fatal(err)
	}
	if doc.OpenAPI != "3.1.0" {
		t.Errorf("openapi = %q, want 3.1.0", doc.OpenAPI)
	}
}

// apiPatterns returns the method patterns h registered, and fails t for a
// pattern without a method that is neither the fallback nor the 405 of a
// path with methods.
func apiPatterns(t *testing.T, h http.Handler) []string {
	t.Helper()
	var withMethod, paths []string
	all := httpapi.MountedPatterns(h)
	for _, p := range all {
		if _, path, ok := strings.Cut(p, " "); ok {
			withMethod = append(withMethod, p)
			paths = append(paths, path)
		}
	}
	for _, p := range all {
		if !strings.Contains(p, " ") && p != "/" && !slices.Contains(paths, p) {
			t.Errorf("pattern %q serves every method of a path that has no documented one", p)
		}
	}
	return withMethod
}

// TestEveryRouteIsDocumented: the routes the handler mounts, read from its
// mux as New built it, are the operations of the document (those not
// tagged outboxd), no more and no less; Routes lists them.
func TestEveryRouteIsDocumented(t *testing.T) {
	h := httpapi.New(nil, httpapi.Config{})
	mounted := apiPatterns(t, h)
	if problems := openapitest.Compare(mounted, openapitest.Documented(t, false)); len(problems) > 0 {
		t.Errorf("the routes and the OpenAPI document differ:\n%s", strings.Join(problems, "\n"))
	}
	var listed []string
	for _, r := range httpapi.Routes() {
		listed = append(listed, r.String())
	}
	if !slices.Equal(listed, mounted) {
		t.Errorf("Routes() = %q, want what New mounts, %q", listed, mounted)
	}
}

// TestConformanceCatchesARouteAddedWithoutItsDocument: a handler with one
// more route than the document fails the check of
// TestEveryRouteIsDocumented, naming the route; so does a document with an
// operation that no route serves.
func TestConformanceCatchesARouteAddedWithoutItsDocument(t *testing.T) {
	documented := openapitest.Documented(t, false)
	h := httpapi.NewWithExtraRoutes(nil, httpapi.Config{}, httpapi.Route{Method: http.MethodGet, Path: "/v1/events/{id}/history"})
	got := openapitest.Compare(apiPatterns(t, h), documented)
	want := []string{"GET /v1/events/{id}/history: mounted, not in the OpenAPI document"}
	if !slices.Equal(got, want) {
		t.Errorf("an undocumented route: %q, want %q", got, want)
	}

	got = openapitest.Compare(apiPatterns(t, httpapi.New(nil, httpapi.Config{})), append(documented, "DELETE /v1/stats"))
	want = []string{"DELETE /v1/stats: in the OpenAPI document, not mounted"}
	if !slices.Equal(got, want) {
		t.Errorf("an operation no route serves: %q, want %q", got, want)
	}
}

// TestOpenAPIIsServedWithoutTheToken: GET /v1/openapi.json answers the
// document to a client without the token, which every other route refuses.
func TestOpenAPIIsServedWithoutTheToken(t *testing.T) {
	rc := newReceiver(t, nil)
	e := newEnv(t, httpapi.Config{Token: "s3cret"}, map[string]string{"orders": rc.URL})
	resp, err := http.Get(e.api.URL + httpapi.OpenAPIPath)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" ||
		!bytes.Equal(body, httpapi.OpenAPI()) {
		t.Errorf("GET %s without the token: %d %q, %d bytes; want 200 application/json and the document",
			httpapi.OpenAPIPath, resp.StatusCode, resp.Header.Get("Content-Type"), len(body))
	}
	resp, err = http.Get(e.api.URL + "/v1/stats")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET /v1/stats without the token: %d, want 401", resp.StatusCode)
	}
	if code, m := e.post(t, httpapi.OpenAPIPath, []byte(`{}`)); code != http.StatusMethodNotAllowed {
		t.Errorf("POST %s: %d %v, want 405", httpapi.OpenAPIPath, code, m)
	}
}
