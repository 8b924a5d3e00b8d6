package httpsink_test

import (
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/outboxd/outbox/httpsink"
	"github.com/outboxd/outbox/outbox"
)

// TestGuardRefuses: raw URLs to non-public addresses are refused at dial time
// with an error naming the address, before any byte reaches a receiver.
func TestGuardRefuses(t *testing.T) {
	rcv := newReceiver(t, func(w http.ResponseWriter, r *http.Request) {})
	_, port, _ := net.SplitHostPort(rcv.Listener.Addr().String())

	// A receiver on ::1 too, so that a guard failure would really connect.
	l6, err := net.Listen("tcp", "[::1]:0")
	if err != nil {
		t.Fatal(err)
	}
	rcv6 := httptest.NewUnstartedServer(rcv.Config.Handler)
	rcv6.Listener.Close()
	rcv6.Listener = l6
	rcv6.Start()
	t.Cleanup(rcv6.Close)
	_, port6, _ := net.SplitHostPort(l6.Addr().String())

	s := newSink(t, httpsink.Config{AllowRawURLs: true})
	for _, tt := range []struct {
		dest, addr, reason string
	}{
		{"http://127.0.0.1:" + port + "/hook", "127.0.0.1", "loopback"},
		{"http://[::1]:" + port6 + "/hook", "::1", "loopback"},
		{"http://[::ffff:127.0.0.1]:" + port + "/hook", "127.0.0.1", "loopback"},
		{"http://localhost:" + port + "/hook", "", "loopback"}, // 127.0.0.1 or ::1
		{"http://10.1.2.3:" + port + "/hook", "10.1.2.3", "private"},
		{"http://169.254.169.254/latest/meta-data/", "169.254.169.254", "cloud metadata"},
		{"https://[fd00:ec2::254]/latest/meta-data/", "fd00:ec2::254", "cloud metadata"},
		{"http://0.0.0.0:" + port + "/", "0.0.0.0", "unspecified"},
	} {
		res := deliver(s, tt.dest, "{}")
		var be *httpsink.BlockedAddressError
		if res.Action != outbox.ActionDead || !errors.Is(res.Err, httpsink.ErrBlockedAddress) || !errors.As(res.Err, &be) {
			t.Errorf("%s: got %s, %v; want dead with a *BlockedAddressError", tt.dest, res.Action, res.Err)
			continue
		}
		if tt.addr != "" && be.Addr.String() != tt.addr {
			t.Errorf("%s: refused %s, want %s", tt.dest, be.Addr, tt.addr)
		}
		if be.Reason != tt.reason || !strings.Contains(res.Err.Error(), be.Addr.String()) || !strings.Contains(res.Err.Error(), tt.reason) {
			t.Errorf("%s: error %q should name %s and %q", tt.dest, res.Err, be.Addr, tt.reason)
		}
	}
	if n := rcv.requests.Load(); n != 0 {
		t.Fatalf("%d requests got through the guard", n)
	}
}

// TestGuardNamedEndpoint: a named endpoint is guarded too (a hostname that
// resolves to loopback disables it: its configuration must change), a
// literal private address is refused at New, and AllowPrivate opens it.
func TestGuardNamedEndpoint(t *testing.T) {
	rcv := newReceiver(t, func(w http.ResponseWriter, r *http.Request) {})
	_, port, _ := net.SplitHostPort(rcv.Listener.Addr().String())

	s := newSink(t, httpsink.Config{Endpoints: []httpsink.Endpoint{{Name: "local", URL: "http://localhost:" + port}}})
	res := deliver(s, "local", "{}")
	if res.Action != outbox.ActionDisable || !errors.Is(res.Err, httpsink.ErrBlockedAddress) {
		t.Fatalf("got %s, %v; want disable, blocked", res.Action, res.Err)
	}
	// The refusal says how to allow it, in outboxd's terms as well as Go's.
	for _, want := range []string{",allow-private", "allow_private: true", "--allow-private-networks", "Endpoint.AllowPrivate"} {
		if !strings.Contains(res.Err.Error(), want) {
			t.Errorf("refusal %q does not name %s", res.Err, want)
		}
	}

	_, err := httpsink.New(httpsink.Config{Endpoints: []httpsink.Endpoint{{Name: "local", URL: rcv.URL}}})
	var ce *httpsink.ConfigError
	if !errors.As(err, &ce) || ce.Field != "Endpoints[0].URL" || !errors.Is(err, httpsink.ErrBlockedAddress) || !strings.Contains(err.Error(), "127.0.0.1") {
		t.Fatalf("New with a loopback URL: %v", err)
	}

	s = newSink(t, httpsink.Config{Endpoints: []httpsink.Endpoint{{Name: "local", URL: "http://localhost:" + port, AllowPrivate: true}}})
	if res := deliver(s, "local", "{}"); res.Action != outbox.ActionSuccess {
		t.Fatalf("AllowPrivate: got %s, %v", res.Action, res.Err)
	}
}

// TestGuardAllowList: an allow-listed range goes through, others stay
// refused; AllowPrivateNetworks opens everything.
func TestGuardAllowList(t *testing.T) {
	rcv := newReceiver(t, func(w http.ResponseWriter, r *http.Request) {})
	s := newSink(t, httpsink.Config{
		AllowRawURLs:    true,
		AllowedNetworks: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
		Endpoints:       []httpsink.Endpoint{{Name: "loop", URL: rcv.URL}}, // allowed by the list, so New accepts it
	})
	if res := deliver(s, rcv.URL, "{}"); res.Action != outbox.ActionSuccess {
		t.Fatalf("allow-listed raw URL: got %s, %v", res.Action, res.Err)
	}
	if res := deliver(s, "loop", "{}"); res.Action != outbox.ActionSuccess {
		t.Fatalf("allow-listed endpoint: got %s, %v", res.Action, res.Err)
	}
	if res := deliver(s, "http://169.254.169.254/", "{}"); !errors.Is(res.Err, httpsink.ErrBlockedAddress) {
		t.Fatalf("metadata address outside the allow-list: got %s, %v", res.Action, res.Err)
	}

	open := newSink(t, httpsink.Config{AllowRawURLs: true, AllowPrivateNetworks: true})
	if res := deliver(open, rcv.URL, "{}"); res.Action != outbox.ActionSuccess {
		t.Fatalf("AllowPrivateNetworks: got %s, %v", res.Action, res.Err)
	}
}
