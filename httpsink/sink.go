package httpsink

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-retryablehttp"

	"github.com/outboxd/outbox/outbox"
)

// Sink delivers events over HTTP. It implements outbox.Sink and
// outbox.EndpointResolver and is safe for concurrent use; its endpoints can
// be added, replaced and removed while it delivers (PutEndpoint,
// RemoveEndpoint).
type Sink struct {
	cfg Config
	// named maps endpoint names to their *endpoint definitions: Deliver
	// reads it without a lock, and PutEndpoint and RemoveEndpoint (under
	// mu) change one name at a time, at a cost that does not grow with
	// the number of endpoints.
	named sync.Map
	// names are the names of named, sorted (for EndpointNames and
	// EndpointNamesAfter); guarded by mu.
	names     []string
	mu        sync.Mutex    // serializes the writers of named; guards names and retired
	retired   []retiredPool // see retire
	raw       *http.Client  // shared by raw-URL destinations
	rawPool   *http.Transport
	rawStreak *streakTable // raw-URL origins' failure streaks; nil without AllowRawURLs
	userAgent []string     // header value, shared by all requests
	closed    atomic.Bool
	// excerptBufs hold *[]byte buffers the attempt log's excerpts are read
	// into (see logResponse).
	excerptBufs sync.Pool
}

var (
	_ outbox.Sink             = (*Sink)(nil)
	_ outbox.EndpointResolver = (*Sink)(nil)
	_ outbox.EndpointPager    = (*Sink)(nil)
)

// endpoint is a named endpoint ready for use. It is immutable once
// published, but for its in-flight count.
type endpoint struct {
	name        string
	url         string
	redactedURL string
	keys        []*signingKey // Secrets, then RetiringSecrets
	timeout     time.Duration
	headers     http.Header   // canonical names
	sem         chan struct{} // nil: no cap
	client      *http.Client
	pool        *http.Transport // client's; nil for a raw URL's
	secrets     []string        // kept out of the attempt log (secretsOf)
	// streak is the endpoint's recent failure streak, shared by the
	// definitions of one name while its URL stays the same (PutEndpoint).
	streak streak
	// inFlight counts the Deliver calls using this definition; once it
	// is replaced or removed (retired), the last of them closes its idle
	// connections.
	inFlight atomic.Int64
	retired  atomic.Bool
}

// New validates cfg and returns a Sink. The error is a *ConfigError naming
// the field it refuses.
func New(cfg Config) (*Sink, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	s := &Sink{cfg: cfg, userAgent: []string{cfg.UserAgent}}
	var rawGuard *guard
	if !cfg.AllowPrivateNetworks {
		rawGuard = &guard{allowed: cfg.AllowedNetworks}
	}
	s.raw, s.rawPool = s.newClient(rawGuard, cfg.PoolSize, max(1024, 4*cfg.PoolSize))
	if cfg.AllowRawURLs {
		s.rawStreak = newStreakTable()
	}
	for _, e := range cfg.Endpoints {
		if _, loaded := s.named.Swap(e.Name, s.newEndpoint(e)); !loaded {
			s.names = append(s.names, e.Name)
		}
	}
	slices.Sort(s.names)
	return s, nil
}

// newEndpoint builds a validated endpoint, with a keep-alive pool of its own.
func (s *Sink) newEndpoint(e Endpoint) *endpoint {
	cfg := &s.cfg
	ep := &endpoint{
		name:        e.Name,
		url:         e.URL,
		redactedURL: RedactURL(e.URL),
		timeout:     e.Timeout,
		headers:     make(http.Header, len(e.Headers)),
		secrets:     secretsOf(e),
		streak:      newStreak(),
	}
	if ep.timeout == 0 {
		ep.timeout = cfg.Timeout
	}
	for _, sec := range e.Secrets {
		k, _ := decodeSecret(sec) // validated
		ep.keys = append(ep.keys, newSigningKey(k, time.Time{}))
	}
	for _, rs := range e.RetiringSecrets {
		k, _ := decodeSecret(rs.Secret) // validated
		ep.keys = append(ep.keys, newSigningKey(k, rs.Until))
	}
	for k, v := range e.Headers {
		ep.headers.Set(k, v)
	}
	pool := cfg.PoolSize
	if e.MaxInFlight > 0 {
		ep.sem = make(chan struct{}, e.MaxInFlight)
		pool = e.MaxInFlight
	}
	var g *guard
	if !e.AllowPrivate && !cfg.AllowPrivateNetworks {
		g = &guard{allowed: cfg.AllowedNetworks}
	}
	ep.client, ep.pool = s.newClient(g, pool, 2*pool)
	return ep
}

// endpoint returns the named endpoint's current definition, nil when
// there is none.
func (s *Sink) endpoint(name string) *endpoint {
	ep, _ := s.named.Load(name)
	e, _ := ep.(*endpoint)
	return e
}

// newClient returns an HTTP client on a new keep-alive pool (returned too)
// whose dialer runs g (nil: no guard).
func (s *Sink) newClient(g *guard, perHost, total int) (*http.Client, *http.Transport) {
	d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	if g != nil {
		d.Control = g.control
	}
	t := &http.Transport{
		// No proxy from the environment: the guard must see the real
		// destination address, not a proxy's.
		Proxy:                 nil,
		DialContext:           d.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          total,
		MaxIdleConnsPerHost:   perHost,
		IdleConnTimeout:       idleConnTimeout,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	c := &http.Client{
		// retryablehttp closes all idle connections of its client's
		// transport after any failed call, which would throw away the pool
		// of every healthy receiver; hiding CloseIdleConnections keeps the
		// pool, and Close empties it.
		Transport: roundTripperOnly{t},
	}
	if !s.cfg.FollowRedirects {
		c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	}
	return c, t
}

// idleConnTimeout is how long a keep-alive connection stays idle in a pool.
const idleConnTimeout = 90 * time.Second

// roundTripperOnly exposes RoundTrip and nothing else.
type roundTripperOnly struct{ rt http.RoundTripper }

func (r roundTripperOnly) RoundTrip(req *http.Request) (*http.Response, error) {
	return r.rt.RoundTrip(req)
}

// Close closes idle connections. Call it after the outbox has stopped;
// Deliver calls after Close return ActionRetry with ErrClosed. Close is
// idempotent and always returns nil.
func (s *Sink) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed.Store(true)
	s.rawPool.CloseIdleConnections()
	s.named.Range(func(_, ep any) bool {
		ep.(*endpoint).pool.CloseIdleConnections()
		return true
	})
	for _, r := range s.retired {
		r.ep.pool.CloseIdleConnections()
	}
	return nil
}

// EndpointNames implements outbox.EndpointLister: the names of the
// configured endpoints, sorted.
func (s *Sink) EndpointNames() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.names)
}

// EndpointNamesAfter implements outbox.EndpointPager: up to limit names of
// the configured endpoints that sort after after, in order, found by a
// binary search.
func (s *Sink) EndpointNamesAfter(after string, limit int) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	i, found := slices.BinarySearch(s.names, after)
	if found {
		i++
	}
	return slices.Clone(s.names[i:min(len(s.names), i+max(0, limit))])
}

// ResolveEndpoint implements outbox.EndpointResolver. A configured endpoint
// name resolves to itself; an absolute http or https URL, when
// Config.AllowRawURLs is on, resolves to its lowercased scheme://host:port
// (default port filled in, no credentials), so that all events for one
// origin share throttling and disabling. Anything else is a
// *DestinationError (ErrUnknownEndpoint, ErrRawURLsNotAllowed or ErrBadURL).
func (s *Sink) ResolveEndpoint(destination string) (string, error) {
	if ep := s.endpoint(destination); ep != nil {
		return ep.name, nil
	}
	key, _, err := s.resolveRaw(destination)
	return key, err
}

// resolveRaw checks a destination that is not an endpoint name.
func (s *Sink) resolveRaw(dest string) (key string, u *url.URL, err error) {
	if !strings.Contains(dest, "://") {
		reason := ""
		if s.noEndpoints() {
			reason = "no endpoints are configured"
		}
		return "", nil, &DestinationError{Destination: RedactURL(dest), Reason: reason, Err: ErrUnknownEndpoint}
	}
	u, perr := parseHTTPURL(dest)
	if perr != nil {
		return "", nil, &DestinationError{Destination: RedactURL(dest), Reason: perr.Error(), Err: ErrBadURL}
	}
	if !s.cfg.AllowRawURLs {
		return "", nil, &DestinationError{Destination: RedactURL(dest), Reason: "name a configured endpoint, or enable raw URLs", Err: ErrRawURLsNotAllowed}
	}
	scheme := strings.ToLower(u.Scheme)
	port := u.Port()
	if port == "" {
		port = "80"
		if scheme == "https" {
			port = "443"
		}
	}
	return scheme + "://" + net.JoinHostPort(strings.ToLower(u.Hostname()), port), u, nil
}

// Deliver implements outbox.Sink: it sends one attempt of d (with inline
// retries for transport failures and 502/503/504 while the endpoint is not
// failing and d is not a breaker's probe, see Config.InlineRetries) and
// classifies the outcome with the status policy table.
//
// Beyond the table: a destination that cannot be resolved, or an event that
// cannot form a valid request (bad method or header), is dead; an address
// refused by the guard is dead for a raw URL and disables a named endpoint
// (its configuration must change); a cancelled ctx gives ActionRetry with the
// context's error; a Deliver after Close gives ActionRetry with ErrClosed.
func (s *Sink) Deliver(ctx context.Context, d *outbox.Delivery) outbox.Result {
	if s.closed.Load() {
		return outbox.Result{Action: outbox.ActionRetry, Err: ErrClosed}
	}
	if d == nil {
		return outbox.Result{Action: outbox.ActionDead, Err: fmt.Errorf("%w: nil delivery", ErrInvalidRequest)}
	}
	ep := s.acquire(d.Destination)
	if ep != nil {
		defer s.release(ep)
	} else {
		key, u, err := s.resolveRaw(d.Destination)
		if err != nil {
			return outbox.Result{Action: outbox.ActionDead, Err: err}
		}
		// Only a raw URL's delivery pays for this definition.
		ep = &endpoint{name: key, url: d.Destination, redactedURL: redactURL(u), timeout: s.cfg.Timeout, client: s.raw, streak: s.rawStreak.get(key)}
	}
	c := &call{s: s, ep: ep, d: d, method: d.Method}
	if c.method == "" {
		c.method = http.MethodPost
	}
	if err := c.checkRequest(); err != nil {
		return outbox.Result{Action: outbox.ActionDead, Err: c.fail(err)}
	}
	if ep.sem != nil {
		select {
		case ep.sem <- struct{}{}:
			defer func() { <-ep.sem }()
		case <-ctx.Done():
			return outbox.Result{Action: outbox.ActionRetry, Err: c.fail(ctx.Err())}
		}
	}
	if err := ctx.Err(); err != nil {
		return outbox.Result{Action: outbox.ActionRetry, Err: c.fail(err)}
	}
	return c.do(ctx)
}

// call is one Deliver: the request and the inline-retry state.
type call struct {
	rc       retryablehttp.Client
	s        *Sink
	ep       *endpoint
	d        *outbox.Delivery
	method   string
	start    time.Time
	attempts int
	wait     time.Duration
	ts       int64 // webhook-timestamp of the request as last signed
	// inline: the endpoint's failure streak was zero when the call
	// started, and the call is no breaker's probe. counted: a failure of this call is in the streak, which
	// was mine just after it was counted.
	inline  bool
	counted bool
	mine    uint32
}

// checkRequest validates what comes from the event.
func (c *call) checkRequest() error {
	if reason := checkHeaderName(c.method); reason != "" {
		return fmt.Errorf("%w: method is not a valid token", ErrInvalidRequest)
	}
	if reason := checkHeaderValue(c.d.ID); reason != "" {
		return fmt.Errorf("%w: event ID cannot be sent as a header: %s", ErrInvalidRequest, reason)
	}
	for k, v := range c.d.Headers {
		if reason := checkHeaderName(k); reason != "" {
			return fmt.Errorf("%w: header %q: %s", ErrInvalidRequest, k, reason)
		}
		if reason := checkHeaderValue(v); reason != "" {
			return fmt.Errorf("%w: header %q: %s", ErrInvalidRequest, k, reason)
		}
	}
	return nil
}

// fail wraps err as the Result.Err of this call.
func (c *call) fail(err error) error {
	return &DeliveryError{Endpoint: c.ep.name, Method: c.method, URL: c.ep.redactedURL, Attempts: c.attempts, Err: err}
}

func (c *call) do(parent context.Context) outbox.Result {
	s, ep, d := c.s, c.ep, c.d
	ctx, cancel := context.WithTimeout(parent, ep.timeout)
	defer cancel()

	var body any // untyped nil: no body at all (not a chunked empty one)
	if len(d.Payload) > 0 {
		body = d.Payload
	}
	req, err := retryablehttp.NewRequestWithContext(ctx, c.method, ep.url, body)
	if err != nil {
		return outbox.Result{Action: outbox.ActionDead, Err: c.fail(fmt.Errorf("%w: %v", ErrInvalidRequest, stripURLError(err)))}
	}
	c.setHeaders(req.Header)
	injectTraceContext(parent, req.Header)
	c.inline = ep.streak.load() == 0 && !d.Probe
	c.start = time.Now()
	rc := &c.rc
	rc.HTTPClient = ep.client
	rc.RetryMax = s.cfg.InlineRetries
	rc.CheckRetry = c.checkRetry
	rc.Backoff = c.backoff
	rc.PrepareRetry = c.prepareRetry
	rc.ErrorHandler = retryablehttp.PassthroughErrorHandler
	resp, err := rc.Do(req)
	if err != nil {
		if resp != nil {
			resp.Body.Close()
		}
		r := c.transportFailure(parent, ctx, err)
		if parent.Err() == nil && retryOrThrottle(r.Action) {
			c.countFailure()
		}
		return r
	}
	r := c.classify(resp)
	if unavailable(r.Status) && retryOrThrottle(r.Action) {
		c.countFailure()
	} else {
		ep.streak.reset()
	}
	return r
}

// unavailable reports whether a status says that the receiver is not
// there to answer (a gateway's 502 or 504, or 503): it counts in the
// endpoint's streak as no answer does. Any other answer shows the
// receiver is up, whatever it says.
func unavailable(status int) bool {
	switch status {
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// countFailure counts this call's failure in the endpoint's streak, once.
func (c *call) countFailure() {
	if !c.counted {
		c.mine = c.ep.streak.fail()
		c.counted = true
	}
}

// mayRetryInline counts the failed attempt just seen in the endpoint's
// streak (once per call, as soon as it is seen, so that concurrent calls
// see it) and reports whether the endpoint has not been failing: its streak
// was zero when this call started and no other call has failed since. Of
// many calls that meet a dead endpoint at once, only the first to fail
// retries inline.
func (c *call) mayRetryInline() bool {
	if !c.inline {
		c.countFailure()
		return false
	}
	if !c.counted || c.ep.streak.load() == 0 {
		// First failure of this call, or a success since its last one
		// set the streak back to zero.
		c.counted = false
		c.countFailure()
		return c.mine == 1
	}
	return c.mine == 1 && c.ep.streak.load() == 1
}

// setHeaders fills h: the event's headers, then the endpoint's (which win),
// then the defaults and the headers the sink owns.
func (c *call) setHeaders(h http.Header) {
	for k, v := range c.d.Headers {
		h.Set(k, v)
	}
	for k, vs := range c.ep.headers {
		h[k] = vs
	}
	if len(c.d.Payload) > 0 && h.Get("Content-Type") == "" {
		h["Content-Type"] = jsonContentType
	}
	if h.Get("User-Agent") == "" {
		h["User-Agent"] = c.s.userAgent
	}
	// Header value slices are shared between keys and requests: nothing
	// writes to them (a RoundTripper must not change its request).
	id := []string{c.d.ID}
	h["Idempotency-Key"] = id
	h["Webhook-Id"] = id
	c.sign(h)
}

var jsonContentType = []string{"application/json"}

// sign sets webhook-timestamp to now and, with secrets, webhook-signature.
func (c *call) sign(h http.Header) {
	now := c.s.cfg.Now()
	c.ts = now.Unix()
	h["Webhook-Timestamp"] = []string{strconv.FormatInt(c.ts, 10)}
	sig := ""
	if len(c.ep.keys) > 0 {
		sig = signature(c.ep.keys, c.d.ID, c.ts, c.d.Payload, now)
	}
	if sig != "" {
		h["Webhook-Signature"] = []string{sig}
	} else {
		delete(h, "Webhook-Signature") // an event's stale one would not verify
	}
}

// prepareRetry re-signs an inline retry when the second has changed, so the
// timestamp receivers check stays fresh.
func (c *call) prepareRetry(req *http.Request) error {
	if c.s.cfg.Now().Unix() != c.ts {
		// The previous attempt's request shares this header map.
		req.Header = req.Header.Clone()
		c.sign(req.Header)
	}
	return nil
}

// checkRetry is the retryablehttp.CheckRetry of this call: transport failures
// and 502/503/504 only, while the policy would retry or throttle them, the
// endpoint has not been failing (mayRetryInline), the retries and the budget
// last, and a Retry-After fits in the budget.
func (c *call) checkRetry(ctx context.Context, resp *http.Response, err error) (bool, error) {
	c.attempts++
	if ctx.Err() != nil || c.attempts > c.s.cfg.InlineRetries {
		return false, nil
	}
	var wait time.Duration
	var status int
	if err != nil {
		if !retryableTransport(err) || !retryOrThrottle(c.s.cfg.Policy.ErrorAction()) || !c.mayRetryInline() {
			return false, nil
		}
		wait = c.jitter()
	} else {
		status = resp.StatusCode
		if !unavailable(status) {
			return false, nil
		}
		if !retryOrThrottle(c.s.cfg.Policy.Action(status)) || !c.mayRetryInline() {
			return false, nil
		}
		wait = c.jitter()
		if ra, ok := parseRetryAfter(resp.Header.Get("Retry-After"), c.s.cfg.Now(), c.s.cfg.MaxRetryAfter); ok {
			wait = ra
		}
	}
	if time.Since(c.start)+wait > c.s.cfg.InlineRetryBudget {
		return false, nil
	}
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= wait {
		return false, nil
	}
	c.wait = wait
	if log := c.s.cfg.Logger; log.Enabled(ctx, slog.LevelDebug) {
		log.LogAttrs(ctx, slog.LevelDebug, "httpsink: retrying inline",
			slog.String("endpoint", c.ep.name), slog.String("url", c.ep.redactedURL),
			slog.String("id", c.d.ID), slog.Int("status", status), slog.Any("error", stripURLError(err)),
			slog.Int("attempt", c.attempts), slog.Duration("wait", wait))
	}
	return true, nil
}

// backoff is the retryablehttp.Backoff of this call: the wait checkRetry chose.
func (c *call) backoff(_, _ time.Duration, _ int, _ *http.Response) time.Duration {
	return c.wait
}

// jitter returns the wait before inline retry number c.attempts: 100ms
// doubling, with half of it random.
func (c *call) jitter() time.Duration {
	d := 100 * time.Millisecond << min(c.attempts-1, 8)
	return d/2 + rand.N(d/2+1)
}

func retryOrThrottle(a outbox.Action) bool {
	return a == outbox.ActionRetry || a == outbox.ActionThrottle
}

// retryableTransport reports whether a transport failure may pass at once:
// not a refused address and not a certificate that failed verification.
func retryableTransport(err error) bool {
	var cv *tls.CertificateVerificationError
	return !errors.Is(err, ErrBlockedAddress) && !errors.As(err, &cv)
}

// stripURLError drops the *url.Error wrapper: it repeats the URL, and its
// query string is not redacted.
func stripURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// transportFailure classifies an attempt that got no response.
func (c *call) transportFailure(parent, ctx context.Context, err error) outbox.Result {
	err = stripURLError(err)
	switch {
	case parent.Err() != nil:
		return outbox.Result{Action: outbox.ActionRetry, Err: c.fail(parent.Err())}
	case errors.Is(err, ErrBlockedAddress):
		a := outbox.ActionDead
		if c.ep.pool != nil { // a named endpoint
			a = outbox.ActionDisable
		}
		var be *BlockedAddressError
		if errors.As(err, &be) {
			err = be // the dialer's wrapping adds nothing
		}
		return outbox.Result{Action: a, Err: c.fail(err)}
	case ctx.Err() != nil:
		err = fmt.Errorf("no response within %s: %w", c.ep.timeout, context.DeadlineExceeded)
	}
	return outbox.Result{Action: c.s.cfg.Policy.ErrorAction(), Err: c.fail(err)}
}

// classify turns a response into a Result and releases the connection: the
// body is read up to MaxBodyExcerpt (kept unless the outcome is success) and
// MaxDrain more (discarded), then closed.
func (c *call) classify(resp *http.Response) outbox.Result {
	cfg := &c.s.cfg
	r := outbox.Result{Status: resp.StatusCode, Action: cfg.Policy.Action(resp.StatusCode)}
	limit := cfg.MaxDrain
	if c.d.LogResponse {
		want := c.d.ExcerptBytes
		if r.Action != outbox.ActionSuccess {
			want = max(want, cfg.MaxBodyExcerpt)
		}
		c.logResponse(&r, resp, want)
	} else if r.Action != outbox.ActionSuccess && cfg.MaxBodyExcerpt > 0 {
		buf := make([]byte, cfg.MaxBodyExcerpt)
		n, _ := io.ReadFull(resp.Body, buf)
		r.Body = strings.ToValidUTF8(string(buf[:n]), "\uFFFD")
	}
	if limit > 0 {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, limit))
	}
	resp.Body.Close()
	switch r.Action {
	case outbox.ActionRetry, outbox.ActionThrottle, outbox.ActionPark:
		if v := resp.Header.Get("Retry-After"); v != "" {
			r.RetryAfter, _ = parseRetryAfter(v, cfg.Now(), cfg.MaxRetryAfter)
		}
	}
	if log := cfg.Logger; log.Enabled(context.Background(), slog.LevelDebug) {
		log.LogAttrs(context.Background(), slog.LevelDebug, "httpsink: delivered",
			slog.String("endpoint", c.ep.name), slog.String("id", c.d.ID),
			slog.Int("status", r.Status), slog.String("action", r.Action.String()),
			slog.Int("attempts", c.attempts), slog.Duration("retry_after", r.RetryAfter),
			slog.Duration("took", time.Since(c.start)))
	}
	return r
}
