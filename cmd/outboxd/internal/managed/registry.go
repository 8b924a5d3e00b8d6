package managed

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/outboxd/outbox/httpsink"
	"github.com/outboxd/outbox/outbox"
	"github.com/outboxd/outbox/outbox/httpapi"
)

// Limits of what the API may set.
const (
	// MaxRotationGrace bounds how long a rotated secret keeps signing: a
	// secret someone forgot to retire is a secret that can still sign.
	MaxRotationGrace = 30 * 24 * time.Hour
	// MaxRetiringSecrets is how many rotated secrets may sign at once
	// (besides the current one); a rotation beyond it retires the oldest
	// at once.
	MaxRetiringSecrets = 4
	// MaxTopics bounds the topics and patterns of one endpoint.
	MaxTopics = 100
	// MaxFilter bounds the headers of one endpoint's filter.
	MaxFilter = 20
)

type (
	spec     = httpapi.EndpointSpec
	retiring = httpsink.RetiringSecret
)

// endpoint is a named endpoint as the registry knows it.
type endpoint struct {
	name      string
	spec      spec
	managed   bool
	secret    string     // managed: the current signing secret
	secrets   int        // static: how many secrets it signs with
	retiring  []retiring // managed: rotated secrets still signing
	createdAt time.Time
	updatedAt time.Time
}

// sinkEndpoint returns the sink's definition of a managed endpoint.
func (e *endpoint) sinkEndpoint() httpsink.Endpoint {
	return httpsink.Endpoint{
		Name: e.name, URL: e.spec.URL, Secrets: []string{e.secret}, RetiringSecrets: slices.Clone(e.retiring),
		Timeout: e.spec.Timeout, Headers: e.spec.Headers, MaxInFlight: e.spec.MaxInFlight,
	}
}

// subscription returns the endpoint's subscription; ok is false when it
// subscribes to nothing.
func (e *endpoint) subscription() (outbox.Subscription, bool) {
	if len(e.spec.Topics) == 0 {
		return outbox.Subscription{}, false
	}
	return outbox.Subscription{Endpoint: e.name, Topics: e.spec.Topics, Headers: e.spec.Filter}, true
}

// definition returns what GET /v1/endpoints shows of it.
func (e *endpoint) definition(now time.Time) httpapi.EndpointDefinition {
	d := httpapi.EndpointDefinition{
		URL: httpsink.RedactURL(e.spec.URL), Topics: slices.Clone(e.spec.Topics), Filter: maps.Clone(e.spec.Filter),
		Timeout: e.spec.Timeout, MaxInFlight: e.spec.MaxInFlight, Managed: e.managed,
		Signed: e.secret != "" || e.secrets > 0, CreatedAt: e.createdAt, UpdatedAt: e.updatedAt,
	}
	for k := range e.spec.Headers {
		d.HeaderNames = append(d.HeaderNames, http.CanonicalHeaderKey(k))
	}
	slices.Sort(d.HeaderNames)
	for _, r := range e.retiring {
		if now.Before(r.Until) && r.Until.After(d.PreviousSecretValidUntil) {
			d.PreviousSecretValidUntil = r.Until
		}
	}
	return d
}

// limit returns the endpoint's rate limit; ok is false when it has none.
func (e *endpoint) limit() (outbox.RateLimit, bool) {
	if e.spec.Rate == 0 {
		return outbox.RateLimit{}, false
	}
	return outbox.RateLimit{PerSecond: e.spec.Rate, Burst: max(1, e.spec.Burst)}, true
}

// Static is an endpoint of the settings, as the registry describes it.
type Static struct {
	// Name, URL, Topics, Filter, Headers, Timeout and MaxInFlight as in
	// the settings.
	Name        string
	URL         string
	Topics      []string
	Filter      map[string]string
	Headers     map[string]string
	Timeout     time.Duration
	MaxInFlight int
	// Secrets is how many signing secrets it has.
	Secrets int
}

// Config is what a Registry works on.
type Config struct {
	// Outbox is the outbox whose file stores the managed endpoints and
	// whose subscriptions they join. Required.
	Outbox *outbox.Outbox
	// Sink delivers to them. Required.
	Sink *httpsink.Sink
	// Limits is the outbox's Config.RateLimits. Required (an empty set
	// when no endpoint has a limit).
	Limits *outbox.RateLimits
	// Static are the endpoints of the settings; their subscriptions are
	// the outbox's Config.Subscriptions.
	Static []Static
	// Logger gets a warning for each stored endpoint the settings now
	// define. Default: discard.
	Logger *slog.Logger
	// Now is the clock of creation times and rotation ends. Default
	// time.Now.
	Now func() time.Time
}

// Registry is the set of named endpoints of one outboxd: the static ones
// and those managed through the API. It implements
// httpapi.EndpointManager; it is safe for concurrent use, and changes are
// made one at a time.
type Registry struct {
	cfg        Config
	fixed      string // non-empty: changes are refused with this reason
	grp        *group // non-nil: the endpoints of a Kafka group
	staticSubs []outbox.Subscription

	mu  sync.Mutex
	eps map[string]*endpoint
	// managed are the names of the managed endpoints of eps, sorted: the
	// order of their subscriptions, kept without sorting every name on
	// each change.
	managed []string
}

var (
	_ httpapi.EndpointManager          = (*Registry)(nil)
	_ httpapi.EndpointDefinitionLookup = (*Registry)(nil)
)

// Open loads the managed endpoints stored in the outbox's file and applies
// them to the sink, the rate limits and the outbox's subscriptions. Call
// it after outbox.Open and before Outbox.Start, so that no delivery starts
// without them. A stored endpoint that the settings now define is dropped
// from the file (the settings win; logged); one that cannot be read is an
// error naming it.
func Open(ctx context.Context, cfg Config) (*Registry, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	r := newRegistry(cfg)
	r.staticSubs = cfg.Outbox.Subscriptions()
	var loaded []*endpoint
	err := cfg.Outbox.View(ctx, func(tx *outbox.ViewTx) error {
		b := tx.Bucket(bucket)
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			e, err := decode(string(k), v)
			if err != nil {
				return fmt.Errorf("managed endpoint %q in the database file: %w", k, err)
			}
			loaded = append(loaded, e)
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	var shadowed []string
	for _, e := range loaded {
		if _, static := r.eps[e.name]; static {
			cfg.Logger.Warn("an endpoint created through the API is now defined in the settings: the settings' definition is used, and the stored one is deleted",
				"endpoint", e.name)
			shadowed = append(shadowed, e.name)
			continue
		}
		if err := r.apply(e); err != nil {
			return nil, fmt.Errorf("managed endpoint %q in the database file: %w", e.name, err)
		}
		r.putLocked(e)
	}
	if len(shadowed) > 0 {
		err := cfg.Outbox.Update(ctx, func(tx *outbox.Tx) error {
			b := tx.Bucket(bucket)
			for _, name := range shadowed {
				if err := b.Delete([]byte(name)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("deleting the stored endpoints the settings define: %w", err)
		}
	}
	if err := cfg.Outbox.SetSubscriptions(ctx, r.subscriptionsLocked()); err != nil {
		return nil, fmt.Errorf("subscriptions of the managed endpoints: %w", err)
	}
	return r, nil
}

// Fixed returns a registry of the static endpoints only, which refuses
// every change with ErrEndpointsFixed and reason (outboxd shipping its
// changelog to Kafka without a group, where nothing shares them).
func Fixed(static []Static, reason string) *Registry {
	r := newRegistry(Config{Static: static, Now: time.Now})
	r.fixed = reason
	return r
}

func newRegistry(cfg Config) *Registry {
	r := &Registry{cfg: cfg, eps: make(map[string]*endpoint, len(cfg.Static))}
	for _, s := range cfg.Static {
		r.eps[s.Name] = &endpoint{
			name: s.Name, secrets: s.Secrets,
			spec: spec{URL: s.URL, Topics: s.Topics, Filter: s.Filter, Headers: s.Headers, Timeout: s.Timeout, MaxInFlight: s.MaxInFlight},
		}
	}
	return r
}

// EndpointDefinitions implements httpapi.EndpointManager.
func (r *Registry) EndpointDefinitions() map[string]httpapi.EndpointDefinition {
	now := r.cfg.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]httpapi.EndpointDefinition, len(r.eps))
	for name, e := range r.eps {
		out[name] = e.definition(now)
	}
	return out
}

// EndpointDefinition implements httpapi.EndpointDefinitionLookup.
func (r *Registry) EndpointDefinition(name string) (httpapi.EndpointDefinition, bool) {
	now := r.cfg.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.eps[name]
	if !ok {
		return httpapi.EndpointDefinition{}, false
	}
	return e.definition(now), true
}

// Managed returns how many endpoints are managed through the API.
func (r *Registry) Managed() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.managed)
}

// CreateEndpoint implements httpapi.EndpointManager: it validates the
// definition, generates the endpoint's signing secret, stores it and puts
// it in force.
func (r *Registry) CreateEndpoint(ctx context.Context, name string, s httpapi.EndpointSpec) (httpapi.EndpointDefinition, string, error) {
	if r.grp != nil {
		return r.groupCreate(ctx, name, s)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.refuse(name); err != nil {
		return httpapi.EndpointDefinition{}, "", err
	}
	if _, ok := r.eps[name]; ok {
		return httpapi.EndpointDefinition{}, "", fmt.Errorf("endpoint %q exists already: replace it with PUT, or delete it first: %w", name, httpapi.ErrEndpointExists)
	}
	now := r.cfg.Now().UTC()
	e := &endpoint{name: name, spec: normalize(s), managed: true, secret: newSecret(), createdAt: now, updatedAt: now}
	if err := r.check(e); err != nil {
		return httpapi.EndpointDefinition{}, "", err
	}
	if err := r.commit(ctx, e); err != nil {
		return httpapi.EndpointDefinition{}, "", err
	}
	// An endpoint deleted under this name may have left its state (a
	// disable, a throttle, an open breaker): the new one starts afresh.
	if err := r.cfg.Outbox.EnableEndpoint(ctx, name); err != nil && !errors.Is(err, outbox.ErrNotFound) {
		return httpapi.EndpointDefinition{}, "", err
	}
	return e.definition(now), e.secret, nil
}

// ReplaceEndpoint implements httpapi.EndpointManager: the endpoint keeps
// its secrets and creation time.
func (r *Registry) ReplaceEndpoint(ctx context.Context, name string, s httpapi.EndpointSpec) (httpapi.EndpointDefinition, error) {
	if r.grp != nil {
		return r.groupReplace(ctx, name, s)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	old, err := r.managedLocked(name)
	if err != nil {
		return httpapi.EndpointDefinition{}, err
	}
	now := r.cfg.Now().UTC()
	e := &endpoint{name: name, spec: normalize(s), managed: true, secret: old.secret,
		retiring: live(old.retiring, now), createdAt: old.createdAt, updatedAt: now}
	if err := r.check(e); err != nil {
		return httpapi.EndpointDefinition{}, err
	}
	if err := r.commit(ctx, e); err != nil {
		return httpapi.EndpointDefinition{}, err
	}
	return e.definition(now), nil
}

// RotateSecret implements httpapi.EndpointManager: a new secret signs at
// once, and the previous one too until now + grace.
func (r *Registry) RotateSecret(ctx context.Context, name string, grace time.Duration) (string, time.Time, error) {
	if grace < 0 || grace > MaxRotationGrace {
		return "", time.Time{}, &outbox.ValidationError{Field: "grace", Reason: fmt.Sprintf("%s is out of range: from 0s to %s", grace, MaxRotationGrace)}
	}
	if r.grp != nil {
		return r.groupRotate(ctx, name, grace)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	old, err := r.managedLocked(name)
	if err != nil {
		return "", time.Time{}, err
	}
	e, until := rotated(old, r.cfg.Now().UTC(), grace)
	if err := r.commit(ctx, e); err != nil {
		return "", time.Time{}, err
	}
	return e.secret, until, nil
}

// rotated returns old with a new secret from now, the previous one
// signing until now + grace, and when that ends.
func rotated(old *endpoint, now time.Time, grace time.Duration) (*endpoint, time.Time) {
	until := now.Add(grace)
	e := *old
	e.secret, e.updatedAt = newSecret(), now
	e.retiring = live(old.retiring, now)
	if grace > 0 {
		e.retiring = append([]retiring{{Secret: old.secret, Until: until}}, e.retiring...)
	}
	if len(e.retiring) > MaxRetiringSecrets {
		e.retiring = e.retiring[:MaxRetiringSecrets]
	}
	return &e, until
}

// DeleteEndpoint implements httpapi.EndpointManager: see the package doc
// for the order of its steps.
func (r *Registry) DeleteEndpoint(ctx context.Context, name string) (int, error) {
	if r.grp != nil {
		return r.groupDelete(ctx, name)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	e, err := r.managedLocked(name)
	if err != nil {
		return 0, err
	}
	o := r.cfg.Outbox
	r.deleteLocked(name)
	restore := func(cause error) (int, error) {
		r.putLocked(e)
		if err := r.apply(e); err != nil {
			cause = errors.Join(cause, err)
		}
		if err := r.subscribeLocked(context.WithoutCancel(ctx), e); err != nil {
			cause = errors.Join(cause, err)
		}
		return 0, cause
	}
	if err := o.RemoveSubscriptions(ctx, name); err != nil {
		r.putLocked(e)
		return 0, err
	}
	r.cfg.Sink.RemoveEndpoint(name)
	n, err := o.DeadLetterEndpoint(ctx, name, fmt.Sprintf("endpoint %q deleted", name))
	if err != nil {
		return restore(err)
	}
	err = o.Update(ctx, func(tx *outbox.Tx) error {
		b := tx.Bucket(bucket)
		if b == nil {
			return nil
		}
		return b.Delete([]byte(name))
	})
	if err != nil {
		return restore(err)
	}
	r.cfg.Limits.Remove(name)
	return n, nil
}

// refuse returns the error for a change to name that cannot be made: in a
// fixed registry, or to a static endpoint.
func (r *Registry) refuse(name string) error {
	if r.fixed != "" {
		return fmt.Errorf("%s: %w", r.fixed, httpapi.ErrEndpointsFixed)
	}
	if e, ok := r.eps[name]; ok && !e.managed {
		return fmt.Errorf("endpoint %q is static: it is defined in the settings file, and only the settings change it: %w", name, httpapi.ErrStaticEndpoint)
	}
	return nil
}

// managedLocked returns the managed endpoint of that name, or the error
// to answer.
func (r *Registry) managedLocked(name string) (*endpoint, error) {
	if err := r.refuse(name); err != nil {
		return nil, err
	}
	e, ok := r.eps[name]
	if !ok {
		return nil, fmt.Errorf("endpoint %q: %w", name, outbox.ErrNotFound)
	}
	return e, nil
}

// commit stores e and puts it in force. r.mu must be held.
func (r *Registry) commit(ctx context.Context, e *endpoint) error {
	val := encode(e)
	err := r.cfg.Outbox.Update(ctx, func(tx *outbox.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucket)
		if err != nil {
			return err
		}
		return b.Put([]byte(e.name), val)
	})
	if err != nil {
		return err
	}
	old := r.eps[e.name]
	r.putLocked(e)
	if err := r.apply(e); err != nil {
		return err // stored: in force after a restart
	}
	if sameSubscription(old, e) {
		return nil
	}
	err = r.subscribeLocked(ctx, e)
	var ve *outbox.ValidationError
	if !errors.As(err, &ve) {
		return err
	}
	// The outbox refused the subscription for a rule of its own that check
	// does not repeat (such as the room an endpoint's name leaves for event
	// IDs): undo the change, in the file too, so that the next start does
	// not meet it, and say which field.
	if uerr := r.undo(ctx, e.name, old); uerr != nil {
		return errors.Join(err, uerr)
	}
	field := map[string]string{"endpoint": "name", "topics": "topics", "headers": "filter"}[ve.Field]
	if field == "" {
		field = ve.Field
	}
	return &outbox.ValidationError{Field: field, Reason: ve.Reason}
}

// undo puts back the definition old (nil: none) of name, stored and in
// force, after a change the outbox refused. r.mu must be held.
func (r *Registry) undo(ctx context.Context, name string, old *endpoint) error {
	err := r.cfg.Outbox.Update(context.WithoutCancel(ctx), func(tx *outbox.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucket)
		if err != nil {
			return err
		}
		if old == nil {
			return b.Delete([]byte(name))
		}
		return b.Put([]byte(name), encode(old))
	})
	if err != nil {
		return err
	}
	if old == nil {
		r.deleteLocked(name)
		r.cfg.Sink.RemoveEndpoint(name)
		r.cfg.Limits.Remove(name)
		return nil
	}
	r.putLocked(old)
	return r.apply(old)
}

// sameSubscription reports whether e, replacing old (nil: none),
// subscribes as old did, so that the outbox's subscriptions stay.
func sameSubscription(old, e *endpoint) bool {
	if old == nil {
		return len(e.spec.Topics) == 0
	}
	return slices.Equal(old.spec.Topics, e.spec.Topics) && maps.Equal(old.spec.Filter, e.spec.Filter)
}

// putLocked puts a managed endpoint in eps. r.mu must be held.
func (r *Registry) putLocked(e *endpoint) {
	if _, ok := r.eps[e.name]; !ok {
		// Loaded in name order at Open: each goes at the end.
		i, _ := slices.BinarySearch(r.managed, e.name)
		r.managed = slices.Insert(r.managed, i, e.name)
	}
	r.eps[e.name] = e
}

// deleteLocked removes a managed endpoint from eps. r.mu must be held.
func (r *Registry) deleteLocked(name string) {
	if i, ok := slices.BinarySearch(r.managed, name); ok {
		r.managed = slices.Delete(r.managed, i, i+1)
	}
	delete(r.eps, name)
}

// apply puts a managed endpoint's definition in force in the sink and the
// rate limits (not the subscriptions).
func (r *Registry) apply(e *endpoint) error {
	if err := r.cfg.Sink.PutEndpoint(e.sinkEndpoint()); err != nil {
		return err
	}
	if l, ok := e.limit(); ok {
		return r.cfg.Limits.Set(e.name, l)
	}
	r.cfg.Limits.Remove(e.name)
	return nil
}

// subscribeLocked puts e's subscription in force, or takes away the one
// its name had when e subscribes to nothing: only e's, whatever the
// number of endpoints. r.mu must be held.
func (r *Registry) subscribeLocked(ctx context.Context, e *endpoint) error {
	if s, ok := e.subscription(); ok {
		return r.cfg.Outbox.PutSubscription(ctx, s)
	}
	return r.cfg.Outbox.RemoveSubscriptions(ctx, e.name)
}

// subscriptionsLocked returns the static subscriptions and those of the
// managed endpoints, by name.
func (r *Registry) subscriptionsLocked() []outbox.Subscription {
	subs := slices.Clone(r.staticSubs)
	for _, name := range r.managed {
		if r.grp != nil {
			if _, unsealed := r.grp.unsealed[name]; unsealed {
				continue // not in force
			}
		}
		if s, ok := r.eps[name].subscription(); ok {
			subs = append(subs, s)
		}
	}
	return subs
}

// normalize returns s with empty collections as nil.
func normalize(s spec) spec {
	if len(s.Topics) == 0 {
		s.Topics = nil
	}
	if len(s.Filter) == 0 {
		s.Filter = nil
	}
	if len(s.Headers) == 0 {
		s.Headers = nil
	}
	return s
}

// check validates a managed endpoint's definition; the error is a
// *outbox.ValidationError naming the field as the API's body does.
func (r *Registry) check(e *endpoint) error {
	bad := func(field, format string, args ...any) error {
		return &outbox.ValidationError{Field: field, Reason: fmt.Sprintf(format, args...)}
	}
	s := e.spec
	if s.URL == "" {
		return bad("url", "required")
	}
	if len(s.Topics) > MaxTopics {
		return bad("topics", "%d topics; at most %d", len(s.Topics), MaxTopics)
	}
	for i, t := range s.Topics {
		f := "topics[" + strconv.Itoa(i) + "]"
		if err := outbox.ValidateTopicPattern(t); err != nil {
			return bad(f, "%q %v", t, err)
		}
		if j := slices.Index(s.Topics[:i], t); j >= 0 {
			return bad(f, "%q is topics[%d] already", t, j)
		}
	}
	if len(s.Filter) > 0 && len(s.Topics) == 0 {
		return bad("filter", "narrows a subscription: give topics too")
	}
	if len(s.Filter) > MaxFilter {
		return bad("filter", "%d headers; at most %d", len(s.Filter), MaxFilter)
	}
	for k, v := range s.Filter {
		f := "filter[" + strconv.Quote(k) + "]"
		if !outbox.ValidHeaderName(k) {
			return bad(f, "not a valid header name")
		}
		if !outbox.ValidHeaderValue(v) {
			return bad(f, "the value has a control character")
		}
	}
	switch {
	case s.Timeout < 0:
		return bad("timeout", "must not be negative, got %s", s.Timeout)
	case s.MaxInFlight < 0:
		return bad("max_in_flight", "must not be negative, got %d", s.MaxInFlight)
	case s.Rate != 0 && outbox.ValidateRate(s.Rate) != nil:
		return outbox.ValidateRate(s.Rate)
	case s.Burst < 0:
		return bad("burst", "want a whole number of at least 1, got %d", s.Burst)
	case s.Burst > 0 && s.Rate == 0:
		return bad("burst", "is set but rate is not")
	}
	err := r.cfg.Sink.CheckEndpoint(e.sinkEndpoint())
	var ce *httpsink.ConfigError
	if errors.As(err, &ce) {
		return &outbox.ValidationError{Field: apiField(ce.Field), Reason: ce.Reason}
	}
	return err
}

// apiField maps a field of httpsink.Endpoint onto the API's name of it.
func apiField(f string) string {
	for goName, apiName := range map[string]string{
		"Name": "name", "URL": "url", "Headers": "headers", "Timeout": "timeout", "MaxInFlight": "max_in_flight",
		"Secrets": "secret", "RetiringSecrets": "secret",
	} {
		if rest, ok := strings.CutPrefix(f, goName); ok && (rest == "" || rest[0] == '[' || rest[0] == '.') {
			return apiName + rest
		}
	}
	return f
}

// live returns the retiring secrets that still sign at now.
func live(rs []retiring, now time.Time) []retiring {
	var out []retiring
	for _, s := range rs {
		if now.Before(s.Until) {
			out = append(out, s)
		}
	}
	return out
}

// newSecret returns a new Standard Webhooks secret: "whsec_" and the
// base64 of 32 random bytes.
func newSecret() string {
	var key [32]byte
	_, _ = rand.Read(key[:]) // crypto/rand.Read never fails (it panics if the system's source does)
	return "whsec_" + base64.StdEncoding.EncodeToString(key[:])
}
