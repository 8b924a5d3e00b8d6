package httpsink_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outboxd/outbox/httpsink"
	"github.com/outboxd/outbox/internal/testkit"
	"github.com/outboxd/outbox/outbox"
)

// TestPutEndpointAtRunTime: an endpoint added to a running sink is
// resolvable and delivered to at once, a replacement takes its new URL and
// headers, and a removed one is unknown again.
func TestPutEndpointAtRunTime(t *testing.T) {
	var first, second atomic.Int64
	var gotHeader atomic.Value
	rcv1 := newReceiver(t, func(w http.ResponseWriter, r *http.Request) { first.Add(1) })
	rcv2 := newReceiver(t, func(w http.ResponseWriter, r *http.Request) {
		second.Add(1)
		gotHeader.Store(r.Header.Get("X-Team"))
	})
	s := newSink(t, httpsink.Config{})
	if _, err := s.ResolveEndpoint("orders"); !errors.Is(err, httpsink.ErrUnknownEndpoint) {
		t.Fatalf("before PutEndpoint: %v, want ErrUnknownEndpoint", err)
	}

	if err := s.PutEndpoint(httpsink.Endpoint{Name: "orders", URL: rcv1.URL, AllowPrivate: true}); err != nil {
		t.Fatal(err)
	}
	if name, err := s.ResolveEndpoint("orders"); err != nil || name != "orders" {
		t.Fatalf("ResolveEndpoint after PutEndpoint: %q, %v", name, err)
	}
	if got := s.EndpointNames(); len(got) != 1 || got[0] != "orders" {
		t.Fatalf("EndpointNames: %v", got)
	}
	if res := deliver(s, "orders", "{}"); res.Action != outbox.ActionSuccess || first.Load() != 1 {
		t.Fatalf("delivery to the added endpoint: %s (%v), receiver saw %d", res.Action, res.Err, first.Load())
	}

	err := s.PutEndpoint(httpsink.Endpoint{Name: "orders", URL: rcv2.URL, AllowPrivate: true, Headers: map[string]string{"X-Team": "billing"}})
	if err != nil {
		t.Fatal(err)
	}
	if res := deliver(s, "orders", "{}"); res.Action != outbox.ActionSuccess {
		t.Fatalf("delivery after the replacement: %s (%v)", res.Action, res.Err)
	}
	if first.Load() != 1 || second.Load() != 1 || gotHeader.Load() != "billing" {
		t.Fatalf("after the replacement: old receiver %d, new %d (X-Team %v), want 1, 1 (billing)", first.Load(), second.Load(), gotHeader.Load())
	}

	if !s.RemoveEndpoint("orders") {
		t.Fatal("RemoveEndpoint of a known endpoint reported false")
	}
	if s.RemoveEndpoint("orders") {
		t.Fatal("second RemoveEndpoint reported true")
	}
	if _, err := s.ResolveEndpoint("orders"); !errors.Is(err, httpsink.ErrUnknownEndpoint) {
		t.Fatalf("after RemoveEndpoint: %v, want ErrUnknownEndpoint", err)
	}
	if res := deliver(s, "orders", "{}"); res.Action != outbox.ActionDead || !errors.Is(res.Err, httpsink.ErrUnknownEndpoint) {
		t.Fatalf("delivery to a removed endpoint: %s (%v), want dead, unknown endpoint", res.Action, res.Err)
	}
	if second.Load() != 1 {
		t.Fatalf("the removed endpoint's receiver saw %d requests, want 1", second.Load())
	}
}

// TestPutEndpointRefusesAndKeeps: a bad definition is a *ConfigError naming
// the field, and the endpoint's current definition stays in use.
func TestPutEndpointRefusesAndKeeps(t *testing.T) {
	rcv := newReceiver(t, func(w http.ResponseWriter, r *http.Request) {})
	s := newSink(t, httpsink.Config{Endpoints: []httpsink.Endpoint{{Name: "orders", URL: rcv.URL, AllowPrivate: true}}})
	for _, tc := range []struct {
		ep    httpsink.Endpoint
		field string
	}{
		{httpsink.Endpoint{Name: "", URL: rcv.URL}, "Name"},
		{httpsink.Endpoint{Name: "bad name", URL: rcv.URL}, "Name"},
		{httpsink.Endpoint{Name: "orders", URL: "ftp://example.com/"}, "URL"},
		{httpsink.Endpoint{Name: "orders", URL: "http://127.0.0.1:1/"}, "URL"}, // the guard
		{httpsink.Endpoint{Name: "orders", URL: rcv.URL, AllowPrivate: true, Secrets: []string{"nope"}}, "Secrets[0]"},
		{httpsink.Endpoint{Name: "orders", URL: rcv.URL, AllowPrivate: true,
			RetiringSecrets: []httpsink.RetiringSecret{{Secret: testSecret}}}, "RetiringSecrets[0].Until"},
		{httpsink.Endpoint{Name: "orders", URL: rcv.URL, AllowPrivate: true, Headers: map[string]string{"Webhook-Id": "x"}}, `Headers["Webhook-Id"]`},
		{httpsink.Endpoint{Name: "orders", URL: rcv.URL, AllowPrivate: true, Timeout: -time.Second}, "Timeout"},
		{httpsink.Endpoint{Name: "orders", URL: rcv.URL, AllowPrivate: true, MaxInFlight: -1}, "MaxInFlight"},
		{httpsink.Endpoint{Name: ".", URL: rcv.URL, AllowPrivate: true}, "Name"},
		{httpsink.Endpoint{Name: "..", URL: rcv.URL, AllowPrivate: true}, "Name"},
		{httpsink.Endpoint{Name: "....", URL: rcv.URL, AllowPrivate: true}, "Name"},
		{httpsink.Endpoint{Name: ".orders", URL: rcv.URL, AllowPrivate: true}, "Name"},
		{httpsink.Endpoint{Name: "orders", URL: "http://localhost/", Timeout: time.Second}, "URL"},
	} {
		err := s.PutEndpoint(tc.ep)
		var ce *httpsink.ConfigError
		if !errors.As(err, &ce) || ce.Field != tc.field {
			t.Errorf("PutEndpoint(%v): %v, want a *ConfigError for %s", tc.ep, err, tc.field)
		}
	}
	if res := deliver(s, "orders", "{}"); res.Action != outbox.ActionSuccess || rcv.requests.Load() != 1 {
		t.Fatalf("the endpoint after refused replacements: %s (%v)", res.Action, res.Err)
	}
}

// TestReplaceWhileInFlight: a delivery under way when its endpoint is
// replaced finishes on the definition it started with; the next one uses
// the new definition.
func TestReplaceWhileInFlight(t *testing.T) {
	release := make(chan struct{})
	var oldArrived atomic.Bool
	rcvOld := newReceiver(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		oldArrived.Store(true)
		<-release
	})
	rcvNew := newReceiver(t, func(w http.ResponseWriter, r *http.Request) {})
	s := newSink(t, httpsink.Config{Endpoints: []httpsink.Endpoint{{Name: "orders", URL: rcvOld.URL, AllowPrivate: true}}})
	done := make(chan outbox.Result, 1)
	go func() { done <- deliver(s, "orders", "{}") }()
	testkit.WaitFor(t, 10*time.Second, "the first delivery at the old receiver", oldArrived.Load)

	if err := s.PutEndpoint(httpsink.Endpoint{Name: "orders", URL: rcvNew.URL, AllowPrivate: true}); err != nil {
		t.Fatal(err)
	}
	if res := deliver(s, "orders", "{}"); res.Action != outbox.ActionSuccess || rcvNew.requests.Load() != 1 {
		t.Fatalf("delivery after the replacement: %s (%v), new receiver saw %d", res.Action, res.Err, rcvNew.requests.Load())
	}
	close(release)
	if res := <-done; res.Action != outbox.ActionSuccess {
		t.Fatalf("the delivery under way during the replacement: %s (%v)", res.Action, res.Err)
	}
	if n := rcvOld.requests.Load(); n != 1 {
		t.Fatalf("old receiver saw %d requests, want 1", n)
	}
}

// TestEndpointsChangedUnderLoad: deliveries go on while the endpoint is
// replaced and removed again and again; each one either reaches a receiver
// or is dead for an unknown endpoint, never anything else (run with -race).
func TestEndpointsChangedUnderLoad(t *testing.T) {
	rcvs := []*receiver{
		newReceiver(t, func(w http.ResponseWriter, r *http.Request) { io.Copy(io.Discard, r.Body) }),
		newReceiver(t, func(w http.ResponseWriter, r *http.Request) { io.Copy(io.Discard, r.Body) }),
	}
	s := newSink(t, httpsink.Config{Endpoints: []httpsink.Endpoint{{Name: "orders", URL: rcvs[0].URL, AllowPrivate: true}}})
	var stop atomic.Bool
	var wg sync.WaitGroup
	var delivered, unknown atomic.Int64
	for range 4 {
		wg.Go(func() {
			for !stop.Load() {
				res := deliver(s, "orders", "{}")
				switch {
				case res.Action == outbox.ActionSuccess:
					delivered.Add(1)
				case res.Action == outbox.ActionDead && errors.Is(res.Err, httpsink.ErrUnknownEndpoint):
					unknown.Add(1)
				default:
					t.Errorf("unexpected outcome %s (%v)", res.Action, res.Err)
					return
				}
			}
		})
	}
	for i := range 200 {
		if i%3 == 2 {
			s.RemoveEndpoint("orders")
			continue
		}
		ep := httpsink.Endpoint{Name: "orders", URL: rcvs[i%2].URL, AllowPrivate: true, MaxInFlight: 1 + i%3}
		if err := s.PutEndpoint(ep); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.PutEndpoint(httpsink.Endpoint{Name: "orders", URL: rcvs[0].URL, AllowPrivate: true}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 10*time.Second, "deliveries after the last change", func() bool { return delivered.Load() > 10 })
	stop.Store(true)
	wg.Wait()
	if got := rcvs[0].requests.Load() + rcvs[1].requests.Load(); got != delivered.Load() {
		t.Fatalf("receivers saw %d requests, %d deliveries succeeded", got, delivered.Load())
	}
}

// testSecret and otherSecret are valid Standard Webhooks secrets.
const (
	testSecret  = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	otherSecret = "whsec_c2VjcmV0LXR3by0zMi1ieXRlcy1sb25nLXh5eno="
)

// TestRetiringSecretSignsUntilItsEnd: after a rotation, deliveries carry a
// signature of the new secret and one of the old until the old one's
// grace ends, then only the new one's; receivers holding either secret
// verify until then.
func TestRetiringSecretSignsUntilItsEnd(t *testing.T) {
	var mu sync.Mutex
	now := fixedNow
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	var last http.Header
	var lastBody []byte
	rcv := newReceiver(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		last, lastBody = r.Header.Clone(), b
		mu.Unlock()
	})
	s := newSink(t, httpsink.Config{Now: clock, Endpoints: []httpsink.Endpoint{{
		Name: "orders", URL: rcv.URL, AllowPrivate: true,
		Secrets:         []string{otherSecret},
		RetiringSecrets: []httpsink.RetiringSecret{{Secret: testSecret, Until: fixedNow.Add(time.Hour)}},
	}}})
	oldV, err := httpsink.NewVerifier([]string{testSecret}, 0)
	if err != nil {
		t.Fatal(err)
	}
	newV, err := httpsink.NewVerifier([]string{otherSecret}, 0)
	if err != nil {
		t.Fatal(err)
	}
	check := func(when string, oldOK bool) {
		t.Helper()
		if res := deliver(s, "orders", `{"n":1}`); res.Action != outbox.ActionSuccess {
			t.Fatalf("%s: %s (%v)", when, res.Action, res.Err)
		}
		mu.Lock()
		h, b, at := last, lastBody, now
		mu.Unlock()
		if err := newV.Verify(h, b, at); err != nil {
			t.Errorf("%s: the new secret does not verify: %v", when, err)
		}
		err := oldV.Verify(h, b, at)
		switch {
		case oldOK && err != nil:
			t.Errorf("%s: the retiring secret does not verify: %v", when, err)
		case !oldOK && !errors.Is(err, httpsink.ErrSignatureMismatch):
			t.Errorf("%s: the retired secret: %v, want ErrSignatureMismatch", when, err)
		}
	}
	check("during the grace", true)
	mu.Lock()
	now = fixedNow.Add(time.Hour)
	mu.Unlock()
	check("when the grace ends", false)
}

// TestPutEndpointAfterClose: a closed sink takes no new definition.
func TestPutEndpointAfterClose(t *testing.T) {
	s, err := httpsink.New(httpsink.Config{})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	err = s.PutEndpoint(httpsink.Endpoint{Name: "orders", URL: "https://example.com/hook"})
	if !errors.Is(err, httpsink.ErrClosed) {
		t.Fatalf("PutEndpoint after Close: %v, want ErrClosed", err)
	}
}

// The limits of a definition: at the limit it is accepted, one over it is
// a *ConfigError naming the field and the limit, and the endpoint keeps
// its definition.
func TestEndpointDefinitionLimits(t *testing.T) {
	rcv := newReceiver(t, func(w http.ResponseWriter, r *http.Request) {})
	s := newSink(t, httpsink.Config{Endpoints: []httpsink.Endpoint{{Name: "orders", URL: rcv.URL, AllowPrivate: true}}})
	headers := func(n, valueBytes int) map[string]string {
		h := make(map[string]string, n)
		for i := range n {
			name := fmt.Sprintf("X-H%03d", i)
			h[name] = strings.Repeat("v", valueBytes)
		}
		return h
	}
	longURL := func(n int) string { return rcv.URL + "/" + strings.Repeat("p", n-len(rcv.URL)-1) }
	at := func(e httpsink.Endpoint) httpsink.Endpoint { e.Name, e.AllowPrivate = "orders", true; return e }
	for _, tc := range []struct {
		name       string
		ok, over   httpsink.Endpoint
		field      string
		limitNamed string
	}{
		{"headers", at(httpsink.Endpoint{URL: rcv.URL, Headers: headers(httpsink.MaxHeaders, 1)}),
			at(httpsink.Endpoint{URL: rcv.URL, Headers: headers(httpsink.MaxHeaders+1, 1)}), "Headers", "65 headers; at most 64"},
		// 8 headers of a 6-byte name: values of 1018 bytes fill 8192.
		{"header bytes", at(httpsink.Endpoint{URL: rcv.URL, Headers: headers(8, httpsink.MaxHeaderBytes/8-6)}),
			at(httpsink.Endpoint{URL: rcv.URL, Headers: headers(8, httpsink.MaxHeaderBytes/8-6+1)}), "Headers", "8200 bytes of names and values; at most 8192"},
		{"URL", at(httpsink.Endpoint{URL: longURL(httpsink.MaxURLBytes)}),
			at(httpsink.Endpoint{URL: longURL(httpsink.MaxURLBytes + 1)}), "URL", "2049 bytes long; at most 2048"},
		{"shortest timeout", at(httpsink.Endpoint{URL: rcv.URL, Timeout: httpsink.MinTimeout}),
			at(httpsink.Endpoint{URL: rcv.URL, Timeout: httpsink.MinTimeout - time.Nanosecond}), "Timeout", "from 1s to 15m0s"},
		{"longest timeout", at(httpsink.Endpoint{URL: rcv.URL, Timeout: httpsink.MaxTimeout}),
			at(httpsink.Endpoint{URL: rcv.URL, Timeout: httpsink.MaxTimeout + time.Nanosecond}), "Timeout", "from 1s to 15m0s"},
		{"1ns timeout", at(httpsink.Endpoint{URL: rcv.URL}),
			at(httpsink.Endpoint{URL: rcv.URL, Timeout: time.Nanosecond}), "Timeout", "1ns is out of range"},
		{"100000h timeout", at(httpsink.Endpoint{URL: rcv.URL}),
			at(httpsink.Endpoint{URL: rcv.URL, Timeout: 100000 * time.Hour}), "Timeout", "100000h0m0s is out of range"},
	} {
		if err := s.PutEndpoint(tc.ok); err != nil {
			t.Errorf("%s at the limit: %v", tc.name, err)
			continue
		}
		err := s.PutEndpoint(tc.over)
		var ce *httpsink.ConfigError
		if !errors.As(err, &ce) || ce.Field != tc.field || !strings.Contains(ce.Reason, tc.limitNamed) {
			t.Errorf("%s over the limit: %v; want %s refused naming %q", tc.name, err, tc.field, tc.limitNamed)
		}
		if _, err := httpsink.New(httpsink.Config{Endpoints: []httpsink.Endpoint{tc.over}}); !errors.As(err, &ce) || ce.Field != "Endpoints[0]."+tc.field {
			t.Errorf("New with %s over the limit: %v", tc.name, err)
		}
	}
	for _, d := range []time.Duration{time.Nanosecond, 16 * time.Minute} {
		if _, err := httpsink.New(httpsink.Config{Timeout: d}); err == nil || !strings.Contains(err.Error(), "Timeout: ") {
			t.Errorf("New with Config.Timeout %s: %v; want it refused", d, err)
		}
	}
}
