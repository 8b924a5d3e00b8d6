package httpsink_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/outboxd/outbox/httpsink"
)

// TestRawURLWithAnInvalidPortIsABadURL: url.Parse lets a port out of range
// through and calls a non-numeric one "not a URL"; both are refused when the
// event is enqueued (the outbox asks ResolveEndpoint), saying what is wrong.
func TestRawURLWithAnInvalidPortIsABadURL(t *testing.T) {
	s := newSink(t, httpsink.Config{AllowRawURLs: true})
	for _, dest := range []string{"http://h:99999/", "http://h:65536/", "http://h:0/", "http://h:abc/", "https://user:pw@h:-1/x"} {
		_, err := s.ResolveEndpoint(dest)
		if !errors.Is(err, httpsink.ErrBadURL) || !strings.Contains(err.Error(), "port must be a number from 1 to 65535") {
			t.Errorf("%q: %v, want ErrBadURL naming the port", dest, err)
		}
		if err != nil && strings.Contains(err.Error(), "pw") {
			t.Errorf("%q: error shows the password: %v", dest, err)
		}
	}
	for _, dest := range []string{"http://h:1/", "http://h:65535/", "http://h/"} {
		if _, err := s.ResolveEndpoint(dest); err != nil {
			t.Errorf("%q: %v, want accepted", dest, err)
		}
	}
	// An endpoint's URL follows the same rule.
	_, err := httpsink.New(httpsink.Config{Endpoints: []httpsink.Endpoint{{Name: "e", URL: "https://h:70000/"}}})
	var ce *httpsink.ConfigError
	if !errors.As(err, &ce) || ce.Field != "Endpoints[0].URL" {
		t.Errorf("endpoint URL with port 70000: %v, want a ConfigError on Endpoints[0].URL", err)
	}
}

// TestEndpointHeadersFollowTheOutboxRule: endpoint headers are refused by
// the same rule as event headers (outbox.ReservedHeader), hop-by-hop ones
// included.
func TestEndpointHeadersFollowTheOutboxRule(t *testing.T) {
	for _, name := range []string{"Connection", "upgrade", "Keep-Alive", "Webhook-Timestamp", "Host"} {
		_, err := httpsink.New(httpsink.Config{Endpoints: []httpsink.Endpoint{{Name: "e", URL: "https://example.com/",
			Headers: map[string]string{name: "x"}}}})
		var ce *httpsink.ConfigError
		if !errors.As(err, &ce) || !strings.Contains(ce.Field, name) || !strings.Contains(ce.Reason, "cannot be configured") {
			t.Errorf("endpoint header %s: %v, want a ConfigError naming it", name, err)
		}
	}
}
