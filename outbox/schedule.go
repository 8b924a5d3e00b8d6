package outbox

import (
	"time"
)

// DefaultMaxSchedule is Config.MaxSchedule's default: 30 days.
const DefaultMaxSchedule = 30 * 24 * time.Hour

// checkSchedule refuses an event (index i of the call) whose DeliverAt is
// more than Config.MaxSchedule ahead of now. A DeliverAt that has passed is
// fine: the event is due at once.
func (o *Outbox) checkSchedule(i int, ev *Event) error {
	if ev.DeliverAt.IsZero() {
		return nil
	}
	now := o.clock.Now()
	if limit := now.Add(o.cfg.MaxSchedule); ev.DeliverAt.After(limit) {
		return &ValidationError{Index: i, Field: "deliver_at", Reason: ev.DeliverAt.UTC().Format(time.RFC3339Nano) +
			" is more than " + o.cfg.MaxSchedule.String() + " ahead, past the scheduling horizon"}
	}
	return nil
}

// notBefore returns now, or deliverAt when that is later: when an event
// with that not-before time may next be attempted.
func notBefore(now, deliverAt time.Time) time.Time {
	if deliverAt.After(now) {
		return deliverAt
	}
	return now
}
