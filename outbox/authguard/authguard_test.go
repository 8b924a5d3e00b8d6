package authguard_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/outboxd/outbox/outbox/authguard"
)

func request(remote string) *http.Request {
	r := httptest.NewRequest(http.MethodGet, "/v1/stats", nil)
	r.RemoteAddr = remote
	return r
}

func wrong() bool { return false }
func right() bool { return true }

// TestDelaysDoubleUpToTheCap: each consecutive wrong token from an address
// waits twice the one before, up to MaxDelay; the right token is answered
// at once and starts the address over.
func TestDelaysDoubleUpToTheCap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := authguard.New(authguard.Config{BaseDelay: 100 * time.Millisecond, MaxDelay: time.Second})
		want := []time.Duration{100, 200, 400, 800, 1000, 1000}
		for i, w := range want {
			start := time.Now()
			if got := g.Check(request("192.0.2.1:5000"), wrong); got != authguard.Refused {
				t.Fatalf("wrong token %d: %v, want Refused", i, got)
			}
			if took := time.Since(start); took != w*time.Millisecond {
				t.Fatalf("wrong token %d waited %v, want %v", i, took, w*time.Millisecond)
			}
		}
		start := time.Now()
		if got := g.Check(request("192.0.2.1:5001"), right); got != authguard.Allowed {
			t.Fatalf("right token: %v, want Allowed", got)
		}
		if took := time.Since(start); took != 0 {
			t.Fatalf("right token waited %v", took)
		}
		start = time.Now()
		g.Check(request("192.0.2.1:5000"), wrong)
		if took := time.Since(start); took != 100*time.Millisecond {
			t.Fatalf("after the right token a wrong one waited %v, want the base delay again", took)
		}
		if g.Failures() != 7 {
			t.Fatalf("Failures = %d, want 7", g.Failures())
		}
	})
}

// TestRightTokenWhileDelayed: while an address's wrong token is held back,
// the right token from the same address goes through at once.
func TestRightTokenWhileDelayed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := authguard.New(authguard.Config{BaseDelay: time.Second, MaxDelay: time.Second})
		var wg sync.WaitGroup
		wg.Go(func() { g.Check(request("192.0.2.1:5000"), wrong) })
		synctest.Wait()
		if g.Waiting() != 1 {
			t.Fatalf("Waiting = %d, want 1", g.Waiting())
		}
		start := time.Now()
		if got := g.Check(request("192.0.2.1:5001"), right); got != authguard.Allowed || time.Since(start) != 0 {
			t.Fatalf("right token: %v after %v, want Allowed at once", got, time.Since(start))
		}
		wg.Wait()
	})
}

// TestConnectionsOfOneAddressShareTheDelay: wrong tokens sent at once over
// several connections are answered one delay apart, and past the few held
// back per address the rest are Throttled without their token compared.
func TestConnectionsOfOneAddressShareTheDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := authguard.New(authguard.Config{BaseDelay: time.Second, MaxDelay: time.Second})
		start := time.Now()
		var mu sync.Mutex
		var took []time.Duration
		compared := 0
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Go(func() {
				g.Check(request(fmt.Sprintf("192.0.2.1:%d", 5000+i)), func() bool {
					mu.Lock()
					compared++
					mu.Unlock()
					return false
				})
				mu.Lock()
				took = append(took, time.Since(start))
				mu.Unlock()
			})
			synctest.Wait()
		}
		if got := g.Check(request("192.0.2.1:9"), func() bool { t.Error("token compared while throttled"); return true }); got != authguard.Throttled {
			t.Fatalf("ninth at once: %v, want Throttled", got)
		}
		wg.Wait()
		for i, d := range took {
			if d != time.Duration(i+1)*time.Second {
				t.Fatalf("answers went out at %v, want one second apart", took)
			}
		}
		if compared != 8 {
			t.Fatalf("compared %d tokens, want 8", compared)
		}
	})
}

// TestCancelledRequestStopsWaiting: a request whose context ends is
// answered then, not at the end of its delay.
func TestCancelledRequestStopsWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := authguard.New(authguard.Config{BaseDelay: time.Minute, MaxDelay: time.Minute})
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		start := time.Now()
		if got := g.Check(request("192.0.2.1:5000").WithContext(ctx), wrong); got != authguard.Refused {
			t.Fatalf("got %v, want Refused", got)
		}
		if took := time.Since(start); took != time.Second {
			t.Fatalf("waited %v, want the request's 1s", took)
		}
	})
}

// TestOneLinePerBurstWithoutTheToken: a burst of wrong tokens logs one line
// naming the address; a new burst after Forget logs another.
func TestOneLinePerBurstWithoutTheToken(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var log bytes.Buffer
		g := authguard.New(authguard.Config{BaseDelay: time.Millisecond, MaxDelay: time.Millisecond,
			Forget: time.Minute, Logger: slog.New(slog.NewTextHandler(&log, nil))})
		for range 50 {
			g.Check(request("192.0.2.7:5000"), wrong)
		}
		time.Sleep(2 * time.Minute)
		g.Check(request("192.0.2.7:5000"), wrong)
		if n := strings.Count(log.String(), "\n"); n != 2 {
			t.Fatalf("%d log lines, want 2 (one per burst):\n%s", n, log.String())
		}
		if strings.Count(log.String(), "addr=192.0.2.7") != 2 {
			t.Fatalf("log does not name the address:\n%s", log.String())
		}
	})
}

// TestTooManyAddressesShareOneCount: past MaxAddresses, new addresses are
// delayed together, until silent addresses are forgotten.
func TestTooManyAddressesShareOneCount(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := authguard.New(authguard.Config{BaseDelay: time.Second, MaxDelay: time.Hour, MaxAddresses: 2, Forget: time.Minute})
		g.Check(request("192.0.2.1:1"), wrong)
		g.Check(request("192.0.2.2:1"), wrong)
		g.Check(request("192.0.2.3:1"), wrong)
		start := time.Now()
		g.Check(request("192.0.2.4:1"), wrong)
		if took := time.Since(start); took != 2*time.Second {
			t.Fatalf("fourth address waited %v, want 2s (its second wrong token, shared with the third)", took)
		}
		// Once the tracked addresses are silent for Forget, a new one gets
		// a count of its own again.
		time.Sleep(2 * time.Minute)
		start = time.Now()
		g.Check(request("192.0.2.5:1"), wrong)
		if took := time.Since(start); took != time.Second {
			t.Fatalf("a new address after the others were forgotten waited %v, want the base 1s", took)
		}
	})
}

func TestClientAndSecure(t *testing.T) {
	g := authguard.New(authguard.Config{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}})
	for _, tc := range []struct {
		name, remote, xff, proto string
		tls                      bool
		client                   string
		secure                   bool
	}{
		{"direct", "192.0.2.1:5000", "", "", false, "192.0.2.1", false},
		{"direct over TLS", "192.0.2.1:5000", "", "", true, "192.0.2.1", true},
		{"untrusted peer's headers ignored", "192.0.2.1:5000", "198.51.100.9", "https", false, "192.0.2.1", false},
		{"trusted proxy", "10.1.2.3:5000", "198.51.100.9", "https", false, "198.51.100.9", true},
		{"trusted proxy over http", "10.1.2.3:5000", "198.51.100.9", "http", false, "198.51.100.9", false},
		{"spoofed hop before the proxy", "10.1.2.3:5000", "203.0.113.5, 198.51.100.9, 10.9.9.9", "https", false, "198.51.100.9", true},
		{"garbage hop", "10.1.2.3:5000", "nonsense, 10.9.9.9", "", false, "10.9.9.9", false},
		{"ipv6 peer", "[2001:db8::1]:5000", "198.51.100.9", "https", false, "2001:db8::1", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := request(tc.remote)
			if tc.xff != "" {
				r.Header.Set("X-Forwarded-For", tc.xff)
			}
			if tc.proto != "" {
				r.Header.Set("X-Forwarded-Proto", tc.proto)
			}
			if tc.tls {
				r.TLS = &tls.ConnectionState{}
			}
			if got := g.Client(r).String(); got != tc.client {
				t.Errorf("Client = %s, want %s", got, tc.client)
			}
			if got := g.Secure(r); got != tc.secure {
				t.Errorf("Secure = %v, want %v", got, tc.secure)
			}
		})
	}
}
