package outbox

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/outboxd/outbox/outbox/internal/admin"
	"github.com/outboxd/outbox/outbox/internal/engine"
	"github.com/outboxd/outbox/store"
)

// Get returns the event with that ID: pending, dead, or, while its tombstone
// lasts, delivered or deleted (by Delete; only its ID and State are known
// then). ErrNotFound otherwise.
//
// A topic event is returned as a whole, with the state of each delivery in
// DeliveryStates: its State is pending while any delivery is pending, else
// dead if any is dead, else delivered (or deleted when every delivery
// left was deleted); NextAttemptAt is its earliest pending delivery's, and
// Attempts, Deliveries and Version the largest of its deliveries'.
// Destination, Endpoint, LastStatus, LastError, DeadReason and DeadAt are
// per delivery and empty on the event. A topic event kept unrouted is
// returned as stored (pending, or dead once its retention ended), with no
// DeliveryStates.
func (o *Outbox) Get(ctx context.Context, id string) (Event, error) {
	if err := o.enter(); err != nil {
		return Event{}, err
	}
	defer o.ops.Done()
	if err := ctx.Err(); err != nil {
		return Event{}, err
	}
	r, st, err := o.st.Get(id)
	if errors.Is(err, store.ErrNotFound) && validEventID(id) {
		ev, ok, gerr := o.getGroup(id)
		if gerr != nil {
			return Event{}, mapErr("get", id, gerr)
		}
		if ok {
			return ev, nil
		}
	}
	if err != nil {
		return Event{}, mapErr("get", id, err)
	}
	state := State(st)
	if r == nil {
		if state != StateDelivered && state != StateDeleted {
			return Event{}, fmt.Errorf("outbox: get %q: %w", id, ErrNotFound)
		}
		return Event{ID: id, State: state}, nil
	}
	return eventFromRecord(r, state), nil
}

// ListOptions selects the events List returns.
type ListOptions struct {
	// State is StatePending (the default) or StateDead.
	State State
	// After is the cursor: only events with a greater ID are returned. Pass
	// the previous call's next value to get the following page.
	After string
	// Limit caps the events returned. Default 100, at most 1000.
	Limit int
	// Destination, when set, keeps only the events for that destination.
	Destination string
	// KeyPrefix, when set, keeps only the events whose Key starts with it.
	KeyPrefix string
	// Topic, when set, keeps only the events (deliveries) of that topic.
	Topic string
	// Unrouted lists the topic events kept unrouted instead of the events
	// in State (State must then be zero).
	Unrouted bool
	// CreatedFrom and CreatedTo, when set, keep only the events created in
	// [CreatedFrom, CreatedTo).
	CreatedFrom, CreatedTo time.Time
}

// Maximum and default page sizes of List.
const (
	DefaultListLimit = 100
	MaxListLimit     = 1000
)

// List returns one page of pending or dead events in ID order, and the
// cursor of the next page ("" after the last page). It lists deliveries:
// each delivery of a topic event is one Event, with the event's ID and the
// delivery's Endpoint (the cursor is opaque). Pending events kept unrouted
// are listed with Unrouted only; dead ones (past their retention) with
// the other dead letters.
func (o *Outbox) List(ctx context.Context, opt ListOptions) ([]Event, string, error) {
	if err := o.enter(); err != nil {
		return nil, "", err
	}
	defer o.ops.Done()
	if err := ctx.Err(); err != nil {
		return nil, "", err
	}
	state := opt.State
	if opt.Unrouted {
		if state != 0 {
			return nil, "", fmt.Errorf("outbox: list: %w: state must not be set with unrouted", ErrInvalid)
		}
	}
	if state == 0 {
		state = StatePending
	}
	if state != StatePending && state != StateDead {
		return nil, "", fmt.Errorf("outbox: list: %w: state must be pending or dead", ErrInvalid)
	}
	limit := opt.Limit
	if limit <= 0 {
		limit = DefaultListLimit
	}
	limit = min(limit, MaxListLimit)
	recs, next, err := o.admin.List(store.State(state), opt.After, limit, admin.ListFilter{
		Unrouted: opt.Unrouted, Topic: opt.Topic, Destination: opt.Destination, KeyPrefix: opt.KeyPrefix,
		CreatedFrom: opt.CreatedFrom, CreatedTo: opt.CreatedTo})
	if err != nil {
		return nil, "", mapErr("list", "", err)
	}
	evs := make([]Event, len(recs))
	for i, r := range recs {
		evs[i] = eventFromRecord(r, state)
	}
	return evs, next, nil
}

// Delete drops a pending or dead event (every pending or dead delivery of
// a topic event; DeleteDelivery drops one): it is removed through the changelog
// and its ID is remembered for the dedup window as deleted: Get reports
// StateDeleted, Enqueue refuses the ID with ErrDeleted, and Ingest skips it
// as a duplicate, until the tombstone is trimmed. ErrNotFound when no
// pending or dead event has that ID. An attempt in flight still completes,
// but its outcome does not bring the event back.
func (o *Outbox) Delete(ctx context.Context, id string) error {
	if err := o.enter(); err != nil {
		return err
	}
	defer o.ops.Done()
	err := o.st.Drop(ctx, id, "dropped by operator")
	if errors.Is(err, store.ErrNotFound) && validEventID(id) {
		_, err = o.st.DropGroup(ctx, id, "dropped by operator")
	}
	return mapErr("delete", id, err)
}

// validEventID reports whether id may be an event's ID (and so the group
// of a topic event's deliveries).
func validEventID(id string) bool { return id != "" && ValidText(id) }

// Replay moves a dead event back to pending, due now (or at its DeliverAt
// while that is still ahead), with its attempts reset. ErrNotFound when
// there is no such event, ErrNotDead when it is not a dead letter. Of a
// topic event it replays every dead delivery (ReplayDelivery replays one);
// ErrNotDead when none is dead. A topic event that became dead unrouted is
// routed to the endpoints subscribed to it now, or dead again at once when
// there are none.
func (o *Outbox) Replay(ctx context.Context, id string) error {
	if err := o.enter(); err != nil {
		return err
	}
	defer o.ops.Done()
	_, err := o.st.Replay(ctx, id, o.clock.Now().UTC())
	if errors.Is(err, store.ErrNotFound) && validEventID(id) {
		_, err = o.st.ReplayGroup(ctx, id, o.clock.Now().UTC())
	}
	if err != nil {
		return mapErr("replay", id, err)
	}
	o.wake()
	return nil
}

// ReplayFilter selects dead events for ReplayDead. Zero fields match
// everything.
type ReplayFilter struct {
	// Destination keeps the events for that destination.
	Destination string
	// Status keeps the events whose last response had that status.
	Status int
	// KeyPrefix keeps the events whose Key starts with it.
	KeyPrefix string
	// Topic keeps the deliveries of events of that topic.
	Topic string
	// From and To keep the events that became dead in [From, To).
	From, To time.Time
	// Limit caps the events replayed; 0 means all that match.
	Limit int
	// Rate is the pace, in events per second, from MinRate to MaxRate.
	// Default 100.
	Rate float64
}

// DefaultReplayRate is ReplayFilter.Rate's default, in events per second.
const DefaultReplayRate = 100

// ReplayDead moves the dead events matching f back to pending at f.Rate per
// second, so that a receiver that just recovered is not flooded, and
// returns how many it replayed. It stops early, returning the count so far
// and the error, when ctx is done or the outbox stops.
func (o *Outbox) ReplayDead(ctx context.Context, f ReplayFilter) (int, error) {
	if err := o.enter(); err != nil {
		return 0, err
	}
	defer o.ops.Done()
	rate, err := paceRate(f.Rate)
	if err != nil {
		return 0, err
	}
	return o.admin.ReplayDead(ctx, admin.DeadFilter{Destination: f.Destination, KeyPrefix: f.KeyPrefix, Topic: f.Topic,
		Status: f.Status, From: f.From, To: f.To}, f.Limit, rate, MaxListLimit)
}

// EndpointState is the delivery state of one endpoint.
type EndpointState struct {
	// Name is the endpoint's name.
	Name string
	// Disabled endpoints receive nothing until EnableEndpoint.
	Disabled bool
	// DisabledReason says why (e.g. the receiver answered 410 Gone).
	DisabledReason string
	// DisabledAt is when the endpoint was disabled.
	DisabledAt time.Time
	// ThrottledUntil is the endpoint-wide not-before time set by a throttle
	// (Retry-After); in the past when the endpoint is not throttled.
	ThrottledUntil time.Time
	// FailureStreak counts the failed attempts since the last success.
	FailureStreak int
	// LastStatus is the last response status seen from it.
	LastStatus int
	// Breaker is the state of its circuit breaker now (see Breaker).
	Breaker BreakerState
	// BreakerOpenedAt is when the breaker last opened, and BreakerUntil
	// when it half-opens (in the past once it has); both zero while it is
	// closed. BreakerOpens counts its consecutive openings, which set the
	// length of the next cool-down.
	BreakerOpenedAt, BreakerUntil time.Time
	BreakerOpens                  int
	// RateLimit is the endpoint's rate limit (see Config.RateLimits); its
	// zero value means none.
	RateLimit RateLimit
	// RateLimitShare is the share of RateLimit that this outbox's
	// Config.RateLimits enforces (see RateLimits.SetShare): RateLimit
	// itself unless a share was set.
	RateLimitShare RateLimit
	// Rate is the recent rate of deliveries started to it, per second
	// (averaged over the last few seconds).
	Rate float64
	// InFlight is the number of its deliveries under way, and
	// InFlightLimit how many may be at once now: its adaptive limit (see
	// Config.InitialPerEndpoint), or MaxPerEndpoint when adapting is off.
	InFlight, InFlightLimit int
	// LatencyP50 and LatencyP99 are the median and 99th percentile of the
	// time its receiver took to answer, over the attempts answered in the
	// last minute (zero when none was).
	LatencyP50, LatencyP99 time.Duration
}

// Endpoints returns the state of every endpoint that has one and of every
// endpoint the Sink has configured (see EndpointLister; one that has not
// been delivered to yet has a zero state), sorted by name. Its cost and
// answer grow with the number of endpoints: EndpointsPage reads one page.
func (o *Outbox) Endpoints(ctx context.Context) ([]EndpointState, error) {
	if err := o.enter(); err != nil {
		return nil, err
	}
	defer o.ops.Done()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	eps, err := o.eng.Endpoints()
	if err != nil {
		return nil, mapErr("endpoints", "", err)
	}
	var names []string
	if l, ok := o.sink.(EndpointLister); ok {
		names = l.EndpointNames()
		if !slices.IsSorted(names) {
			names = slices.Sorted(slices.Values(names))
		}
	}
	return o.endpointStates(eps, names, len(eps)+len(names)), nil
}

// EndpointsPage returns one page of what Endpoints returns: up to limit
// endpoints (default DefaultListLimit, at most MaxListLimit) whose names
// sort after after, by name, and the cursor of the next page, the last
// name of this one ("" after the last page). A page costs one seek in the
// store whatever the number of endpoints, plus a page of the Sink's names
// when it implements EndpointPager (all of them otherwise).
func (o *Outbox) EndpointsPage(ctx context.Context, after string, limit int) ([]EndpointState, string, error) {
	if err := o.enter(); err != nil {
		return nil, "", err
	}
	defer o.ops.Done()
	if err := ctx.Err(); err != nil {
		return nil, "", err
	}
	if limit <= 0 {
		limit = DefaultListLimit
	}
	limit = min(limit, MaxListLimit)
	eps, err := o.eng.EndpointsAfter(after, limit+1)
	if err != nil {
		return nil, "", mapErr("endpoints", "", err)
	}
	out := o.endpointStates(eps, o.sinkNamesAfter(after, limit+1), limit+1)
	if len(out) <= limit {
		return out, "", nil
	}
	out = out[:limit]
	return out, out[limit-1].Name, nil
}

// sinkNamesAfter returns up to limit of the Sink's configured endpoint
// names that sort after after, in order.
func (o *Outbox) sinkNamesAfter(after string, limit int) []string {
	if p, ok := o.sink.(EndpointPager); ok {
		return p.EndpointNamesAfter(after, limit)
	}
	l, ok := o.sink.(EndpointLister)
	if !ok {
		return nil
	}
	names := l.EndpointNames()
	if !slices.IsSorted(names) {
		names = slices.Sorted(slices.Values(names))
	}
	i, found := slices.BinarySearch(names, after)
	if found {
		i++
	}
	return names[i:min(len(names), i+limit)]
}

// endpointStates merges the stored states eps and the Sink's names, both
// sorted by name, into at most limit states by name, each with its live
// figures.
func (o *Outbox) endpointStates(eps []store.EndpointState, names []string, limit int) []EndpointState {
	now := o.clock.Now()
	out := make([]EndpointState, 0, min(limit, len(eps)+len(names)))
	for len(out) < limit && (len(eps) > 0 || len(names) > 0) {
		switch {
		case len(names) == 0 || len(eps) > 0 && eps[0].Name <= names[0]:
			if len(names) > 0 && eps[0].Name == names[0] {
				names = names[1:]
			}
			out = append(out, o.storedState(eps[0], now))
			eps = eps[1:]
		default:
			// No state stored here; the shared one, if any (see
			// SharedEndpoints).
			st := EndpointState{Name: names[0]}
			if ep, ok := o.eng.SharedState(names[0]); ok {
				st = o.storedState(ep, now)
			}
			out = append(out, st)
			names = names[1:]
		}
	}
	for i := range out {
		out[i].RateLimit, _ = o.cfg.RateLimits.Limit(out[i].Name)
		out[i].RateLimitShare, _ = o.cfg.RateLimits.Effective(out[i].Name)
		out[i].Rate = o.eng.Rate(out[i].Name)
		ld := o.eng.Load(out[i].Name)
		out[i].InFlight, out[i].InFlightLimit = ld.InFlight, ld.Limit
		out[i].LatencyP50, out[i].LatencyP99 = ld.P50, ld.P99
	}
	return out
}

// storedState is the EndpointState of a stored state at now.
func (o *Outbox) storedState(ep store.EndpointState, now time.Time) EndpointState {
	return EndpointState{
		Name:            ep.Name,
		Disabled:        ep.Disabled,
		DisabledReason:  ep.DisabledReason,
		DisabledAt:      ep.DisabledAt,
		ThrottledUntil:  ep.NotBefore,
		FailureStreak:   ep.FailureStreak,
		LastStatus:      ep.LastStatus,
		Breaker:         BreakerState(engine.BreakerAt(ep, now)),
		BreakerOpenedAt: ep.BreakerOpenedAt,
		BreakerUntil:    ep.BreakerUntil,
		BreakerOpens:    ep.BreakerOpens,
	}
}

// EnableEndpoint re-enables a disabled endpoint, lifts its throttle and
// closes its circuit breaker; its pending events become due at once. An
// endpoint the Sink lists that has no state yet has nothing to lift and is
// enabled already. ErrNotFound when the endpoint has no state and the Sink
// does not list it.
func (o *Outbox) EnableEndpoint(ctx context.Context, name string) error {
	if err := o.enter(); err != nil {
		return err
	}
	defer o.ops.Done()
	now := o.clock.Now().UTC()
	if err := o.eng.Enable(ctx, name, now, o.listsEndpoint(name)); err != nil {
		return mapErr("enable endpoint", name, err)
	}
	o.wake()
	return nil
}

// RetryEndpoint is what an operator calls once an endpoint's receiver is
// fixed: it closes the endpoint's circuit breaker, lifts its throttle, and
// makes its pending events due now, paced at rate events per second (0:
// DefaultReplayRate; otherwise from MinRate to MaxRate, or a
// *ValidationError) so that the receiver is not flooded: the n-th event
// (from 0) becomes due n/rate seconds from now, or stays due earlier when it
// was; an event scheduled later (Event.DeliverAt) keeps its time. The
// endpoint's rate limit, if it has one, applies on top. It returns how many
// pending events it made due (those due already included). Events in
// flight (an attempt under way, or one whose outcome is not recorded yet)
// are left alone and not counted: one whose attempt fails waits out its
// backoff; an event taken for delivery but sent back unattempted because
// the endpoint was held is waiting, and is made due with the others.
// ErrNotFound when the endpoint has no state and the Sink does not list it;
// ErrEndpointDisabled when it is disabled (EnableEndpoint is the call then).
func (o *Outbox) RetryEndpoint(ctx context.Context, name string, rate float64) (int, error) {
	if err := o.enter(); err != nil {
		return 0, err
	}
	defer o.ops.Done()
	rate, err := paceRate(rate)
	if err != nil {
		return 0, err
	}
	now := o.clock.Now().UTC()
	n, err := o.eng.Retry(ctx, name, now, o.listsEndpoint(name), rate)
	if de := (*engine.DisabledError)(nil); errors.As(err, &de) {
		return 0, fmt.Errorf("outbox: retry endpoint %q: %w since %s (%s); enable it instead", name, ErrEndpointDisabled,
			de.Since.Format(time.RFC3339), de.Reason)
	}
	if err != nil {
		return 0, mapErr("retry endpoint", name, err)
	}
	o.wake()
	return n, nil
}

// listsEndpoint reports whether the Sink lists a configured endpoint of
// that name (see EndpointLister).
func (o *Outbox) listsEndpoint(name string) bool {
	l, ok := o.sink.(EndpointLister)
	return ok && slices.Contains(l.EndpointNames(), name)
}

// Attempt is one delivery attempt of an event, as the attempt log keeps it
// (see Outbox.Attempts).
type Attempt struct {
	// Seq numbers the event's logged attempts from 1, in order; it goes on
	// across replays. The log keeps an event's last AttemptsPerEvent.
	Seq uint64
	// Delivery is the Delivery.Attempt the sink saw (parks included).
	Delivery int
	// Endpoint is the endpoint of the delivery the attempt belongs to, for
	// a topic event (whose deliveries Attempts lists together); "" for an
	// event with a Destination.
	Endpoint string
	// StartedAt is when the attempt began (the outbox's clock, UTC), and
	// Duration how long the Sink took.
	StartedAt time.Time
	Duration  time.Duration
	// Action is what the outbox made of the answer.
	Action Action
	// Status is the HTTP status, 0 when no response was received.
	Status int
	// Error is the transport error, "" when there was none. Like
	// Result.Err it carries no credentials.
	Error string
	// Header holds the response headers kept: only those IsLoggedHeader
	// accepts, under their canonical names. Nil when there are none.
	Header map[string]string
	// Body is the start of the response body (at most
	// Config.AttemptExcerptBytes); nil when none was kept. It may be any
	// bytes, not only text.
	Body []byte
}

// AttemptsPerEvent is the most attempts the log keeps of one event: an
// event retried or parked for days keeps its latest ones.
const AttemptsPerEvent = store.AttemptsPerEvent

// MaxAttemptExcerptBytes is the largest Config.AttemptExcerptBytes.
const MaxAttemptExcerptBytes = store.MaxAttemptBody

// IsLoggedHeader reports whether the attempt log keeps a response header of
// that name (any case): Content-Type, Content-Length, Content-Encoding,
// Retry-After, Location, Date and Server. Set-Cookie, authentication
// challenges and every other header are never kept.
func IsLoggedHeader(name string) bool {
	return engine.LoggedHeader(name)
}

// Attempts returns the logged attempts of the event with that ID, oldest
// first (empty when it has none yet): of a pending or dead event, and of a
// delivered or deleted one while its tombstone lasts. ErrNotFound
// otherwise. The log is local to this file: a store rebuilt from a
// changelog has none of the attempts made before. Of a topic event it
// returns the attempts of every delivery, each with its Endpoint, in the
// order they started.
func (o *Outbox) Attempts(ctx context.Context, id string) ([]Attempt, error) {
	if err := o.enter(); err != nil {
		return nil, err
	}
	defer o.ops.Done()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	as, err := o.st.Attempts(id)
	if errors.Is(err, store.ErrNotFound) && validEventID(id) {
		gas, ok, gerr := o.admin.GroupAttempts(id)
		if gerr != nil {
			return nil, mapErr("attempts", id, gerr)
		}
		if ok {
			out := make([]Attempt, len(gas))
			for i, a := range gas {
				out[i] = attemptFromStore(a.Attempt, a.Endpoint)
			}
			return out, nil
		}
	}
	if err != nil {
		return nil, mapErr("attempts", id, err)
	}
	out := make([]Attempt, len(as))
	for i, a := range as {
		out[i] = attemptFromStore(a, "")
	}
	return out, nil
}

// attemptFromStore converts a logged attempt of the delivery to endpoint
// ("" for an event with a Destination).
func attemptFromStore(a store.Attempt, endpoint string) Attempt {
	act, _ := ParseAction(a.Action)
	return Attempt{Seq: a.Seq, Delivery: a.Delivery, Endpoint: endpoint, StartedAt: a.StartedAt, Duration: a.Duration,
		Action: act, Status: a.Status, Error: a.Error, Header: a.Headers, Body: a.Body}
}

// logsAttempts reports whether the outbox keeps an attempt log.
func (c *Config) logsAttempts() bool { return !c.NoAttemptLog }

// excerptBytes is how much of a response body the attempt log keeps.
func (c *Config) excerptBytes() int {
	if c.NoAttemptLog || c.AttemptExcerptBytes < 0 {
		return 0
	}
	return c.AttemptExcerptBytes
}

// validateAttemptLog checks the attempt log's fields of a Config.
func (c Config) validateAttemptLog() error {
	if c.AttemptExcerptBytes > MaxAttemptExcerptBytes {
		return &ConfigError{Field: "AttemptExcerptBytes", Reason: fmt.Sprintf("must not exceed %d", MaxAttemptExcerptBytes)}
	}
	return nil
}
