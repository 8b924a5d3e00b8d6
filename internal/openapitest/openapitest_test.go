package openapitest_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/outboxd/outbox/internal/openapitest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// recordingTB records the failures Handler reports instead of failing.
type recordingTB struct {
	testing.TB
	mu   sync.Mutex
	errs []string
}

func (r *recordingTB) Helper() {}

func (r *recordingTB) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

// TestHandlerReportsWhatTheDocumentDoesNotSay: an answer or an accepted
// request that the document does not describe fails the test, with a
// message saying what; an exchange it describes does not.
func TestHandlerReportsWhatTheDocumentDoesNotSay(t *testing.T) {
	for _, c := range []struct {
		name, method, path, body string
		status                   int
		answer                   string
		want                     string // in the failure; "" for none
	}{
		{"documented", "GET", "/v1/stats", "", 200,
			`{"pending":0,"dead":0,"unrouted":0,"unrouted_dropped_total":0,"in_flight":0,"delivered_total":0,"failed_total":0,"oldest_pending_age_seconds":0,"backfill":{"running":false,"routed":0,"deliveries":0,"remaining":0}}`, ""},
		{"wrong type", "GET", "/v1/stats", "", 200,
			`{"pending":"none","dead":0,"unrouted":0,"unrouted_dropped_total":0,"in_flight":0,"delivered_total":0,"failed_total":0,"oldest_pending_age_seconds":0,"backfill":{"running":false,"routed":0,"deliveries":0,"remaining":0}}`,
			"does not match the document"},
		{"undocumented status", "GET", "/v1/stats", "", http.StatusTeapot, `{"error":"teapot"}`, "status is not supported"},
		{"undocumented field", "GET", "/v1/events/e1", "", 200,
			`{"id":"e1","key":"","destination":"orders","state":"pending","attempts":0,"last_status":0,"last_error":"","color":"red"}`,
			"does not match the document"},
		{"accepted a refused request", "POST", "/v1/events", `{"destination":"orders","surprise":1}`, 202,
			`{"ids":["x"]}`, "the server accepted a request the document refuses"},
		{"refused a refused request", "POST", "/v1/events", `{"destination":"orders","surprise":1}`, 400,
			`{"error":"json: unknown field \"surprise\""}`, ""},
		{"the group's listing", "GET", "/v1/events?scope=cluster&limit=1", "", 200,
			`{"events":[{"id":"e1","key":"","destination":"orders","state":"pending","attempts":0,"last_status":0,"last_error":""}],"next":"e1",` +
				`"scope":"cluster","complete":false,"members":[{"member":"m1","api":"http://10.0.0.1:8080","self":true,"answered":true},` +
				`{"member":"m2","api":"http://10.0.0.2:8080","answered":false,"error":"connection refused"}]}`, ""},
		{"the group's listing with an undocumented member field", "GET", "/v1/events", "", 200,
			`{"events":[],"next":"","scope":"cluster","complete":true,"members":[{"member":"m1","api":"","answered":true,"color":"red"}]}`,
			"does not match the document"},
		{"a dead replay some members missed", "POST", "/v1/dead/replay", "", 502,
			`{"error":"member m2 at http://10.0.0.2:8080 (connection refused) could not be asked","unreachable":[{"member":"m2","api":"http://10.0.0.2:8080","error":"connection refused"}],` +
				`"replayed":4,"scope":"cluster","complete":false,"members":[{"member":"m1","api":"http://10.0.0.1:8080","self":true,"answered":true,"replayed":4},` +
				`{"member":"m2","api":"http://10.0.0.2:8080","answered":false,"error":"connection refused"}]}`, ""},
		{"the group's retry", "POST", "/v1/endpoints/orders/retry?scope=cluster", "", 202,
			`{"retried":3,"scope":"cluster","complete":true,"members":[{"member":"m1","api":"http://10.0.0.1:8080","answered":true,"retried":3}]}`, ""},
		{"a retry counted as a replay", "POST", "/v1/endpoints/orders/retry", "", 202,
			`{"replayed":3,"scope":"cluster","complete":true,"members":[]}`, "does not match the document"},
		{"an undocumented scope", "GET", "/v1/stats?scope=galaxy", "", 200,
			`{"pending":0,"dead":0,"unrouted":0,"unrouted_dropped_total":0,"in_flight":0,"delivered_total":0,"failed_total":0,"oldest_pending_age_seconds":0,"backfill":{"running":false,"routed":0,"deliveries":0,"remaining":0}}`,
			"the server accepted a request the document refuses"},
		{"unknown path", "GET", "/v1/nowhere", "", 200, `{}`, "must be 404"},
		{"unknown method", "PUT", "/v1/stats", "", 404, `{"error":"no"}`, "must be 405"},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := &recordingTB{TB: t}
			h := openapitest.Handler(rec, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(c.status)
				_, _ = w.Write([]byte(c.answer))
			}))
			req := httptest.NewRequest(c.method, c.path, strings.NewReader(c.body))
			if c.body != "" {
				req.Header.Set("Content-Type", "application/json")
			}
			h.ServeHTTP(httptest.NewRecorder(), req)
			got := strings.Join(rec.errs, "\n")
			switch {
			case c.want == "" && got != "":
				t.Errorf("failed for an exchange the document describes: %s", got)
			case c.want != "" && !strings.Contains(got, c.want):
				t.Errorf("failures %q, want one saying %q", got, c.want)
			}
		})
	}
}

// TestCompareNamesEachSide: Compare names the routes on one side only.
func TestCompareNamesEachSide(t *testing.T) {
	got := openapitest.Compare([]string{"GET /a", "POST /b"}, []string{"GET /a", "GET /c"})
	want := "GET /c: in the OpenAPI document, not mounted\nPOST /b: mounted, not in the OpenAPI document"
	if strings.Join(got, "\n") != want {
		t.Errorf("Compare = %q, want %q", got, want)
	}
	if got := openapitest.Compare([]string{"GET /a"}, []string{"GET /a"}); len(got) != 0 {
		t.Errorf("Compare of equal sets = %q", got)
	}
}
