package httpapi

import (
	"crypto/sha256"
	"crypto/subtle"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"

	"github.com/outboxd/outbox/outbox/authguard"
)

// Default limits of Config.
const (
	// DefaultMaxBodyBytes is the default limit of a request body: 5 MiB.
	DefaultMaxBodyBytes = 5 << 20
	// DefaultMaxPayloadBytes is the default limit of one event's payload: 1 MiB.
	DefaultMaxPayloadBytes = 1 << 20
	// DefaultMaxBatch is the default limit of events in one request: 1,000.
	DefaultMaxBatch = 1000
	// DefaultMaxIDBytes is the default limit of an event ID: 200 bytes.
	DefaultMaxIDBytes = 200
	// DefaultMaxDeliveriesSetting is the setting a 413 for too many
	// deliveries names when Config.MaxDeliveriesSetting is empty.
	DefaultMaxDeliveriesSetting = "outbox.Config.MaxDeliveriesPerCall"
	// DefaultListLimit is the page size of GET /v1/events without limit=.
	DefaultListLimit = 100
	// MaxListLimit is the largest page size GET /v1/events accepts.
	MaxListLimit = 1000
	// DefaultMaxBodyMemory is the default budget of request bodies in
	// memory at once: 64 MiB.
	DefaultMaxBodyMemory = 64 << 20
	// DefaultReadBodyTimeout is the default time a client has to send a
	// request body: 30 seconds.
	DefaultReadBodyTimeout = 30 * time.Second
)

// Config configures the handler. The zero value is usable: every field
// documents its default.
type Config struct {
	// Token, when set, is the bearer token every request must carry
	// ("Authorization: Bearer TOKEN"); it is compared in constant time.
	// Default: empty, no authentication (bind to loopback then).
	Token string
	// Guard throttles wrong tokens: their answers are delayed more with
	// each consecutive one from a client address, the right token is
	// answered at once (see package authguard). Share one Guard with the
	// console so that guesses at either count for both. Default: a Guard
	// with authguard's defaults, logging to Logger.
	Guard *authguard.Guard
	// MaxBodyBytes bounds a request body; larger bodies are answered 413.
	// Default DefaultMaxBodyBytes (5 MiB).
	MaxBodyBytes int64
	// MaxPayloadBytes bounds one event's payload (after base64 decoding);
	// larger payloads are answered 413. Default DefaultMaxPayloadBytes (1 MiB).
	MaxPayloadBytes int
	// MaxBatch bounds the events of one POST /v1/events; larger batches are
	// answered 413. Default DefaultMaxBatch (1,000).
	MaxBatch int
	// MaxIDBytes bounds a caller-given event ID. Default DefaultMaxIDBytes (200).
	MaxIDBytes int
	// MaxDeliveriesSetting names, in the 413 answered to a POST /v1/events
	// whose events would create more deliveries than the Backend allows in
	// one call (outbox.ErrTooManyDeliveries), the setting that raises that
	// bound, as the operator spells it. Default
	// DefaultMaxDeliveriesSetting; outboxd names its
	// limits.max_deliveries_per_request.
	MaxDeliveriesSetting string
	// MaxBodyMemory bounds the bytes of request bodies held in memory at
	// once, over all requests. A body takes memory as its bytes arrive (at
	// most twice what it received, at least 4 KiB), not as its
	// Content-Length announces, and holds it until its request is answered;
	// a request whose body would go over the budget is answered 503 with
	// "Retry-After: 1", storing nothing. Decoding and storing a body takes
	// a few times its size again, so the process's memory for request
	// bodies is a small multiple of this. Values below MaxBodyBytes are
	// raised to it. Default DefaultMaxBodyMemory (64 MiB).
	MaxBodyMemory int64
	// ReadBodyTimeout bounds the time a client has to send a request body,
	// from when the handler starts reading it: the deadline is fixed then,
	// so a client trickling bytes cannot stretch it. A body not in by then
	// is answered 408. Default DefaultReadBodyTimeout (30s).
	ReadBodyTimeout time.Duration
	// Logger receives server-side errors (5xx). Default: discard.
	Logger *slog.Logger
	// ExtraStats, when set, is called on every GET /v1/stats, and its
	// entries are added to the answer as top-level fields next to the
	// Backend's Stats (pending, dead, in_flight, delivered_total,
	// failed_total, oldest_pending_age_seconds), in the order of their keys.
	// An entry whose key is one of those fields is ignored (the Backend's
	// count stands), and so is one whose value does not encode as JSON
	// (logged). outboxd uses it for the state of its Kafka group. Default:
	// none.
	ExtraStats func() map[string]any
	// TracerProvider makes the tracer of the ingest span, one per POST
	// /v1/events, a child of the request's W3C traceparent; the events of
	// the request are stored with its context (see the package doc,
	// "Tracing"). Default: otel.GetTracerProvider(), the global provider,
	// a no-op until the application sets one.
	TracerProvider trace.TracerProvider
	// Endpoints, when set, manages named endpoints at run time (POST, PUT
	// and DELETE /v1/endpoints/{name}, POST
	// /v1/endpoints/{name}/rotate-secret) and adds each endpoint's
	// definition to GET /v1/endpoints. Default: none; those calls are
	// answered 409.
	Endpoints EndpointManager
}

// withDefaults returns c with every zero or negative field set to its default.
func (c Config) withDefaults() Config {
	if c.MaxBodyBytes <= 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.MaxPayloadBytes <= 0 {
		c.MaxPayloadBytes = DefaultMaxPayloadBytes
	}
	if c.MaxBatch <= 0 {
		c.MaxBatch = DefaultMaxBatch
	}
	if c.MaxIDBytes <= 0 {
		c.MaxIDBytes = DefaultMaxIDBytes
	}
	if c.MaxDeliveriesSetting == "" {
		c.MaxDeliveriesSetting = DefaultMaxDeliveriesSetting
	}
	if c.MaxBodyMemory <= 0 {
		c.MaxBodyMemory = DefaultMaxBodyMemory
	}
	c.MaxBodyMemory = max(c.MaxBodyMemory, c.MaxBodyBytes)
	if c.ReadBodyTimeout <= 0 {
		c.ReadBodyTimeout = DefaultReadBodyTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.TracerProvider == nil {
		c.TracerProvider = otel.GetTracerProvider()
	}
	if c.Guard == nil {
		c.Guard = authguard.New(authguard.Config{Logger: c.Logger})
	}
	return c
}

// handler serves the API of one Backend.
type handler struct {
	o        Backend
	cfg      Config
	tokenSum [sha256.Size]byte // sha256 of cfg.Token, compared in constant time
	mux      *http.ServeMux
	patterns []string   // every pattern registered on mux, in order
	budget   bodyBudget // request bodies in memory, up to cfg.MaxBodyMemory
	tracer   trace.Tracer
}

// New returns the API handler for o: an *outbox.Outbox, or any Backend
// that serves several as one (package outbox/union). Mount it at the root of a mux (its
// routes start with /v1/); every path it does not know is answered with a
// JSON 404, so mount it as the fallback ("/") or strip nothing in front of it.
func New(o Backend, cfg Config) http.Handler {
	h := &handler{o: o, cfg: cfg.withDefaults()}
	h.budget.max = h.cfg.MaxBodyMemory
	h.tracer = h.cfg.TracerProvider.Tracer(TracerName)
	if h.cfg.Token != "" {
		h.tokenSum = sha256.Sum256([]byte(h.cfg.Token))
	}
	h.mux, h.patterns = h.mount(apiRoutes)
	return h
}

// ServeHTTP checks the bearer token, then routes the request. The OpenAPI
// document is served without the token.
func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h.cfg.Token != "" && r.URL.Path != OpenAPIPath && !h.checkToken(w, r) {
		return
	}
	h.mux.ServeHTTP(w, r)
}

// Protect returns next behind cfg.Token, checked as the API checks it: a
// request without the right bearer token is answered 401 with a JSON
// error, and wrong tokens are delayed by cfg.Guard. Without a token it
// returns next. outboxd puts its /metrics behind it.
func Protect(next http.Handler, cfg Config) http.Handler {
	if cfg.Token == "" {
		return next
	}
	h := &handler{cfg: cfg.withDefaults(), tokenSum: sha256.Sum256([]byte(cfg.Token))}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h.checkToken(w, r) {
			next.ServeHTTP(w, r)
		}
	})
}

// checkToken answers 401 and returns false unless r carries the token.
func (h *handler) checkToken(w http.ResponseWriter, r *http.Request) bool {
	msg, ok := h.authorized(r)
	if ok {
		return true
	}
	w.Header().Set("WWW-Authenticate", `Bearer realm="outboxd"`)
	if msg == throttledMsg {
		w.Header().Set("Retry-After", "1")
	}
	writeError(w, http.StatusUnauthorized, msg)
	return false
}

// throttledMsg is the 401 of a request not compared because its client
// address sent too many wrong tokens at once.
const throttledMsg = "too many wrong tokens from this address: try again in a few seconds"

// authorized compares the request's bearer token with the configured one in
// constant time (hashes of equal length, so not even the length leaks),
// through the Guard that delays wrong ones.
func (h *handler) authorized(r *http.Request) (string, bool) {
	auth := r.Header.Get("Authorization")
	if auth == "" {
		return "missing bearer token: send Authorization: Bearer TOKEN", false
	}
	scheme, tok, found := strings.Cut(auth, " ")
	if !found || !strings.EqualFold(scheme, "Bearer") {
		return "Authorization header must use the Bearer scheme", false
	}
	switch h.cfg.Guard.Check(r, func() bool {
		sum := sha256.Sum256([]byte(strings.TrimSpace(tok)))
		return subtle.ConstantTimeCompare(sum[:], h.tokenSum[:]) == 1
	}) {
	case authguard.Allowed:
		return "", true
	case authguard.Throttled:
		return throttledMsg, false
	}
	return "invalid bearer token", false
}

// NotFound returns a handler answering every request with a JSON 404 that
// names the method and path. The sidecar uses it for routes outside the API.
func NotFound() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "no route for "+r.Method+" "+r.URL.Path)
	})
}

// MethodNotAllowed returns a handler answering with a JSON 405 and an Allow
// header listing allowed (GET implies HEAD).
func MethodNotAllowed(allowed ...string) http.Handler {
	list := make([]string, 0, len(allowed)+1)
	for _, m := range allowed {
		list = append(list, m)
		if m == http.MethodGet {
			list = append(list, http.MethodHead)
		}
	}
	allow := strings.Join(list, ", ")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", allow)
		writeError(w, http.StatusMethodNotAllowed,
			"method "+r.Method+" not allowed on "+r.URL.Path+" (allowed: "+allow+")")
	})
}
