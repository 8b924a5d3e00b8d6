package httpsink

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/outboxd/outbox/outbox"
)

// Endpoint is a named delivery target. Events name it in their Destination;
// everything about how to reach it (URL, secrets, headers, limits) stays in
// the configuration, out of the events.
type Endpoint struct {
	// Name is what events use as their Destination. Required: letters,
	// digits, '.', '_' and '-', not starting with '.' (".." could not be
	// addressed in a URL path), at most 100 bytes, unique.
	Name string
	// URL is the absolute http or https URL every delivery to this endpoint
	// goes to, at most MaxURLBytes long. It may carry credentials (sent as basic authentication); they
	// and all query values are redacted in errors and logs. Required.
	URL string
	// Secrets are Standard Webhooks signing secrets ("whsec_" followed by
	// the base64 key). When set, every attempt carries a webhook-signature
	// header with one "v1,<signature>" per secret, space-separated: add the
	// new secret, let receivers switch, then remove the old one. Default: no
	// signature.
	Secrets []string
	// RetiringSecrets are secrets on their way out after a rotation: each
	// signs, after those of Secrets, until its Until time and no longer,
	// so receivers that still check the old secret keep verifying during
	// the grace period without anyone editing the endpoint again. Default:
	// none.
	RetiringSecrets []RetiringSecret
	// Timeout bounds one delivery to this endpoint: connecting, sending,
	// inline retries and reading the response: from MinTimeout to
	// MaxTimeout. Default: Config.Timeout.
	Timeout time.Duration
	// Headers are sent on every request to this endpoint: at most
	// MaxHeaders of them, of at most MaxHeaderBytes of names and values
	// together. They take
	// precedence over an event's headers of the same name (the operator's
	// configuration wins over what producers send), and cannot set the
	// headers outbox.ReservedHeader reserves: those the sink owns
	// (Idempotency-Key, webhook-id, webhook-timestamp, webhook-signature),
	// framing headers (Host, Content-Length, Transfer-Encoding, Trailer) and
	// hop-by-hop ones (Connection, Upgrade...). Their values are never logged.
	Headers map[string]string
	// MaxInFlight caps the deliveries to this endpoint at once; callers
	// beyond it wait (honouring their context). It also sizes the
	// endpoint's keep-alive pool. Default 0: no cap here (the outbox's
	// concurrency applies) and a pool of Config.PoolSize.
	MaxInFlight int
	// AllowPrivate turns the dial-time address guard off for this endpoint,
	// for receivers on private, loopback or link-local addresses.
	// Default false.
	AllowPrivate bool
}

// RetiringSecret is a signing secret that stops signing at Until (see
// Endpoint.RetiringSecrets).
type RetiringSecret struct {
	// Secret is a Standard Webhooks secret ("whsec_" and the base64 key).
	Secret string
	// Until is when the secret stops signing. Required.
	Until time.Time
}

// LogValue implements slog.LogValuer: it shows the endpoint with its URL
// redacted, the number of secrets and the header names, never their values.
func (e Endpoint) LogValue() slog.Value {
	names := make([]string, 0, len(e.Headers))
	for k := range e.Headers {
		names = append(names, http.CanonicalHeaderKey(k))
	}
	slices.Sort(names)
	return slog.GroupValue(
		slog.String("name", e.Name),
		slog.String("url", RedactURL(e.URL)),
		slog.Int("secrets", len(e.Secrets)),
		slog.Int("retiring_secrets", len(e.RetiringSecrets)),
		slog.Any("headers", names),
		slog.Duration("timeout", e.Timeout),
		slog.Int("max_in_flight", e.MaxInFlight),
		slog.Bool("allow_private", e.AllowPrivate),
	)
}

// String returns the endpoint as LogValue shows it.
func (e Endpoint) String() string {
	return e.LogValue().String()
}

// Config configures a Sink. Every field's zero value means its documented
// default.
type Config struct {
	// Endpoints are the named endpoints. Default: none.
	Endpoints []Endpoint
	// AllowRawURLs lets events name an absolute http or https URL as their
	// Destination. Such deliveries carry no signature and no extra headers,
	// and each scheme://host:port is its own endpoint. Default false.
	AllowRawURLs bool
	// AllowPrivateNetworks turns the dial-time address guard off for every
	// destination. Default false: connections to private (RFC 1918, unique
	// local), loopback, link-local, unspecified, multicast, carrier-grade
	// NAT, cloud metadata and other non-public addresses are refused, IPv4
	// and IPv6 alike, including IPv4-mapped and NAT64 forms.
	AllowPrivateNetworks bool
	// AllowedNetworks are address ranges the guard lets through even though
	// they are not public, e.g. 10.1.2.0/24 for an internal receiver.
	// Default: none.
	AllowedNetworks []netip.Prefix
	// Policy is the status policy table. Default: DefaultPolicy().
	Policy Policy
	// Timeout bounds one delivery (see Endpoint.Timeout): from MinTimeout
	// to MaxTimeout. Default 30s.
	Timeout time.Duration
	// MaxRetryAfter caps the wait a receiver can ask for with Retry-After.
	// Default 1h.
	MaxRetryAfter time.Duration
	// InlineRetries is how many times a delivery is retried inside one
	// Deliver call after a transport failure or a 502, 503 or 504 (when the
	// policy retries or throttles those), before the outcome goes back to
	// the outbox. Never for other statuses. Default 2; negative: none.
	//
	// Only an endpoint that has not been failing is retried inline: the
	// sink keeps, per endpoint (a configured endpoint's name, a raw URL's
	// scheme://host:port), the number of deliveries in a row that got no
	// answer (a transport failure, a timeout) or a retried 502, 503 or 504,
	// set back to zero by any other answer: a receiver that answers 500 or
	// 429 is up. A delivery retries inline only if that
	// streak was zero when it started and no other delivery to the endpoint
	// has failed since, checked before each retry: of many deliveries that
	// meet a dead endpoint at once, the first to fail retries, the others
	// make one request each. Every delivery that ends in a failure returns
	// its own Retry (or Throttle) result, so the outbox's circuit breaker
	// counts each of them. A breaker's probe (outbox.Delivery.Probe) is
	// never retried inline.
	InlineRetries int
	// InlineRetryBudget is the time after the first request within which an
	// inline retry may still start (its wait included); a Retry-After longer
	// than what is left goes back to the outbox instead. Default 2s.
	InlineRetryBudget time.Duration
	// PoolSize is the number of idle keep-alive connections kept per host.
	// Set it to the outbox's delivery concurrency so that connections are
	// reused under load. Default 64.
	PoolSize int
	// MaxBodyExcerpt is how many bytes of a failed response's body are kept
	// in Result.Body. Default 1024.
	MaxBodyExcerpt int
	// MaxDrain is how many bytes of a response body are read (and thrown
	// away) so that its connection can be reused; a longer body closes the
	// connection instead. Default 64 KiB.
	MaxDrain int64
	// FollowRedirects follows up to 10 redirects (the guard still checks
	// every address). Default false: a 3xx is an outcome of its own, dead
	// by default.
	FollowRedirects bool
	// UserAgent is sent unless the event or endpoint headers set one.
	// Default "outboxd-httpsink".
	UserAgent string
	// Logger receives debug records of inline retries and outcomes. URLs
	// are redacted; header values and secrets are never logged. Default:
	// discard.
	Logger *slog.Logger
	// Now is the clock for webhook-timestamp and Retry-After dates.
	// Default time.Now.
	Now func() time.Time
}

// Defaults of Config.
const (
	DefaultTimeout           = 30 * time.Second
	DefaultMaxRetryAfter     = time.Hour
	DefaultInlineRetries     = 2
	DefaultInlineRetryBudget = 2 * time.Second
	DefaultPoolSize          = 64
	DefaultMaxBodyExcerpt    = 1024
	DefaultMaxDrain          = 64 << 10
	DefaultUserAgent         = "outboxd-httpsink"
)

// Limits of an endpoint's definition, checked by New, PutEndpoint and
// CheckEndpoint. Every delivery carries the endpoint's headers and URL, and
// receivers refuse request headers over 8 to 64 KiB; a timeout under a
// second fails receivers that are merely slow, and one over a quarter of an
// hour holds a delivery slot long after anyone waits for its answer.
const (
	// MaxHeaders is how many Endpoint.Headers an endpoint may have.
	MaxHeaders = 64
	// MaxHeaderBytes bounds the bytes of Endpoint.Headers' names and
	// values together.
	MaxHeaderBytes = 8 << 10
	// MaxURLBytes bounds the length of Endpoint.URL.
	MaxURLBytes = 2 << 10
	// MinTimeout and MaxTimeout bound Endpoint.Timeout (when set) and
	// Config.Timeout.
	MinTimeout = time.Second
	MaxTimeout = 15 * time.Minute
)

// withDefaults returns a copy of c with every zero field set to its default.
func (c Config) withDefaults() Config {
	c.Policy = c.Policy.orDefault()
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.MaxRetryAfter == 0 {
		c.MaxRetryAfter = DefaultMaxRetryAfter
	}
	if c.InlineRetries == 0 {
		c.InlineRetries = DefaultInlineRetries
	}
	if c.InlineRetries < 0 {
		c.InlineRetries = 0
	}
	if c.InlineRetryBudget == 0 {
		c.InlineRetryBudget = DefaultInlineRetryBudget
	}
	if c.PoolSize == 0 {
		c.PoolSize = DefaultPoolSize
	}
	if c.MaxBodyExcerpt == 0 {
		c.MaxBodyExcerpt = DefaultMaxBodyExcerpt
	}
	if c.MaxDrain == 0 {
		c.MaxDrain = DefaultMaxDrain
	}
	if c.UserAgent == "" {
		c.UserAgent = DefaultUserAgent
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// validate checks c after withDefaults.
func (c *Config) validate() error {
	neg := func(field string, bad bool) error {
		if bad {
			return &ConfigError{Field: field, Reason: "must not be negative"}
		}
		return nil
	}
	if reason := checkTimeout(c.Timeout); reason != "" {
		return &ConfigError{Field: "Timeout", Reason: reason}
	}
	for _, err := range []error{
		neg("MaxRetryAfter", c.MaxRetryAfter < 0),
		neg("InlineRetryBudget", c.InlineRetryBudget < 0),
		neg("PoolSize", c.PoolSize < 0),
		neg("MaxBodyExcerpt", c.MaxBodyExcerpt < 0),
		neg("MaxDrain", c.MaxDrain < 0),
	} {
		if err != nil {
			return err
		}
	}
	if err := checkHeaderValue(c.UserAgent); err != "" {
		return &ConfigError{Field: "UserAgent", Reason: err}
	}
	for i, p := range c.AllowedNetworks {
		if !p.IsValid() {
			return &ConfigError{Field: fmt.Sprintf("AllowedNetworks[%d]", i), Reason: "not a valid prefix"}
		}
	}
	seen := make(map[string]int, len(c.Endpoints))
	for i, e := range c.Endpoints {
		f := fmt.Sprintf("Endpoints[%d].", i)
		if err := c.checkEndpoint(f, e); err != nil {
			return err
		}
		if j, dup := seen[e.Name]; dup {
			return &ConfigError{Field: f + "Name", Reason: fmt.Sprintf("%q is already the name of Endpoints[%d]", e.Name, j)}
		}
		seen[e.Name] = i
	}
	return nil
}

// checkEndpoint validates one endpoint against c (after withDefaults); the
// fields its errors name start with prefix ("Endpoints[2]." for New, "" for
// PutEndpoint).
func (c *Config) checkEndpoint(prefix string, e Endpoint) error {
	if reason := checkName(e.Name); reason != "" {
		return &ConfigError{Field: prefix + "Name", Reason: reason}
	}
	if len(e.URL) > MaxURLBytes {
		return &ConfigError{Field: prefix + "URL", Reason: fmt.Sprintf("%d bytes long; at most %d", len(e.URL), MaxURLBytes)}
	}
	u, err := parseHTTPURL(e.URL)
	if err != nil {
		return &ConfigError{Field: prefix + "URL", Reason: err.Error()}
	}
	if !e.AllowPrivate && !c.AllowPrivateNetworks {
		if err := (&guard{allowed: c.AllowedNetworks}).checkHost(u.Hostname()); err != nil {
			return &ConfigError{Field: prefix + "URL", Reason: err.Error(), Err: err}
		}
	}
	for j, s := range e.Secrets {
		if _, reason := decodeSecret(s); reason != "" {
			return &ConfigError{Field: fmt.Sprintf("%sSecrets[%d]", prefix, j), Reason: reason}
		}
	}
	for j, s := range e.RetiringSecrets {
		if _, reason := decodeSecret(s.Secret); reason != "" {
			return &ConfigError{Field: fmt.Sprintf("%sRetiringSecrets[%d].Secret", prefix, j), Reason: reason}
		}
		if s.Until.IsZero() {
			return &ConfigError{Field: fmt.Sprintf("%sRetiringSecrets[%d].Until", prefix, j), Reason: "required: when the secret stops signing"}
		}
	}
	if reason := checkTimeout(e.Timeout); e.Timeout != 0 && reason != "" {
		return &ConfigError{Field: prefix + "Timeout", Reason: reason}
	}
	if e.MaxInFlight < 0 {
		return &ConfigError{Field: prefix + "MaxInFlight", Reason: "must not be negative"}
	}
	return checkHeaders(prefix, e.Headers)
}

// checkTimeout returns why d is not a timeout from MinTimeout to
// MaxTimeout, or "".
func checkTimeout(d time.Duration) string {
	switch {
	case d < 0:
		return "must not be negative"
	case d < MinTimeout || d > MaxTimeout:
		return fmt.Sprintf("%s is out of range: from %s to %s", d, MinTimeout, MaxTimeout)
	}
	return ""
}

// checkHeaders validates an endpoint's headers, in time linear in their
// size: their number and bytes first, then each name and value.
func checkHeaders(prefix string, headers map[string]string) error {
	if len(headers) > MaxHeaders {
		return &ConfigError{Field: prefix + "Headers", Reason: fmt.Sprintf("%d headers; at most %d", len(headers), MaxHeaders)}
	}
	size := 0
	for k, v := range headers {
		size += len(k) + len(v)
	}
	if size > MaxHeaderBytes {
		return &ConfigError{Field: prefix + "Headers", Reason: fmt.Sprintf("%d bytes of names and values; at most %d", size, MaxHeaderBytes)}
	}
	for k, v := range headers {
		reason := checkHeaderName(k)
		if why, reserved := outbox.ReservedHeader(k); reason == "" && reserved {
			reason = "cannot be configured: it " + why
		}
		if reason == "" {
			reason = checkHeaderValue(v)
		}
		if reason != "" {
			return &ConfigError{Field: fmt.Sprintf("%sHeaders[%q]", prefix, k), Reason: reason}
		}
	}
	return nil
}

// checkName validates an endpoint name.
func checkName(s string) string {
	if s == "" {
		return "required"
	}
	if len(s) > 100 {
		return "longer than 100 bytes"
	}
	if s[0] == '.' {
		return fmt.Sprintf("%q starts with a dot: a name of dots or starting with one cannot be addressed in a URL path", s)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Sprintf("%q: only letters, digits, '.', '_' and '-' are allowed", s)
		}
	}
	return ""
}

// errBadPort is the reason given for a URL whose port is not a number from
// 1 to 65535: url.Parse lets numbers out of that range through, and no
// connection can be made to them.
var errBadPort = errors.New("the port must be a number from 1 to 65535")

// parseHTTPURL parses an absolute http or https URL with a host. Errors never
// quote the URL (it may hold credentials).
func parseHTTPURL(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil {
		if strings.Contains(err.Error(), "invalid port") {
			return nil, errBadPort
		}
		return nil, fmt.Errorf("not a URL")
	}
	switch strings.ToLower(u.Scheme) {
	case "http", "https":
	case "":
		return nil, fmt.Errorf("not an absolute URL")
	default:
		return nil, fmt.Errorf("scheme %q is not http or https", u.Scheme)
	}
	if u.Opaque != "" || u.Host == "" || u.Hostname() == "" {
		return nil, fmt.Errorf("no host")
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return nil, errBadPort
		}
	}
	return u, nil
}

// checkHeaderName validates a header field name (an RFC 9110 token).
func checkHeaderName(s string) string {
	if s == "" {
		return "empty header name"
	}
	if !outbox.ValidHeaderName(s) {
		return "header name has a character that is not allowed"
	}
	return ""
}

// checkHeaderValue validates a header field value: no control characters
// other than tab. The value itself is never quoted (it may be a secret).
func checkHeaderValue(s string) string {
	if !outbox.ValidHeaderValue(s) {
		return "header value has a control character"
	}
	return ""
}
