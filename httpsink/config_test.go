package httpsink_test

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"strings"
	"testing"

	"github.com/outboxd/outbox/httpsink"
	"github.com/outboxd/outbox/outbox"
)

func TestResolveEndpoint(t *testing.T) {
	s := newSink(t, httpsink.Config{
		AllowRawURLs: true,
		Endpoints:    []httpsink.Endpoint{{Name: "billing", URL: "https://billing.example.com/hooks"}},
	})
	for dest, want := range map[string]string{
		"billing":                                  "billing",
		"https://Example.COM/path?q=1":             "https://example.com:443",
		"HTTP://example.com":                       "http://example.com:80",
		"http://user:pw@example.com:8080/x":        "http://example.com:8080",
		"http://[2001:DB8::1]:9000/":               "http://[2001:db8::1]:9000",
		"https://billing.example.com/hooks":        "https://billing.example.com:443", // a URL is raw, even an endpoint's
		"http://10.0.0.1/checked-at-dial-time-not": "http://10.0.0.1:80",
	} {
		got, err := s.ResolveEndpoint(dest)
		if err != nil || got != want {
			t.Errorf("%q: %q, %v; want %q", dest, got, err, want)
		}
	}
	for dest, want := range map[string]error{
		"payments":          httpsink.ErrUnknownEndpoint,
		"":                  httpsink.ErrUnknownEndpoint,
		"ftp://example.com": httpsink.ErrBadURL,
		"http://":           httpsink.ErrBadURL,
		"http:///path":      httpsink.ErrBadURL,
		"http://%zz":        httpsink.ErrBadURL,
	} {
		_, err := s.ResolveEndpoint(dest)
		var de *httpsink.DestinationError
		if !errors.Is(err, want) || !errors.As(err, &de) {
			t.Errorf("%q: %v, want %v", dest, err, want)
		}
	}

	noRaw := newSink(t, httpsink.Config{Endpoints: []httpsink.Endpoint{{Name: "billing", URL: "https://billing.example.com/"}}})
	_, err := noRaw.ResolveEndpoint("https://user:hunter2@example.com/x?token=abc")
	if !errors.Is(err, httpsink.ErrRawURLsNotAllowed) {
		t.Fatalf("raw URL without AllowRawURLs: %v", err)
	}
	if msg := err.Error(); strings.Contains(msg, "hunter2") || strings.Contains(msg, "abc") || strings.Contains(msg, "user") {
		t.Fatalf("error leaks credentials: %s", msg)
	}
	// The same destinations are dead at delivery time.
	if res := deliver(noRaw, "https://example.com/", "{}"); res.Action != outbox.ActionDead || !errors.Is(res.Err, httpsink.ErrRawURLsNotAllowed) {
		t.Fatalf("Deliver: got %s, %v", res.Action, res.Err)
	}
	if res := deliver(noRaw, "nope", "{}"); res.Action != outbox.ActionDead || !errors.Is(res.Err, httpsink.ErrUnknownEndpoint) {
		t.Fatalf("Deliver: got %s, %v", res.Action, res.Err)
	}
}

func TestConfigErrors(t *testing.T) {
	ok := httpsink.Endpoint{Name: "e", URL: "https://example.com/"}
	with := func(f func(e *httpsink.Endpoint)) []httpsink.Endpoint {
		e := ok
		f(&e)
		return []httpsink.Endpoint{e}
	}
	for _, tt := range []struct {
		cfg   httpsink.Config
		field string
	}{
		{httpsink.Config{Timeout: -1}, "Timeout"},
		{httpsink.Config{MaxDrain: -1}, "MaxDrain"},
		{httpsink.Config{UserAgent: "a\nb"}, "UserAgent"},
		{httpsink.Config{AllowedNetworks: []netip.Prefix{{}}}, "AllowedNetworks[0]"},
		{httpsink.Config{Endpoints: with(func(e *httpsink.Endpoint) { e.Name = "" })}, "Endpoints[0].Name"},
		{httpsink.Config{Endpoints: with(func(e *httpsink.Endpoint) { e.Name = "https://x" })}, "Endpoints[0].Name"},
		{httpsink.Config{Endpoints: []httpsink.Endpoint{ok, ok}}, "Endpoints[1].Name"},
		{httpsink.Config{Endpoints: with(func(e *httpsink.Endpoint) { e.URL = "" })}, "Endpoints[0].URL"},
		{httpsink.Config{Endpoints: with(func(e *httpsink.Endpoint) { e.URL = "/relative" })}, "Endpoints[0].URL"},
		{httpsink.Config{Endpoints: with(func(e *httpsink.Endpoint) { e.URL = "ftp://example.com" })}, "Endpoints[0].URL"},
		{httpsink.Config{Endpoints: with(func(e *httpsink.Endpoint) { e.URL = "http://169.254.169.254/" })}, "Endpoints[0].URL"},
		{httpsink.Config{Endpoints: with(func(e *httpsink.Endpoint) { e.Secrets = []string{"hunter2hunter2hunter2"} })}, "Endpoints[0].Secrets[0]"},
		{httpsink.Config{Endpoints: with(func(e *httpsink.Endpoint) { e.Secrets = []string{secretA, "whsec_!!!"} })}, "Endpoints[0].Secrets[1]"},
		{httpsink.Config{Endpoints: with(func(e *httpsink.Endpoint) { e.Secrets = []string{"whsec_c2hvcnQ="} })}, "Endpoints[0].Secrets[0]"},
		{httpsink.Config{Endpoints: with(func(e *httpsink.Endpoint) { e.Timeout = -1 })}, "Endpoints[0].Timeout"},
		{httpsink.Config{Endpoints: with(func(e *httpsink.Endpoint) { e.MaxInFlight = -1 })}, "Endpoints[0].MaxInFlight"},
		{httpsink.Config{Endpoints: with(func(e *httpsink.Endpoint) { e.Headers = map[string]string{"Bad Name": "x"} })}, `Endpoints[0].Headers["Bad Name"]`},
		{httpsink.Config{Endpoints: with(func(e *httpsink.Endpoint) { e.Headers = map[string]string{"X-Key": "secret\r\n"} })}, `Endpoints[0].Headers["X-Key"]`},
		{httpsink.Config{Endpoints: with(func(e *httpsink.Endpoint) { e.Headers = map[string]string{"webhook-id": "x"} })}, `Endpoints[0].Headers["webhook-id"]`},
		{httpsink.Config{Endpoints: with(func(e *httpsink.Endpoint) { e.Headers = map[string]string{"Content-Length": "1"} })}, `Endpoints[0].Headers["Content-Length"]`},
	} {
		_, err := httpsink.New(tt.cfg)
		var ce *httpsink.ConfigError
		if !errors.As(err, &ce) || ce.Field != tt.field || !errors.Is(err, httpsink.ErrInvalidConfig) {
			t.Errorf("want a *ConfigError for %s, got %v", tt.field, err)
			continue
		}
		if msg := err.Error(); strings.Contains(msg, "hunter2") || strings.Contains(msg, "secret\r") {
			t.Errorf("error quotes a secret: %s", msg)
		}
	}
}

// TestRedaction: credentials in URLs, secrets and header values never reach
// errors or logs.
func TestRedaction(t *testing.T) {
	for in, want := range map[string]string{
		"https://user:hunter2@example.com/p?token=abc&x=1#frag": "https://xxxxx@example.com/p?token=xxxxx&x=xxxxx",
		"https://ghp_token@example.com/":                        "https://xxxxx@example.com/",
		"https://example.com/plain":                             "https://example.com/plain",
		"billing":                                               "billing",
		"http://user:pw@%zz":                                    "<unparseable URL>",
	} {
		if got := httpsink.RedactURL(in); got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", in, got, want)
		}
	}

	var logs strings.Builder
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	rcv := newReceiver(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadGateway) // retried inline, so logged
	})
	ep := httpsink.Endpoint{
		Name: "e", URL: strings.Replace(rcv.URL, "http://", "http://alice:hunter2@", 1) + "/?api_key=sekret", AllowPrivate: true,
		Secrets: []string{secretA}, Headers: map[string]string{"Authorization": "Bearer tok-123", "X-Api-Key": "key-456"},
	}
	s := newSink(t, httpsink.Config{Logger: logger, Endpoints: []httpsink.Endpoint{ep}, AllowRawURLs: true, AllowPrivateNetworks: true})
	res := deliver(s, "e", "{}")
	if res.Status != http.StatusBadGateway {
		t.Fatalf("got %s/%d, %v", res.Action, res.Status, res.Err)
	}
	// A transport error on a raw URL with credentials.
	res = deliver(s, "http://alice:hunter2@127.0.0.1:1/?api_key=sekret", "{}")
	if res.Err == nil {
		t.Fatal("no error from a closed port")
	}
	logger.Info("endpoint", "endpoint", ep)
	out := logs.String() + res.Err.Error() + ep.String() + fmt.Sprint(ep)
	for _, secret := range []string{"hunter2", "sekret", "tok-123", "key-456", secretA[6:], "alice"} {
		if strings.Contains(out, secret) {
			t.Errorf("%q leaked into errors or logs:\n%s", secret, out)
		}
	}
	if !strings.Contains(logs.String(), "retrying inline") || !strings.Contains(out, "xxxxx@127.0.0.1") {
		t.Errorf("expected logs and errors with redacted URLs, got:\n%s", out)
	}
}
