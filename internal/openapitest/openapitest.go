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
		if err := check(r, req, got.Bytes(), rec.status, rec.Header(), rec.body.Bytes()); err != nil {
			t.Errorf("openapitest: %s %s answered %d: %v", req.Method, req.URL.RequestURI(), rec.status, err)
		}
	})
}

// Check holds one exchange seen from a client against the document, as
// Handler does on the server's side: req as sent, with reqBody its body,
// and the answer's status, header and body. A mismatch fails t.
func Check(t testing.TB, req *http.Request, reqBody []byte, status int, header http.Header, body []byte) {
	t.Helper()
	r, err := documentRouter()
	if err != nil {
		t.Fatalf("openapitest: the document: %v", err)
	}
	if err := check(r, req, reqBody, status, header, body); err != nil {
		t.Errorf("openapitest: %s %s answered %d: %v", req.Method, req.URL.RequestURI(), status, err)
	}
}

// check validates one exchange: reqBody is the request's body (what the
// server read of it), status, header and body the answer.
func check(r routers.Router, req *http.Request, reqBody []byte, status int, header http.Header, body []byte) error {
	method := req.Method
	if method == http.MethodHead {
		method = http.MethodGet
	}
	probe := req.Clone(context.Background())
	probe.Method = method
	probe.Body = io.NopCloser(bytes.NewReader(reqBody))
	route, params, err := r.FindRoute(probe)
	if err != nil {
		return checkUnrouted(r, probe, err, status, header, body)
	}
	opts := &openapi3filter.Options{
		AuthenticationFunc:    openapi3filter.NoopAuthenticationFunc,
		IncludeResponseStatus: true,
		MultiError:            true,
	}
	in := &openapi3filter.RequestValidationInput{Request: probe, PathParams: params, Route: route, Options: opts}
	var errs []error
	if status >= 200 && status < 300 {
		if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil {
			errs = append(errs, fmt.Errorf("the server accepted a request the document refuses: %w", err))
		}
	}
	if req.Method == http.MethodHead {
		if route.Operation.Responses.Status(status) == nil && route.Operation.Responses.Default() == nil {
			errs = append(errs, fmt.Errorf("status %d is not documented", status))
		}
		return errors.Join(errs...)
	}
	out := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in,
		Status:                 status,
		Header:                 header,
		Options:                opts,
	}
	out.SetBodyBytes(body)
	if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
		errs = append(errs, fmt.Errorf("the answer %s does not match the document: %w", short(body), err))
	}
	return errors.Join(errs...)
}

// checkUnrouted checks the answer to a request the document has no
// operation for: 404 for an unknown path, 405 with Allow for another
// method of a known one, as an error object.
func checkUnrouted(r routers.Router, req *http.Request, err error, status int, header http.Header, body []byte) error {
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
	case status != want:
		return fmt.Errorf("the document has %s, so the answer must be %d", why, want)
	case want == http.StatusMethodNotAllowed && header.Get("Allow") == "":
		return errors.New("405 without an Allow header")
	case req.Method != http.MethodHead && (json.Unmarshal(body, &e) != nil || e.Error == ""):
		return fmt.Errorf("the answer %s is not an error object", short(body))
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

// Compare holds the routes a server mounts against the documented ones,
// both as http.ServeMux patterns ("GET /v1/stats"), and returns what does
// not match, sorted: each route mounted but not documented, and each
// documented but not mounted. Nothing when they are the same set.
func Compare(mounted, documented []string) []string {
	var out []string
	for _, m := range mounted {
		if !slices.Contains(documented, m) {
			out = append(out, m+": mounted, not in the OpenAPI document")
		}
	}
	for _, d := range documented {
		if !slices.Contains(mounted, d) {
			out = append(out, d+": in the OpenAPI document, not mounted")
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Documented returns the operations of the document as patterns, those
// tagged OutboxdTag when outboxd is true, the others when it is false.
func Documented(t testing.TB, outboxd bool) []string {
	t.Helper()
	ops, err := Operations()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, o := range ops {
		if slices.Contains(o.Tags, OutboxdTag) == outboxd {
			out = append(out, o.String())
		}
	}
	return out
}

// OutboxdTag tags the operations outboxd serves beside the API handler.
const OutboxdTag = "outboxd"
