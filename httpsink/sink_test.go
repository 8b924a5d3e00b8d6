package httpsink_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outboxd/outbox/httpsink"
	"github.com/outboxd/outbox/internal/testkit"
	"github.com/outboxd/outbox/outbox"
)

// policyMux answers the requests of the policy table test.
func policyMux(t *testing.T) http.HandlerFunc {
	mux := http.NewServeMux()
	// /status/{code}?ra=<Retry-After>&body=<text>
	mux.HandleFunc("/status/{code}", func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		code, _ := strconv.Atoi(r.PathValue("code"))
		if ra := r.URL.Query().Get("ra"); ra != "" {
			w.Header().Set("Retry-After", ra)
		}
		w.WriteHeader(code)
		io.WriteString(w, r.URL.Query().Get("body"))
	})
	// A receiver that never answers: the client's timeout must end it.
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body) // then the server notices the client hanging up
		<-r.Context().Done()
	})
	// The connection is reset after the request is read, before any response.
	mux.HandleFunc("/reset-request", func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		resetConn(t, w, "")
	})
	// The status line and part of the body arrive, then the connection is reset.
	mux.HandleFunc("/reset-body/{code}", func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		resetConn(t, w, fmt.Sprintf("HTTP/1.1 %s %s\r\nContent-Length: 100000\r\n\r\npartial body", r.PathValue("code"), http.StatusText(atoi(r.PathValue("code")))))
	})
	// An endless body: the sink must read its excerpt and hang up.
	mux.HandleFunc("/huge/{code}", func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.WriteHeader(atoi(r.PathValue("code")))
		chunk := []byte(strings.Repeat("huge body ", 3277))
		for range 1 << 15 { // up to 1 GiB, far more than the sink reads
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
		t.Error("the whole 1 GiB body was sent: the sink read it all")
	})
	return mux.ServeHTTP
}

func atoi(s string) int { n, _ := strconv.Atoi(s); return n }

// resetConn hijacks the connection, writes raw (if any) and resets it (RST).
func resetConn(t *testing.T, w http.ResponseWriter, raw string) {
	conn, buf, err := http.NewResponseController(w).Hijack()
	if err != nil {
		t.Errorf("hijack: %v", err)
		return
	}
	if raw != "" {
		buf.WriteString(raw)
		buf.Flush()
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		tc.SetLinger(0) // close with RST, not FIN
	}
	conn.Close()
}

// TestPolicyTable sends one delivery per row of the default status policy
// table, as the design states it, to a real receiver, and checks the
// outcome, the Retry-After in both forms, the excerpt of the body and that no
// row was retried inline.
func TestPolicyTable(t *testing.T) {
	rcv := newReceiver(t, policyMux(t))
	refused := "http://" + testkit.FreeAddr(t) + "/" // nothing listens there

	s := newSink(t, httpsink.Config{
		AllowRawURLs:         true,
		AllowPrivateNetworks: true, // httptest listens on loopback
		InlineRetries:        -1,   // one request per row; inline retries have their own tests
		Endpoints: []httpsink.Endpoint{
			{Name: "slow", URL: rcv.URL + "/slow", Timeout: httpsink.MinTimeout},
		},
	})
	date := func(d time.Duration) string { return url.QueryEscape(fixedNow.Add(d).Format(http.TimeFormat)) }
	type row struct {
		dest       string
		action     outbox.Action
		status     int
		retryAfter time.Duration
		body       string // expected Result.Body ("" also means: none kept)
		bodyLen    int    // expected len(Result.Body) when body is ""
		wantErr    bool
		requests   int64 // requests that reach the handler; 1 unless said
	}
	st := func(code int) string { return rcv.URL + "/status/" + strconv.Itoa(code) }
	const (
		success  = outbox.ActionSuccess
		retry    = outbox.ActionRetry
		park     = outbox.ActionPark
		throttle = outbox.ActionThrottle
		disable  = outbox.ActionDisable
		dead     = outbox.ActionDead
	)
	rows := map[string]row{
		"200":               {dest: st(200) + "?body=ok", action: success, status: 200},
		"201":               {dest: st(201), action: success, status: 201},
		"202":               {dest: st(202), action: success, status: 202},
		"204":               {dest: st(204), action: success, status: 204},
		"299":               {dest: st(299), action: success, status: 299},
		"301 not followed":  {dest: st(301) + "?body=moved", action: dead, status: 301, body: "moved"},
		"302 not followed":  {dest: st(302), action: dead, status: 302},
		"304":               {dest: st(304), action: dead, status: 304},
		"307 not followed":  {dest: st(307), action: dead, status: 307},
		"308 not followed":  {dest: st(308), action: dead, status: 308},
		"400":               {dest: st(400) + "?body=missing+field+x", action: dead, status: 400, body: "missing field x"},
		"401":               {dest: st(401), action: dead, status: 401},
		"403":               {dest: st(403), action: dead, status: 403},
		"404 parks":         {dest: st(404) + "?body=no+such+order", action: park, status: 404, body: "no such order"},
		"405":               {dest: st(405), action: dead, status: 405},
		"408":               {dest: st(408), action: retry, status: 408},
		"409":               {dest: st(409), action: dead, status: 409},
		"410 disables":      {dest: st(410) + "?body=gone", action: disable, status: 410, body: "gone"},
		"413":               {dest: st(413), action: dead, status: 413},
		"422":               {dest: st(422), action: dead, status: 422},
		"425":               {dest: st(425), action: retry, status: 425},
		"429":               {dest: st(429), action: throttle, status: 429},
		"451":               {dest: st(451), action: dead, status: 451},
		"499":               {dest: st(499), action: dead, status: 499},
		"500":               {dest: st(500) + "?body=boom", action: retry, status: 500, body: "boom"},
		"501":               {dest: st(501), action: retry, status: 501},
		"502":               {dest: st(502), action: throttle, status: 502},
		"503":               {dest: st(503), action: retry, status: 503},
		"504":               {dest: st(504), action: throttle, status: 504},
		"505":               {dest: st(505), action: retry, status: 505},
		"599":               {dest: st(599), action: retry, status: 599},
		"600 default row":   {dest: st(600), action: retry, status: 600},
		"999 default row":   {dest: st(999), action: retry, status: 999},
		"network error":     {dest: refused, action: retry, wantErr: true, requests: 0},
		"timeout":           {dest: "slow", action: retry, wantErr: true},
		"reset before resp": {dest: rcv.URL + "/reset-request", action: retry, wantErr: true},
		// A 200 whose body is cut: the receiver did say 200.
		"reset mid-body 200": {dest: rcv.URL + "/reset-body/200", action: success, status: 200},
		"reset mid-body 500": {dest: rcv.URL + "/reset-body/500", action: retry, status: 500, body: "partial body"},
		"huge body 200":      {dest: rcv.URL + "/huge/200", action: success, status: 200},
		"huge body 503":      {dest: rcv.URL + "/huge/503", action: retry, status: 503, bodyLen: 1024},

		// Retry-After: delay-seconds and HTTP-date, capped at 1h by default.
		"429 Retry-After seconds":   {dest: st(429) + "?ra=120", action: throttle, status: 429, retryAfter: 120 * time.Second},
		"503 Retry-After date":      {dest: st(503) + "?ra=" + date(90*time.Second), action: retry, status: 503, retryAfter: 90 * time.Second},
		"502 Retry-After date":      {dest: st(502) + "?ra=" + date(time.Hour+time.Minute), action: throttle, status: 502, retryAfter: time.Hour},
		"429 Retry-After capped":    {dest: st(429) + "?ra=86400", action: throttle, status: 429, retryAfter: time.Hour},
		"429 Retry-After overflow":  {dest: st(429) + "?ra=99999999999999999999999", action: throttle, status: 429, retryAfter: time.Hour},
		"429 Retry-After past date": {dest: st(429) + "?ra=" + date(-time.Minute), action: throttle, status: 429},
		"429 Retry-After garbage":   {dest: st(429) + "?ra=soon", action: throttle, status: 429},
		"429 Retry-After negative":  {dest: st(429) + "?ra=-5", action: throttle, status: 429},
		"404 Retry-After":           {dest: st(404) + "?ra=30", action: park, status: 404, retryAfter: 30 * time.Second},
		"200 Retry-After ignored":   {dest: st(200) + "?ra=30", action: success, status: 200},
	}
	for name, r := range rows {
		t.Run(name, func(t *testing.T) {
			before := rcv.requests.Load()
			res := deliver(s, r.dest, `{"n":1}`)
			if res.Action != r.action || res.Status != r.status {
				t.Errorf("got %s/%d, want %s/%d (err %v)", res.Action, res.Status, r.action, r.status, res.Err)
			}
			if res.RetryAfter != r.retryAfter {
				t.Errorf("RetryAfter %v, want %v", res.RetryAfter, r.retryAfter)
			}
			if r.bodyLen > 0 {
				if len(res.Body) != r.bodyLen {
					t.Errorf("len(Body) = %d, want %d", len(res.Body), r.bodyLen)
				}
			} else if res.Body != r.body {
				t.Errorf("Body %q, want %q", res.Body, r.body)
			}
			if (res.Err != nil) != r.wantErr {
				t.Errorf("Err = %v, want error: %v", res.Err, r.wantErr)
			}
			want := int64(1)
			if r.dest == refused {
				want = 0
			}
			if got := rcv.requests.Load() - before; got != want && name != "reset before resp" {
				// (Go's transport may replay a request with an
				// Idempotency-Key once on a reset connection.)
				t.Errorf("%d requests reached the receiver, want %d", got, want)
			}
		})
	}
}

func TestTimeoutError(t *testing.T) {
	rcv := newReceiver(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		<-r.Context().Done()
	})
	s := newSink(t, httpsink.Config{
		Endpoints: []httpsink.Endpoint{{Name: "slow", URL: rcv.URL, Timeout: httpsink.MinTimeout, AllowPrivate: true}},
	})
	res := deliver(s, "slow", "{}")
	if res.Action != outbox.ActionRetry || res.Status != 0 {
		t.Fatalf("got %s/%d", res.Action, res.Status)
	}
	if !errors.Is(res.Err, context.DeadlineExceeded) || !strings.Contains(res.Err.Error(), "no response within 1s") {
		t.Fatalf("Err = %v, want a timeout naming the limit", res.Err)
	}
	var de *httpsink.DeliveryError
	if !errors.As(res.Err, &de) || de.Endpoint != "slow" || de.Method != "POST" {
		t.Fatalf("Err = %#v, want a *DeliveryError for endpoint slow", res.Err)
	}
}

// TestPolicyOverrides checks that configured rules change the outcome.
func TestPolicyOverrides(t *testing.T) {
	rcv := newReceiver(t, policyMux(t))
	p, err := httpsink.ParsePolicy("404=retry", "4xx=park", "429=dead", "5xx=throttle", "error=throttle")
	if err != nil {
		t.Fatal(err)
	}
	s := newSink(t, httpsink.Config{AllowRawURLs: true, AllowPrivateNetworks: true, InlineRetries: -1, Policy: p})
	for code, want := range map[int]outbox.Action{
		404: outbox.ActionRetry, 400: outbox.ActionPark, 429: outbox.ActionDead, 501: outbox.ActionThrottle,
		500: outbox.ActionRetry /* an exact row beats a class, even a later one */, 410: outbox.ActionDisable, 200: outbox.ActionSuccess,
	} {
		if res := deliver(s, rcv.URL+"/status/"+strconv.Itoa(code), ""); res.Action != want {
			t.Errorf("%d: got %s, want %s", code, res.Action, want)
		}
	}
	if res := deliver(s, rcv.URL+"/reset-request", ""); res.Action != outbox.ActionThrottle {
		t.Errorf("transport error: got %s, want throttle (error row)", res.Action)
	}
}

// TestMaxRetryAfter checks a configured cap.
func TestMaxRetryAfter(t *testing.T) {
	rcv := newReceiver(t, policyMux(t))
	s := newSink(t, httpsink.Config{AllowRawURLs: true, AllowPrivateNetworks: true, MaxRetryAfter: 10 * time.Minute})
	res := deliver(s, rcv.URL+"/status/429?ra=3600", "")
	if res.RetryAfter != 10*time.Minute {
		t.Fatalf("RetryAfter = %v, want the 10m cap", res.RetryAfter)
	}
}

// Test404NeverRetriedInline: whatever the inline retry settings, a 404 is one
// request per delivery.
func Test404NeverRetriedInline(t *testing.T) {
	rcv := newReceiver(t, func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) })
	s := newSink(t, httpsink.Config{
		InlineRetries: 10, InlineRetryBudget: time.Minute,
		Endpoints: []httpsink.Endpoint{{Name: "orders", URL: rcv.URL, AllowPrivate: true}},
	})
	for i := range 5 {
		res := deliver(s, "orders", "{}")
		if res.Action != outbox.ActionPark || res.Status != 404 {
			t.Fatalf("got %s/%d", res.Action, res.Status)
		}
		if got := rcv.requests.Load(); got != int64(i+1) {
			t.Fatalf("after %d deliveries the receiver saw %d requests", i+1, got)
		}
	}
}

// TestInlineRetries checks which failures are retried inside one Deliver.
func TestInlineRetries(t *testing.T) {
	type step struct {
		status int
		ra     string
	}
	tests := []struct {
		name     string
		steps    []step // responses in order; the last repeats
		policy   []string
		budget   time.Duration
		action   outbox.Action
		status   int
		requests int64
	}{
		{"503 then 200", []step{{503, ""}, {503, ""}, {200, ""}}, nil, 0, outbox.ActionSuccess, 200, 3},
		{"502 then 200", []step{{502, ""}, {200, ""}}, nil, 0, outbox.ActionSuccess, 200, 2},
		{"504 persists", []step{{504, ""}}, nil, 0, outbox.ActionThrottle, 504, 3},
		{"short Retry-After waited inline", []step{{503, "0"}, {200, ""}}, nil, 0, outbox.ActionSuccess, 200, 2},
		{"long Retry-After goes back to the outbox", []step{{503, "3600"}}, nil, 0, outbox.ActionRetry, 503, 1},
		{"500 not inline", []step{{500, ""}}, nil, 0, outbox.ActionRetry, 500, 1},
		{"429 not inline", []step{{429, ""}}, nil, 0, outbox.ActionThrottle, 429, 1},
		{"no budget", []step{{503, ""}}, nil, time.Nanosecond, outbox.ActionRetry, 503, 1},
		{"policy says dead", []step{{503, ""}}, []string{"503=dead"}, 0, outbox.ActionDead, 503, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var n atomic.Int64
			rcv := newReceiver(t, func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body)
				st := tt.steps[min(int(n.Add(1))-1, len(tt.steps)-1)]
				if st.ra != "" {
					w.Header().Set("Retry-After", st.ra)
				}
				w.WriteHeader(st.status)
			})
			p, err := httpsink.ParsePolicy(tt.policy...)
			if err != nil {
				t.Fatal(err)
			}
			s := newSink(t, httpsink.Config{
				Policy: p, InlineRetryBudget: tt.budget,
				Endpoints: []httpsink.Endpoint{{Name: "e", URL: rcv.URL, AllowPrivate: true}},
			})
			res := deliver(s, "e", "{}")
			if res.Action != tt.action || res.Status != tt.status {
				t.Errorf("got %s/%d, want %s/%d (%v)", res.Action, res.Status, tt.action, tt.status, res.Err)
			}
			if got := rcv.requests.Load(); got != tt.requests {
				t.Errorf("receiver saw %d requests, want %d", got, tt.requests)
			}
		})
	}
}

// TestInlineRetryTransport: a connection reset before the response is
// retried inline, and the error says how many attempts were made.
func TestInlineRetryTransport(t *testing.T) {
	var n atomic.Int64
	rcv := newReceiver(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if n.Add(1) <= 2 {
			resetConn(t, w, "")
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	s := newSink(t, httpsink.Config{InlineRetries: 5, Endpoints: []httpsink.Endpoint{{Name: "e", URL: rcv.URL, AllowPrivate: true}}})
	if res := deliver(s, "e", "{}"); res.Action != outbox.ActionSuccess || res.Status != 204 {
		t.Fatalf("got %s/%d (%v), want success after the resets", res.Action, res.Status, res.Err)
	}

	n.Store(-100) // resets from now on
	res := deliver(s, "e", "{}")
	var de *httpsink.DeliveryError
	if res.Action != outbox.ActionRetry || !errors.As(res.Err, &de) || de.Attempts < 2 {
		t.Fatalf("got %s, %v; want retry with a *DeliveryError after several attempts", res.Action, res.Err)
	}
}

// TestConnectionsReused: bodies under MaxDrain are drained, so sequential
// deliveries, failed ones included, share one connection.
func TestConnectionsReused(t *testing.T) {
	body := strings.Repeat("b", 10<<10)
	var n atomic.Int64
	rcv := newReceiver(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.WriteHeader([]int{200, 404, 400, 410, 429}[n.Add(1)%5])
		io.WriteString(w, body)
	})
	s := newSink(t, httpsink.Config{Endpoints: []httpsink.Endpoint{{Name: "e", URL: rcv.URL, AllowPrivate: true}}})
	for range 25 {
		deliver(s, "e", "{}")
	}
	if got := rcv.conns.Load(); got != 1 {
		t.Fatalf("25 deliveries used %d connections, want 1", got)
	}
}

// TestRequestHeaders checks what the receiver gets: the sink's headers, the
// precedence of endpoint over event headers, the default Content-Type.
func TestRequestHeaders(t *testing.T) {
	type seen struct {
		h      http.Header
		body   string
		method string
		te     []string
		length int64
	}
	got := make(chan seen, 1)
	rcv := newReceiver(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- seen{r.Header.Clone(), string(b), r.Method, r.TransferEncoding, r.ContentLength}
	})
	s := newSink(t, httpsink.Config{
		Endpoints: []httpsink.Endpoint{{
			Name: "e", URL: rcv.URL, AllowPrivate: true,
			Headers: map[string]string{"authorization": "Bearer endpoint", "X-Tenant": "acme"},
		}},
	})
	res := s.Deliver(context.Background(), &outbox.Delivery{
		ID: "evt-42", Destination: "e", Method: "PUT", Payload: []byte(`{"a":1}`),
		Headers: map[string]string{
			"Authorization":     "Bearer from-event", // the endpoint's wins
			"X-Trace":           "t1",                // passed through
			"Idempotency-Key":   "spoofed",           // the sink's wins
			"Webhook-Signature": "v1,stale",          // dropped: no secrets here
		},
	})
	if res.Action != outbox.ActionSuccess {
		t.Fatalf("got %s (%v)", res.Action, res.Err)
	}
	r := <-got
	for k, want := range map[string]string{
		"Authorization":     "Bearer endpoint",
		"X-Tenant":          "acme",
		"X-Trace":           "t1",
		"Idempotency-Key":   "evt-42",
		"Webhook-Id":        "evt-42",
		"Webhook-Timestamp": strconv.FormatInt(fixedNow.Unix(), 10),
		"Webhook-Signature": "",
		"Content-Type":      "application/json",
		"User-Agent":        httpsink.DefaultUserAgent,
	} {
		if v := r.h.Get(k); v != want {
			t.Errorf("%s: %q, want %q", k, v, want)
		}
	}
	if r.method != "PUT" || r.body != `{"a":1}` {
		t.Errorf("got %s %q", r.method, r.body)
	}

	// An event's own Content-Type is kept; no payload means no body and no
	// Content-Type; the method defaults to POST.
	s.Deliver(context.Background(), &outbox.Delivery{ID: "evt-43", Destination: "e", Payload: []byte("a,b"), Headers: map[string]string{"content-type": "text/csv"}})
	if r := <-got; r.h.Get("Content-Type") != "text/csv" || r.method != "POST" {
		t.Errorf("Content-Type %q, method %s", r.h.Get("Content-Type"), r.method)
	}
	s.Deliver(context.Background(), &outbox.Delivery{ID: "evt-44", Destination: "e", Method: "DELETE"})
	if r := <-got; r.h.Get("Content-Type") != "" || r.length != 0 || len(r.te) != 0 || r.body != "" {
		t.Errorf("empty payload sent as Content-Type %q, length %d, transfer-encoding %v", r.h.Get("Content-Type"), r.length, r.te)
	}
}

// TestInvalidEvent: an event that cannot form a request is dead, and the
// error never quotes a header value.
func TestInvalidEvent(t *testing.T) {
	rcv := newReceiver(t, func(w http.ResponseWriter, r *http.Request) {})
	s := newSink(t, httpsink.Config{Endpoints: []httpsink.Endpoint{{Name: "e", URL: rcv.URL, AllowPrivate: true}}})
	for name, d := range map[string]*outbox.Delivery{
		"method":       {ID: "1", Destination: "e", Method: "NOT A METHOD"},
		"header name":  {ID: "1", Destination: "e", Headers: map[string]string{"X Bad": "v"}},
		"header value": {ID: "1", Destination: "e", Headers: map[string]string{"Authorization": "secret-token\r\nX-Injected: 1"}},
		"event ID":     {ID: "a\nb", Destination: "e"},
	} {
		res := s.Deliver(context.Background(), d)
		if res.Action != outbox.ActionDead || !errors.Is(res.Err, httpsink.ErrInvalidRequest) {
			t.Errorf("%s: got %s, %v", name, res.Action, res.Err)
		}
		if res.Err != nil && strings.Contains(res.Err.Error(), "secret-token") {
			t.Errorf("%s: error quotes the header value: %v", name, res.Err)
		}
	}
	if res := s.Deliver(context.Background(), nil); res.Action != outbox.ActionDead || !errors.Is(res.Err, httpsink.ErrInvalidRequest) {
		t.Errorf("nil delivery: got %s, %v", res.Action, res.Err)
	}
	if n := rcv.requests.Load(); n != 0 {
		t.Fatalf("%d invalid requests were sent", n)
	}
}

// TestContextCancelled: a cancelled context gives retry with its error, never
// the policy's error row (shutting down must not throttle an endpoint).
func TestContextCancelled(t *testing.T) {
	started := make(chan struct{}, 1)
	rcv := newReceiver(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		started <- struct{}{}
		<-r.Context().Done()
	})
	p, _ := httpsink.ParsePolicy("error=throttle")
	s := newSink(t, httpsink.Config{Policy: p, Endpoints: []httpsink.Endpoint{{Name: "e", URL: rcv.URL, AllowPrivate: true}}})

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if res := s.Deliver(ctx, &outbox.Delivery{ID: "1", Destination: "e"}); res.Action != outbox.ActionRetry || !errors.Is(res.Err, context.Canceled) {
		t.Fatalf("already cancelled: got %s, %v", res.Action, res.Err)
	}

	ctx, cancel = context.WithCancel(context.Background())
	done := make(chan outbox.Result)
	go func() { done <- s.Deliver(ctx, &outbox.Delivery{ID: "2", Destination: "e"}) }()
	<-started
	cancel()
	if res := <-done; res.Action != outbox.ActionRetry || !errors.Is(res.Err, context.Canceled) {
		t.Fatalf("cancelled in flight: got %s, %v", res.Action, res.Err)
	}
}

// TestMaxInFlight: an endpoint never sees more than MaxInFlight requests at
// once, and a caller waiting for a slot leaves when its context ends.
func TestMaxInFlight(t *testing.T) {
	var inFlight, peak atomic.Int64
	release := make(chan struct{})
	rcv := newReceiver(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		n := inFlight.Add(1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		<-release
		inFlight.Add(-1)
	})
	s := newSink(t, httpsink.Config{Endpoints: []httpsink.Endpoint{{Name: "e", URL: rcv.URL, AllowPrivate: true, MaxInFlight: 2}}})
	var wg sync.WaitGroup
	results := make([]outbox.Result, 5)
	for i := range results {
		wg.Go(func() { results[i] = deliver(s, "e", "{}") })
	}
	testkit.WaitFor(t, 10*time.Second, "two requests in flight", func() bool { return inFlight.Load() == 2 })

	ctx, cancel := context.WithCancel(context.Background())
	waiting := make(chan outbox.Result)
	go func() { waiting <- s.Deliver(ctx, &outbox.Delivery{ID: "w", Destination: "e"}) }()
	cancel()
	if res := <-waiting; res.Action != outbox.ActionRetry || !errors.Is(res.Err, context.Canceled) {
		t.Errorf("waiting caller: got %s, %v", res.Action, res.Err)
	}
	close(release)
	wg.Wait()
	for i, r := range results {
		if r.Action != outbox.ActionSuccess {
			t.Errorf("delivery %d: %s (%v)", i, r.Action, r.Err)
		}
	}
	if p := peak.Load(); p != 2 {
		t.Fatalf("peak concurrency %d, want 2", p)
	}
	if n := rcv.requests.Load(); n != 5 {
		t.Fatalf("receiver saw %d requests, want 5", n)
	}
}

func TestClose(t *testing.T) {
	rcv := newReceiver(t, func(w http.ResponseWriter, r *http.Request) {})
	s, err := httpsink.New(httpsink.Config{Endpoints: []httpsink.Endpoint{{Name: "e", URL: rcv.URL, AllowPrivate: true}}})
	if err != nil {
		t.Fatal(err)
	}
	if res := deliver(s, "e", ""); res.Action != outbox.ActionSuccess {
		t.Fatalf("got %s", res.Action)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if res := deliver(s, "e", ""); res.Action != outbox.ActionRetry || !errors.Is(res.Err, httpsink.ErrClosed) {
		t.Fatalf("after Close: %s, %v", res.Action, res.Err)
	}
}

// TestFollowRedirects: off by default (a 3xx is dead), on when asked.
func TestFollowRedirects(t *testing.T) {
	rcv := newReceiver(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/old" {
			http.Redirect(w, r, "/new", http.StatusTemporaryRedirect)
			return
		}
		io.Copy(io.Discard, r.Body)
	})
	ep := []httpsink.Endpoint{{Name: "e", URL: rcv.URL + "/old", AllowPrivate: true}}
	if res := deliver(newSink(t, httpsink.Config{Endpoints: ep}), "e", "{}"); res.Action != outbox.ActionDead || res.Status != 307 {
		t.Fatalf("default: got %s/%d", res.Action, res.Status)
	}
	if res := deliver(newSink(t, httpsink.Config{Endpoints: ep, FollowRedirects: true}), "e", "{}"); res.Action != outbox.ActionSuccess || res.Status != 200 {
		t.Fatalf("FollowRedirects: got %s/%d", res.Action, res.Status)
	}
}
