package outbox

import (
	"time"

	"github.com/outboxd/outbox/outbox/internal/engine"
)

// Hooks are optional callbacks for metrics and tracing. Each is called
// synchronously from the outbox's own goroutines, so it must be fast and
// must not call back into the Outbox. Nil fields are skipped.
type Hooks struct {
	// Name identifies a set of hooks: AddHooks replaces the installed hooks
	// of the same non-empty Name instead of adding them again, so that
	// installing a metrics package's hooks twice does not count twice.
	Name string
	// OnEnqueue is called after an Enqueue, EnqueueDead or Upsert call
	// stored n new events (duplicates are not counted).
	OnEnqueue func(n int)
	// OnDuplicate is called with the number of events of an Enqueue call
	// that were already known (pending, dead, or delivered within the dedup
	// window) and so were not stored again.
	OnDuplicate func(n int)
	// OnDelivery is called once per delivery attempt after its outcome was
	// committed.
	OnDelivery func(DeliveryInfo)
	// OnPunctuation is called after each delivery punctuation with its
	// duration and the number of deliveries it started.
	OnPunctuation func(d time.Duration, due int)
	// OnBreaker is called at each transition of an endpoint's circuit
	// breaker (see Breaker).
	OnBreaker func(BreakerChange)
	// OnRateLimited is called with the number of events of an endpoint
	// that a punctuation rescheduled because its rate limit would not let
	// them go yet.
	OnRateLimited func(endpoint string, n int)
}

// DeliveryInfo describes one delivery attempt for Hooks.OnDelivery.
type DeliveryInfo struct {
	// ID is the event's ID.
	ID string
	// Endpoint is the endpoint the event was delivered to.
	Endpoint string
	// Action is what the Sink asked for.
	Action Action
	// Dead reports that the attempt made the event a dead letter (the
	// Sink's ActionDead, or max attempts / max age reached).
	Dead bool
	// Status is the response status, 0 when none.
	Status int
	// Attempt is the attempt number (1 for the first; parks count).
	Attempt int
	// Duration is how long the Sink took.
	Duration time.Duration
	// SinceEnqueue is the time from the event's enqueue to the end of this
	// attempt.
	SinceEnqueue time.Duration
}

// AddHooks installs more hooks, called after those already installed; hooks
// with the Name of installed ones replace them. It is safe at any time,
// including while deliveries run.
func (o *Outbox) AddHooks(h Hooks) {
	o.hooksMu.Lock()
	defer o.hooksMu.Unlock()
	old := *o.hooks.Load()
	next := make([]Hooks, 0, len(old)+1)
	for _, x := range old {
		if h.Name == "" || x.Name != h.Name {
			next = append(next, x)
		}
	}
	next = append(next, h)
	o.hooks.Store(&next)
}

func (o *Outbox) hookEnqueue(n int) {
	if n == 0 {
		return
	}
	for _, h := range *o.hooks.Load() {
		if h.OnEnqueue != nil {
			h.OnEnqueue(n)
		}
	}
}

func (o *Outbox) hookDuplicate(n int) {
	if n == 0 {
		return
	}
	for _, h := range *o.hooks.Load() {
		if h.OnDuplicate != nil {
			h.OnDuplicate(n)
		}
	}
}

func (o *Outbox) hookDelivery(info DeliveryInfo) {
	for _, h := range *o.hooks.Load() {
		if h.OnDelivery != nil {
			h.OnDelivery(info)
		}
	}
}

func (o *Outbox) hookPunctuation(d time.Duration, due int) {
	for _, h := range *o.hooks.Load() {
		if h.OnPunctuation != nil {
			h.OnPunctuation(d, due)
		}
	}
}

func (o *Outbox) hookBreaker(c BreakerChange) {
	for _, h := range *o.hooks.Load() {
		if h.OnBreaker != nil {
			h.OnBreaker(c)
		}
	}
}

func (o *Outbox) hookRateLimited(endpoint string, n int) {
	for _, h := range *o.hooks.Load() {
		if h.OnRateLimited != nil {
			h.OnRateLimited(endpoint, n)
		}
	}
}

// delivered counts a committed attempt and reports it to the hooks.
func (o *Outbox) delivered(info engine.DeliveryInfo) {
	if info.Action == engine.ActionSuccess {
		o.deliveredTotal.Add(1)
	} else {
		o.failedTotal.Add(1)
	}
	if info.Dead {
		o.deadTotal.Add(1)
	}
	o.hookDelivery(DeliveryInfo{ID: info.ID, Endpoint: info.Endpoint, Action: Action(info.Action), Dead: info.Dead,
		Status: info.Status, Attempt: info.Attempt, Duration: info.Duration, SinceEnqueue: info.SinceEnqueue})
}

// breakerChanged reports a transition of an endpoint's breaker to the hooks.
func (o *Outbox) breakerChanged(c engine.BreakerChange) {
	o.hookBreaker(BreakerChange{Endpoint: c.Endpoint, State: BreakerState(c.State), Until: c.Until})
}
