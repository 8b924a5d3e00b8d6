package authguard

import (
	"log/slog"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of Config.
const (
	// DefaultBaseDelay is the delay of an address's first wrong token.
	DefaultBaseDelay = 100 * time.Millisecond
	// DefaultMaxDelay is the most one wrong token is delayed.
	DefaultMaxDelay = 5 * time.Second
	// DefaultForget is how long an address's failures are remembered after
	// its last wrong token.
	DefaultForget = 15 * time.Minute
	// DefaultMaxAddresses bounds the addresses whose failures are kept.
	DefaultMaxAddresses = 10000
	// DefaultMaxWaiting bounds the answers held back at once.
	DefaultMaxWaiting = 1024
	// maxWaitingPerAddress bounds the answers held back at once for one
	// address; its answers are released one delay apart, so more would
	// only wait longer.
	maxWaitingPerAddress = 8
)

// Config configures a Guard. The zero value is usable: every field
// documents its default.
type Config struct {
	// BaseDelay is how long the answer to an address's first wrong token
	// is held back; each further consecutive wrong token doubles it, up to
	// MaxDelay. Default DefaultBaseDelay (100ms).
	BaseDelay time.Duration
	// MaxDelay bounds the delay of one wrong token. Default
	// DefaultMaxDelay (5s).
	MaxDelay time.Duration
	// Forget is how long an address's count of wrong tokens is kept after
	// its last one; an address silent that long starts a new burst.
	// Default DefaultForget (15m).
	Forget time.Duration
	// MaxAddresses bounds the addresses whose counts are kept; when it is
	// reached and none can be forgotten, new addresses share one count.
	// Default DefaultMaxAddresses (10,000).
	MaxAddresses int
	// MaxWaiting bounds the answers to wrong tokens held back at once,
	// over all addresses. Past it, and past a few at once for one address,
	// a request from an address with wrong tokens behind it is answered
	// Throttled without its token being compared. Default
	// DefaultMaxWaiting (1,024).
	MaxWaiting int
	// TrustedProxies are the networks of the reverse proxies whose
	// X-Forwarded-For and X-Forwarded-Proto headers are believed. Default:
	// none, the client is the connection's peer.
	TrustedProxies []netip.Prefix
	// Logger receives one warning per burst of wrong tokens from an
	// address, naming the address (never the token). Default: discard.
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.BaseDelay <= 0 {
		c.BaseDelay = DefaultBaseDelay
	}
	if c.MaxDelay <= 0 {
		c.MaxDelay = DefaultMaxDelay
	}
	c.MaxDelay = max(c.MaxDelay, c.BaseDelay)
	if c.Forget <= 0 {
		c.Forget = DefaultForget
	}
	if c.MaxAddresses <= 0 {
		c.MaxAddresses = DefaultMaxAddresses
	}
	if c.MaxWaiting <= 0 {
		c.MaxWaiting = DefaultMaxWaiting
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Outcome is what a Guard decided about one request's token.
type Outcome int

const (
	// Allowed: the token is the right one; the request goes on at once.
	Allowed Outcome = iota
	// Refused: the token is wrong; its answer was held back by the delay
	// of the address (or until the request was cancelled).
	Refused
	// Throttled: too many answers are held back already, for this
	// address or overall; the token was not compared. Answer 429.
	Throttled
)

// Guard throttles token guessing. It is safe for concurrent use, starts no
// goroutine, and a nil *Guard compares tokens without throttling.
type Guard struct {
	cfg      Config
	failures atomic.Uint64

	mu      sync.Mutex
	addrs   map[netip.Addr]*address
	waiting int       // answers held back now, over all addresses
	swept   time.Time // when a full addrs was last walked for silent addresses
}

// address is the state of one client address with wrong tokens behind it.
type address struct {
	fails   int       // consecutive wrong tokens
	last    time.Time // of the last wrong token
	next    time.Time // when the last answer held back goes out
	waiting int       // answers held back now
}

// New returns a Guard configured by cfg.
func New(cfg Config) *Guard {
	return &Guard{cfg: cfg.withDefaults(), addrs: map[netip.Addr]*address{}}
}

// Failures returns the wrong tokens seen since the Guard was made.
func (g *Guard) Failures() uint64 {
	if g == nil {
		return 0
	}
	return g.failures.Load()
}

// Waiting returns the answers to wrong tokens held back now.
func (g *Guard) Waiting() int {
	if g == nil {
		return 0
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.waiting
}

// Check decides about the token of r, which match compares with the right
// one (in constant time). A right token is allowed at once, from any
// address. A wrong one is refused after a delay that doubles with each
// consecutive wrong token from the client's address; the answers of one
// address go out one delay apart however many connections it uses. The
// wait ends early when r's context is done. A right token resets the
// address.
func (g *Guard) Check(r *http.Request, match func() bool) Outcome {
	if g == nil {
		if match() {
			return Allowed
		}
		return Refused
	}
	client := g.Client(r)
	if g.busy(client) {
		return Throttled
	}
	if match() {
		g.forgive(client)
		return Allowed
	}
	g.failures.Add(1)
	st, release, ok := g.hold(client)
	if !ok {
		return Throttled
	}
	t := time.NewTimer(time.Until(release))
	select {
	case <-t.C:
	case <-r.Context().Done():
		t.Stop()
	}
	g.mu.Lock()
	st.waiting--
	g.waiting--
	g.mu.Unlock()
	return Refused
}

// busy reports whether client has wrong tokens behind it and no more of
// its answers can be held back.
func (g *Guard) busy(client netip.Addr) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	st := g.addrs[g.key(client)]
	return st != nil && st.fails > 0 && (st.waiting >= maxWaitingPerAddress || g.waiting >= g.cfg.MaxWaiting)
}

// forgive drops client's count after a right token.
func (g *Guard) forgive(client netip.Addr) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.addrs, client)
}

// hold counts a wrong token from client and returns when its answer goes
// out, or false when no more answers can be held back.
func (g *Guard) hold(client netip.Addr) (*address, time.Time, bool) {
	now := time.Now()
	g.mu.Lock()
	defer g.mu.Unlock()
	key := g.key(client)
	st := g.addrs[key]
	if st == nil || (st.waiting == 0 && now.Sub(st.last) > g.cfg.Forget) {
		st = &address{}
		g.addrs[key] = st
		who := "other addresses (too many to track each)"
		if key.IsValid() {
			who = key.String()
		}
		g.cfg.Logger.Warn("wrong tokens: delaying the answers to this client until it sends the right one",
			"addr", who, "first_delay", g.cfg.BaseDelay.String(), "max_delay", g.cfg.MaxDelay.String())
	}
	st.fails++
	st.last = now
	if st.waiting >= maxWaitingPerAddress || g.waiting >= g.cfg.MaxWaiting {
		return nil, time.Time{}, false
	}
	release := now
	if st.next.After(release) {
		release = st.next
	}
	release = release.Add(g.delay(st.fails))
	st.next = release
	st.waiting++
	g.waiting++
	return st, release, true
}

// delay is the delay of the nth consecutive wrong token: BaseDelay doubled
// n-1 times, at most MaxDelay.
func (g *Guard) delay(n int) time.Duration {
	d := g.cfg.BaseDelay
	for i := 1; i < n && d < g.cfg.MaxDelay; i++ {
		d *= 2
	}
	return min(d, g.cfg.MaxDelay)
}

// key is the map key of client: itself when it is tracked or there is
// room for it (after forgetting silent addresses), else the zero Addr
// all untracked addresses share. Called with mu held.
func (g *Guard) key(client netip.Addr) netip.Addr {
	if _, ok := g.addrs[client]; ok || len(g.addrs) < g.cfg.MaxAddresses {
		return client
	}
	now := time.Now()
	if now.Sub(g.swept) >= time.Second { // a full table is walked once a second at most
		g.swept = now
		for a, st := range g.addrs {
			if st.waiting == 0 && now.Sub(st.last) > g.cfg.Forget {
				delete(g.addrs, a)
			}
		}
	}
	if len(g.addrs) < g.cfg.MaxAddresses {
		return client
	}
	return netip.Addr{}
}

// Client returns the address of r's client: the connection's peer, or,
// when the peer is a trusted proxy, the last address in X-Forwarded-For
// that is not one (the zero Addr when RemoteAddr does not parse).
func (g *Guard) Client(r *http.Request) netip.Addr {
	peer := remoteAddr(r)
	if !g.trusted(peer) {
		return peer
	}
	var hops []string
	for _, v := range r.Header.Values("X-Forwarded-For") {
		hops = append(hops, strings.Split(v, ",")...)
	}
	client := peer
	for i := len(hops) - 1; i >= 0; i-- {
		a, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
		if err != nil {
			return client
		}
		client = a.Unmap()
		if !g.trusted(client) {
			return client
		}
	}
	return client
}

// Secure reports whether r came over TLS: to this server, or to a trusted
// proxy that says so with "X-Forwarded-Proto: https" (its last value
// counts, the one the proxy next to this server set).
func (g *Guard) Secure(r *http.Request) bool {
	if r.TLS != nil {
		return true
	}
	if g == nil || !g.trusted(remoteAddr(r)) {
		return false
	}
	vals := r.Header.Values("X-Forwarded-Proto")
	if len(vals) == 0 {
		return false
	}
	parts := strings.Split(vals[len(vals)-1], ",")
	return strings.EqualFold(strings.TrimSpace(parts[len(parts)-1]), "https")
}

func (g *Guard) trusted(a netip.Addr) bool {
	if g == nil || !a.IsValid() {
		return false
	}
	for _, p := range g.cfg.TrustedProxies {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// remoteAddr parses r.RemoteAddr ("host:port", or a bare host).
func remoteAddr(r *http.Request) netip.Addr {
	if ap, err := netip.ParseAddrPort(r.RemoteAddr); err == nil {
		return ap.Addr().Unmap()
	}
	a, _ := netip.ParseAddr(r.RemoteAddr)
	return a.Unmap()
}
