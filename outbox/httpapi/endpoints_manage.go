package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// EndpointManager manages named endpoints at run time for the API's
// POST, PUT and DELETE /v1/endpoints/{name} and POST
// /v1/endpoints/{name}/rotate-secret, and tells GET /v1/endpoints how each
// endpoint is defined. outboxd's implementation keeps the endpoints it
// creates in the outbox's file (see cmd/outboxd).
//
// Its errors are answered by what they match: a *outbox.ValidationError
// with 400 naming its Field, outbox.ErrNotFound with 404,
// ErrStaticEndpoint, ErrEndpointExists and ErrEndpointsFixed with 409
// (their message as the error), anything else as the API answers an
// Outbox's errors.
type EndpointManager interface {
	// EndpointDefinitions returns the definition of every named endpoint,
	// by name.
	EndpointDefinitions() map[string]EndpointDefinition
	// CreateEndpoint creates a managed endpoint and returns it with its
	// new signing secret ("whsec_..."), which is shown only here.
	CreateEndpoint(ctx context.Context, name string, spec EndpointSpec) (EndpointDefinition, string, error)
	// ReplaceEndpoint replaces a managed endpoint's definition; its
	// signing secrets stay.
	ReplaceEndpoint(ctx context.Context, name string, spec EndpointSpec) (EndpointDefinition, error)
	// DeleteEndpoint deletes a managed endpoint and returns how many of
	// its pending deliveries became dead letters.
	DeleteEndpoint(ctx context.Context, name string) (int, error)
	// RotateSecret gives a managed endpoint a new signing secret, returned;
	// the one it had keeps signing until previousValidUntil.
	RotateSecret(ctx context.Context, name string, grace time.Duration) (secret string, previousValidUntil time.Time, err error)
}

// EndpointDefinitionLookup is an optional interface an EndpointManager
// implements to give one endpoint's definition: a page of GET
// /v1/endpoints then looks up its own endpoints instead of copying every
// definition.
type EndpointDefinitionLookup interface {
	// EndpointDefinition returns the named endpoint's definition; ok is
	// false when it has none.
	EndpointDefinition(name string) (d EndpointDefinition, ok bool)
}

// Errors an EndpointManager returns for a refused change (wrapped with the
// detail: the error's message is the answer's).
var (
	// ErrStaticEndpoint: the endpoint is defined in the configuration, not
	// through the API, and only the configuration changes it.
	ErrStaticEndpoint = errors.New("static endpoint")
	// ErrEndpointExists: an endpoint of that name exists already.
	ErrEndpointExists = errors.New("endpoint exists")
	// ErrEndpointsFixed: this server does not change endpoints through the
	// API at all.
	ErrEndpointsFixed = errors.New("endpoints are not managed through the API")
)

// EndpointSpec is what a client gives for a managed endpoint (the body of
// POST and PUT /v1/endpoints/{name}).
type EndpointSpec struct {
	// URL is the absolute http or https URL deliveries go to. Required.
	URL string
	// Topics are the topic names or patterns the endpoint subscribes to;
	// none: it receives only events that name it as their destination.
	Topics []string
	// Filter narrows the subscription to events carrying these headers
	// with these exact values. Only with Topics.
	Filter map[string]string
	// Headers are sent on every request to the endpoint.
	Headers map[string]string
	// Timeout bounds one delivery; zero: the server's default.
	Timeout time.Duration
	// MaxInFlight caps the deliveries in flight to it; zero: no cap.
	MaxInFlight int
	// Rate caps the deliveries started per second, with bursts of Burst;
	// zero: no limit.
	Rate  float64
	Burst int
}

// EndpointDefinition is how a named endpoint is defined, as GET
// /v1/endpoints shows it next to its state. It holds no secret and no
// header value.
type EndpointDefinition struct {
	// URL is the endpoint's URL with credentials and query values redacted.
	URL string
	// Topics and Filter are its subscription (see EndpointSpec).
	Topics []string
	Filter map[string]string
	// HeaderNames are the names of the headers it sends.
	HeaderNames []string
	// Timeout and MaxInFlight as configured (zero: the defaults).
	Timeout     time.Duration
	MaxInFlight int
	// Managed is true for an endpoint created through the API, false for
	// one of the configuration.
	Managed bool
	// Signed reports whether deliveries carry a webhook-signature.
	Signed bool
	// PreviousSecretValidUntil is when the secret replaced by the last
	// rotation stops signing; zero when none is retiring.
	PreviousSecretValidUntil time.Time
	// CreatedAt and UpdatedAt are when a managed endpoint was created and
	// last changed; zero for a static one.
	CreatedAt, UpdatedAt time.Time
}

// endpointSpecIn is the JSON body of POST and PUT /v1/endpoints/{name}.
type endpointSpecIn struct {
	URL         string            `json:"url"`
	Topics      []string          `json:"topics"`
	Filter      map[string]string `json:"filter"`
	Headers     map[string]string `json:"headers"`
	Timeout     string            `json:"timeout"`
	MaxInFlight int               `json:"max_in_flight"`
	Rate        float64           `json:"rate"`
	Burst       int               `json:"burst"`
	// Since and BackfillRate ask for a backfill from the archive and the
	// pending events (see sinceIn); they are not part of the definition.
	Since        string  `json:"since"`
	BackfillRate float64 `json:"backfill_rate"`
}

// endpointDefOut is the definition part of an endpoint as the API returns
// it (embedded in endpointOut).
type endpointDefOut struct {
	URL                      string            `json:"url,omitempty"`
	Topics                   []string          `json:"topics"`
	Filter                   map[string]string `json:"filter,omitempty"`
	Headers                  []string          `json:"headers,omitempty"`
	Timeout                  string            `json:"timeout,omitempty"`
	MaxInFlight              int               `json:"max_in_flight,omitempty"`
	Managed                  bool              `json:"managed"`
	Signed                   bool              `json:"signed"`
	PreviousSecretValidUntil string            `json:"previous_secret_valid_until,omitempty"`
	CreatedAt                string            `json:"created_at,omitempty"`
	UpdatedAt                string            `json:"updated_at,omitempty"`
}

func toEndpointDefOut(d EndpointDefinition) *endpointDefOut {
	out := &endpointDefOut{
		URL:                      d.URL,
		Topics:                   d.Topics,
		Filter:                   d.Filter,
		Headers:                  d.HeaderNames,
		MaxInFlight:              d.MaxInFlight,
		Managed:                  d.Managed,
		Signed:                   d.Signed,
		PreviousSecretValidUntil: formatTime(d.PreviousSecretValidUntil),
		CreatedAt:                formatTime(d.CreatedAt),
		UpdatedAt:                formatTime(d.UpdatedAt),
	}
	if out.Topics == nil {
		out.Topics = []string{}
	}
	if d.Timeout > 0 {
		out.Timeout = d.Timeout.String()
	}
	return out
}

// withDefinitions adds the manager's definitions to endpoint states.
func (h *handler) withDefinitions(eps []endpointOut) {
	if h.cfg.Endpoints == nil {
		return
	}
	if l, ok := h.cfg.Endpoints.(EndpointDefinitionLookup); ok {
		for i := range eps {
			if d, ok := l.EndpointDefinition(eps[i].Name); ok {
				eps[i].endpointDefOut = toEndpointDefOut(d)
			}
		}
		return
	}
	defs := h.cfg.Endpoints.EndpointDefinitions()
	for i := range eps {
		if d, ok := defs[eps[i].Name]; ok {
			eps[i].endpointDefOut = toEndpointDefOut(d)
		}
	}
}

// endpoint serves GET /v1/endpoints/{name}: one endpoint as GET
// /v1/endpoints shows it.
func (h *handler) endpoint(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	eps, err := h.o.Endpoints(r.Context())
	if err != nil {
		h.fail(w, r, err, false)
		return
	}
	for _, e := range eps {
		if e.Name == name {
			out := []endpointOut{toEndpointOut(e)}
			h.withDefinitions(out)
			writeJSON(w, http.StatusOK, oneEndpointOut{endpointOut: out[0], Backfill: h.endpointBackfill(name)})
			return
		}
	}
	writeError(w, http.StatusNotFound, "endpoint "+strconv.Quote(name)+" not found")
}

// managedOut is an endpoint as POST and PUT /v1/endpoints/{name} answer.
type managedOut struct {
	Name string `json:"name"`
	*endpointDefOut
	// Secret is the signing secret, in the answer to POST only.
	Secret string `json:"secret,omitempty"`
	// Backfill is the ID of the backfill a request with since started
	// (GET /v1/archive/replay/{id}).
	Backfill string `json:"backfill,omitempty"`
}

// manager returns the endpoint manager, or answers 409 when there is none.
func (h *handler) manager(w http.ResponseWriter, r *http.Request) EndpointManager {
	if h.cfg.Endpoints == nil {
		h.fail(w, r, errorf(http.StatusConflict, ErrEndpointsFixed.Error()+": change them in the configuration"), false)
	}
	return h.cfg.Endpoints
}

// readSpec reads and decodes the body of POST and PUT /v1/endpoints/{name},
// and the backfill it asks for.
func (h *handler) readSpec(w http.ResponseWriter, r *http.Request) (EndpointSpec, sinceIn, error) {
	b, err := h.readBody(w, r, false)
	if err != nil {
		return EndpointSpec{}, sinceIn{}, err
	}
	defer b.release()
	var in endpointSpecIn
	err = decodeOptionalObject(b.b, &in, `body must be an endpoint object such as {"url": "https://example.com/hook", "topics": ["order.*"]}`)
	if err != nil {
		return EndpointSpec{}, sinceIn{}, err
	}
	since, err := h.readSince(&in)
	if err != nil {
		return EndpointSpec{}, sinceIn{}, err
	}
	spec := EndpointSpec{URL: in.URL, Topics: in.Topics, Filter: in.Filter, Headers: in.Headers,
		MaxInFlight: in.MaxInFlight, Rate: in.Rate, Burst: in.Burst}
	if in.Timeout != "" {
		d, err := time.ParseDuration(in.Timeout)
		if err != nil {
			return EndpointSpec{}, sinceIn{}, errorf(http.StatusBadRequest, fmt.Sprintf("timeout: %q is not a duration such as \"10s\" or \"1m30s\"", in.Timeout))
		}
		spec.Timeout = d
	}
	return spec, since, nil
}

// managerAndSpec returns the EndpointManager and the decoded body of POST
// and PUT /v1/endpoints/{name}; ok is false when it answered an error.
func (h *handler) managerAndSpec(w http.ResponseWriter, r *http.Request) (EndpointManager, EndpointSpec, sinceIn, bool) {
	m := h.manager(w, r)
	if m == nil {
		return nil, EndpointSpec{}, sinceIn{}, false
	}
	spec, since, err := h.readSpec(w, r)
	if err == nil && !since.at.IsZero() && len(spec.Topics) == 0 {
		err = errorf(http.StatusBadRequest, "since: a backfill needs topics to match")
	}
	if err != nil {
		h.fail(w, r, err, false)
		return nil, EndpointSpec{}, sinceIn{}, false
	}
	return m, spec, since, true
}

// createEndpoint serves POST /v1/endpoints/{name}.
func (h *handler) createEndpoint(w http.ResponseWriter, r *http.Request) {
	m, spec, since, ok := h.managerAndSpec(w, r)
	if !ok {
		return
	}
	name := r.PathValue("name")
	def, secret, err := m.CreateEndpoint(r.Context(), name, spec)
	if err != nil {
		h.failManage(w, r, err, name)
		return
	}
	backfill, err := h.backfillSince(name, spec, since)
	if err != nil {
		h.fail(w, r, err, false)
		return
	}
	writeJSON(w, http.StatusCreated, managedOut{Name: name, endpointDefOut: toEndpointDefOut(def), Secret: secret, Backfill: backfill})
}

// replaceEndpoint serves PUT /v1/endpoints/{name}.
func (h *handler) replaceEndpoint(w http.ResponseWriter, r *http.Request) {
	m, spec, since, ok := h.managerAndSpec(w, r)
	if !ok {
		return
	}
	name := r.PathValue("name")
	def, err := m.ReplaceEndpoint(r.Context(), name, spec)
	if err != nil {
		h.failManage(w, r, err, name)
		return
	}
	backfill, err := h.backfillSince(name, spec, since)
	if err != nil {
		h.fail(w, r, err, false)
		return
	}
	writeJSON(w, http.StatusOK, managedOut{Name: name, endpointDefOut: toEndpointDefOut(def), Backfill: backfill})
}

// deleteEndpoint serves DELETE /v1/endpoints/{name}.
func (h *handler) deleteEndpoint(w http.ResponseWriter, r *http.Request) {
	m := h.manager(w, r)
	if m == nil {
		return
	}
	name := r.PathValue("name")
	n, err := m.DeleteEndpoint(r.Context(), name)
	if err != nil {
		h.failManage(w, r, err, name)
		return
	}
	writeJSON(w, http.StatusOK, struct {
		DeadLettered int `json:"dead_lettered"`
	}{n})
}

// rotateIn is the optional body of POST /v1/endpoints/{name}/rotate-secret.
type rotateIn struct {
	// Grace is how long the old secret keeps signing (default 24h).
	Grace *string `json:"grace"`
}

// DefaultRotationGrace is how long the secret replaced by POST
// /v1/endpoints/{name}/rotate-secret keeps signing when the request gives
// no grace.
const DefaultRotationGrace = 24 * time.Hour

// rotateSecret serves POST /v1/endpoints/{name}/rotate-secret.
func (h *handler) rotateSecret(w http.ResponseWriter, r *http.Request) {
	m := h.manager(w, r)
	if m == nil {
		return
	}
	b, err := h.readBody(w, r, true)
	if err != nil {
		h.fail(w, r, err, false)
		return
	}
	var in rotateIn
	err = decodeOptionalObject(b.b, &in, `body must be an object such as {"grace": "24h"}`)
	b.release()
	if err != nil {
		h.fail(w, r, err, false)
		return
	}
	grace := DefaultRotationGrace
	if in.Grace != nil {
		if grace, err = time.ParseDuration(*in.Grace); err != nil {
			h.fail(w, r, errorf(http.StatusBadRequest, fmt.Sprintf("grace: %q is not a duration such as \"24h\" or \"30m\"", *in.Grace)), false)
			return
		}
	}
	name := r.PathValue("name")
	secret, until, err := m.RotateSecret(r.Context(), name, grace)
	if err != nil {
		h.failManage(w, r, err, name)
		return
	}
	writeJSON(w, http.StatusOK, struct {
		Secret             string `json:"secret"`
		PreviousValidUntil string `json:"previous_valid_until"`
	}{secret, formatTime(until)})
}

// failManage answers an EndpointManager's error.
func (h *handler) failManage(w http.ResponseWriter, r *http.Request, err error, name string) {
	switch {
	case errors.Is(err, ErrStaticEndpoint), errors.Is(err, ErrEndpointExists), errors.Is(err, ErrEndpointsFixed):
		writeError(w, http.StatusConflict, strings.TrimSpace(err.Error()))
	default:
		h.fail(w, r, notFound(err, "endpoint", name), false)
	}
}
