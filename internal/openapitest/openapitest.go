// Package openapitest holds HTTP traffic against the OpenAPI document of
// package httpapi (httpapi.OpenAPI), for tests: Handler wraps a server's
// handler so that every answer it gives is validated against the document,
// and every request it accepts (2xx) too; Operations lists the documented
// routes, for the tests that hold them against the routes a server mounts.
//
// The validator is github.com/getkin/kin-openapi (openapi3filter), which
// validates an OpenAPI 3.1 document's schemas as JSON Schema 2020-12. This
// package is imported by tests only, so the validator is linked into test
// binaries only.
package openapitest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"

	"github.com/outboxd/outbox/outbox/httpapi"
)

// Operation is one documented route.
type Operation struct {
	// Method is the upper-case HTTP method, Path the path template.
	Method, Path string
	// Tags are the operation's tags; "outboxd" marks the routes outboxd
	// serves beside the API handler.
	Tags []string
}

// String returns the operation as an http.ServeMux pattern: "GET /v1/stats".
func (o Operation) String() string { return o.Method + " " + o.Path }

// Operations returns the operations of the document, sorted by path, then
// method.
func Operations() ([]Operation, error) {
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(httpapi.OpenAPI(), &doc); err != nil {
		return nil, err
	}
	var ops []Operation
	for path, item := range doc.Paths {
		for key, raw := range item {
			switch key {
			case "get", "put", "post", "delete", "options", "head", "patch", "trace":
			default:
				continue // parameters, summary...
			}
			var op struct {
				Tags []string `json:"tags"`
			}
			if err := json.Unmarshal(raw, &op); err != nil {
				return nil, fmt.Errorf("%s %s: %w", key, path, err)
			}
			ops = append(ops, Operation{Method: strings.ToUpper(key), Path: path, Tags: op.Tags})
		}
	}
	sort.Slice(ops, func(i, j int) bool {
		if ops[i].Path != ops[j].Path {
			return ops[i].Path < ops[j].Path
		}
		return ops[i].Method < ops[j].Method
	})
	return ops, nil
}

// Document loads and validates the document (an OpenAPI 3.1 document,
// with JSON Schema 2020-12 schemas).
func Document() (*openapi3.T, error) {
	doc, err := openapi3.NewLoader().LoadFromData(httpapi.OpenAPI())
	if err != nil {
		return nil, err
	}
	if !doc.IsOpenAPI31OrLater() {
		return nil, fmt.Errorf("the document is OpenAPI %s, want 3.1", doc.OpenAPI)
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, err
	}
	return doc, nil
}

var (
	routerOnce sync.Once
	router     routers.Router
	routerErr  error
)

// documentRouter returns a router over the document, loaded once.
func documentRouter() (routers.Router, error) {
	routerOnce.Do(func() {
		doc, err := Document()
		if err != nil {
			routerErr = err
			return
		}
		router, routerErr = legacy.NewRouter(doc)
	})
	return router, routerErr
}

// Handler returns next wrapped so that each request it serves is checked
// against the document once answered; a mismatch fails t:
//   - an answer to a documented route must be documented: its status, its
//     headers and its body's media type and schema;
//   - a request the server accepted (2xx) must be valid by the document:
//     its parameters and body (a document stricter than the server is a
//     mistake of the document); a refused one need not be;
//   - an undocumented path must answer 404 and an undocumented method of
//     a documented path 405 with an Allow header, both as an error object.
//
// The request's body is read by next as it arrives (a copy is kept for the
// check), so limits, deadlines and memory budgets behave as without the
// check. HEAD requests are checked for their status only.
func Handler(t testing.TB, next http.Handler) http.Handler {
	t.Helper()
	r, err := documentRouter()
	if err != nil {
		t.Fatalf("openapitest: the document: %v", err)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var got bytes.Buffer
		body := req.Body
		if body != nil && body != http.NoBody {
			req.Body = struct {
				io.Reader
				io.Closer
			}{io.TeeReader(body, &got), body}
		}
		rec := &recorder{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(rec, req)
		if err := check(r, req, got.Bytes(), rec); err != nil {
			t.Errorf("openapitest: %s %s answered %d: %v", req.Method, req.URL.RequestURI(), rec.status, err)
		}
	})
}

// check validates one exchange; body is what next read of the request.
func check(r routers.Router, req *http.Request, body []byte, rec *recorder) error {
	method := req.Method
	if method == http.MethodHead {
		method = http.MethodGet
	}
	probe := req.Clone(context.Background())
	probe.Method = method
	probe.Body = io.NopCloser(bytes.NewReader(body))
	route, params, err := r.FindRoute(probe)
	if err != nil {
		return checkUnrouted(r, probe, err, rec)
	}
	opts := &openapi3filter.Options{
		AuthenticationFunc:    openapi3filter.NoopAuthenticationFunc,
		IncludeResponseStatus: true,
		MultiError:            true,
	}
	in := &openapi3filter.RequestValidationInput{Request: probe, PathParams: params, Route: route, Options: opts}
	var errs []error
	if rec.status >= 200 && rec.status < 300 {
		if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil {
			errs = append(errs, fmt.Errorf("the server accepted a request the document refuses: %w", err))
		}
	}
	if req.Method == http.MethodHead {
		if route.Operation.Responses.Status(rec.status) == nil && route.Operation.Responses.Default() == nil {
			errs = append(errs, fmt.Errorf("status %d is not documented", rec.status))
		}
		return errors.Join(errs...)
	}
	out := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in,
		Status:                 rec.status,
		Header:                 rec.Header(),
		Options:                opts,
	}
	out.SetBodyBytes(rec.body.Bytes())
	if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
		errs = append(errs, fmt.Errorf("the answer %s does not match the document: %w", short(rec.body.Bytes()), err))
	}
	return errors.Join(errs...)
}

// checkUnrouted checks the answer to a request the document has no
// operation for: 404 for an unknown path, 405 with Allow for another
// method of a known one, as an error object.
func checkUnrouted(r routers.Router, req *http.Request, err error, rec *recorder) error {
	var re *routers.RouteError
	if !errors.As(err, &re) {
		return err
	}
	want, why := http.StatusNotFound, "no such path"
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		other := req.Clone(context.Background())
		other.Method = m
		if _, _, err := r.FindRoute(other); err == nil {
			want, why = http.StatusMethodNotAllowed, "no such method on this path"
			break
		}
	}
	var e struct {
		Error string `json:"error"`
	}
	switch {
	case rec.status != want:
		return fmt.Errorf("the document has %s, so the answer must be %d", why, want)
	case want == http.StatusMethodNotAllowed && rec.Header().Get("Allow") == "":
		return errors.New("405 without an Allow header")
	case json.Unmarshal(rec.body.Bytes(), &e) != nil || e.Error == "":
		return fmt.Errorf("the answer %s is not an error object", short(rec.body.Bytes()))
	}
	return nil
}

func short(b []byte) string {
	if len(b) > 300 {
		return fmt.Sprintf("%q...", b[:300])
	}
	return fmt.Sprintf("%q", b)
}

// recorder passes an answer through and keeps its status and body.
type recorder struct {
	http.ResponseWriter
	status  int
	written bool
	body    bytes.Buffer
}

func (r *recorder) WriteHeader(code int) {
	if !r.written {
		r.status, r.written = code, true
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	r.written = true
	r.body.Write(b)
	return r.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection (the API sets
// read deadlines through it).
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// Paths returns the distinct paths of ops, sorted.
func Paths(ops []Operation) []string {
	var out []string
	for _, o := range ops {
		out = append(out, o.Path)
	}
	slices.Sort(out)
	return slices.Compact(out)
}
