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

// TestGuardNamedEndpoint: a named endpoint on a literal private address or
// on a host that is loopback by name is refused at New, naming the host and
// how to allow it; AllowPrivate opens it.
func TestGuardNamedEndpoint(t *testing.T) {
	rcv := newReceiver(t, func(w http.ResponseWriter, r *http.Request) {})
	_, port, _ := net.SplitHostPort(rcv.Listener.Addr().String())

	for _, u := range []string{rcv.URL, "http://localhost:" + port} {
		_, err := httpsink.New(httpsink.Config{Endpoints: []httpsink.Endpoint{{Name: "local", URL: u}}})
		var ce *httpsink.ConfigError
		if !errors.As(err, &ce) || ce.Field != "Endpoints[0].URL" || !errors.Is(err, httpsink.ErrBlockedAddress) || !strings.Contains(err.Error(), "127.0.0.1") {
			t.Fatalf("New with %s: %v", u, err)
		}
		// The refusal says how to allow it, in outboxd's terms as well as Go's.
		for _, want := range []string{",allow-private", "allow_private: true", "--allow-private-networks", "Endpoint.AllowPrivate"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("refusal %q does not name %s", err, want)
			}
		}
	}

	s := newSink(t, httpsink.Config{Endpoints: []httpsink.Endpoint{{Name: "local", URL: "http://localhost:" + port, AllowPrivate: true}}})
	if res := deliver(s, "local", "{}"); res.Action != outbox.ActionSuccess {
		t.Fatalf("AllowPrivate: got %s, %v", res.Action, res.Err)
	}
}

// Hosts that are private by name or by any numeric form a resolver
// accepts are refused when an endpoint is defined, as literal addresses
// are; public names and numbers pass, and AllowPrivate, AllowedNetworks
// and AllowPrivateNetworks open them.
func TestPrivateHostsByNameAreRefusedAtDefinition(t *testing.T) {
	s := newSink(t, httpsink.Config{})
	for _, host := range []string{
		"localhost", "LOCALHOST.", "LocalHost", "foo.localhost", "a.b.LOCALHOST.",
		"127.0.0.1", "127.0.0.1.", "127.1", "127.0.1", "2130706433", "0x7f000001", "0X7F000001", "017700000001",
		"0x7f.1", "0177.0.0.1", "0x7f.0x0.0x0.0x1", "0", "0x0", "00", "10.1", "167772161", "192.168.257",
		"169.254.169.254", "0xa9fea9fe", "[::1]", "[::ffff:127.0.0.1]", "[fe80::1%25eth0]",
	} {
		err := s.CheckEndpoint(httpsink.Endpoint{Name: "e", URL: "http://" + host + ":8080/hook"})
		var ce *httpsink.ConfigError
		if !errors.As(err, &ce) || ce.Field != "URL" || !errors.Is(err, httpsink.ErrBlockedAddress) {
			t.Errorf("host %s: %v; want the URL refused as a blocked address", host, err)
			continue
		}
		if !strings.Contains(err.Error(), "allow-private") {
			t.Errorf("host %s: %q does not say how to allow it", host, err)
		}
	}
	for _, host := range []string{"example.com", "localhost.example.com", "mylocalhost", "8.8.8.8", "134744072", "0x08080808",
		"8.8.2056", "127.0.0.1.example.com", "0x7g000001", "08", "4294967296", "1.2.3.4.5", "[2606:4700::1111]"} {
		if err := s.CheckEndpoint(httpsink.Endpoint{Name: "e", URL: "http://" + host + "/hook"}); err != nil {
			t.Errorf("host %s: %v; want it accepted (checked at dial time)", host, err)
		}
	}
	for _, cfg := range []httpsink.Config{{AllowPrivateNetworks: true}, {AllowedNetworks: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}} {
		open := newSink(t, cfg)
		for _, host := range []string{"localhost", "127.1", "0x7f000001"} {
			if err := open.CheckEndpoint(httpsink.Endpoint{Name: "e", URL: "http://" + host + "/"}); err != nil {
				t.Errorf("%+v, host %s: %v", cfg, host, err)
			}
		}
	}
	if err := s.CheckEndpoint(httpsink.Endpoint{Name: "e", URL: "http://foo.localhost/", AllowPrivate: true}); err != nil {
		t.Errorf("AllowPrivate, host foo.localhost: %v", err)
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
