package admin

import (
	"cmp"
	"errors"
	"slices"
	"time"

	"github.com/outboxd/outbox/store"
)

// Group is a topic event read as a whole.
type Group struct {
	// State is pending while any delivery is pending, else dead if any is
	// dead, else delivered (or deleted when every delivery left was
	// deleted).
	State store.State
	// Record is the event as a whole: the record kept unrouted as it is
	// stored, or else a delivery's record with the fields of a delivery
	// cleared (destination, endpoint, last status and error, dead reason
	// and time) and NextAttemptAt the earliest pending delivery's,
	// Attempts, Deliveries and Version the largest of its deliveries'.
	// Nil when no delivery has a record left (only tombstones).
	Record *store.Record
	// Deliveries are the states of its deliveries, sorted by endpoint.
	Deliveries []Delivery
}

// Delivery is the state of one delivery of a topic event; its counts are
// zero when only its tombstone is left.
type Delivery struct {
	Endpoint             string
	State                store.State
	Attempts, Deliveries int
	NextAttemptAt        time.Time
	LastStatus           int
	LastError            string
	DeadReason           string
	DeadAt               time.Time
	Version              uint64
}

// ReadGroup reads the topic event id as a whole; ok is false when id has no
// group.
func (a *Admin) ReadGroup(id string) (g Group, ok bool, err error) {
	members, err := a.St.Group(id)
	if err != nil || len(members) == 0 {
		return Group{}, false, err
	}
	var (
		base                 *store.Record
		pending, dead, gone  bool
		deleted, anyRecorded bool
	)
	for _, m := range members {
		switch m.State {
		case store.StatePending:
			pending = true
		case store.StateDead:
			dead = true
		case store.StateDeleted:
			deleted = true
		default:
			gone = true
		}
		if m.Record != nil {
			anyRecorded = true
			if base == nil || (base.Unrouted() && !m.Record.Unrouted()) {
				base = m.Record
			}
		}
		if ep := m.ID[len(id)+len(store.GroupSep):]; ep != "" { // "": the event while it was unrouted
			g.Deliveries = append(g.Deliveries, deliveryOf(ep, m))
		}
	}
	g.State = store.StateDelivered
	switch {
	case pending:
		g.State = store.StatePending
	case dead:
		g.State = store.StateDead
	case deleted && !gone:
		g.State = store.StateDeleted
	}
	if anyRecorded {
		g.Record = g.whole(base)
	}
	return g, true, nil
}

func deliveryOf(endpoint string, m store.Member) Delivery {
	d := Delivery{Endpoint: endpoint, State: m.State}
	if r := m.Record; r != nil {
		d.Attempts, d.Deliveries = r.Attempts, r.Deliveries
		d.NextAttemptAt = r.NextAttemptAt
		d.LastStatus, d.LastError = r.LastStatus, r.LastError
		d.DeadReason, d.DeadAt = r.DeadReason, r.DeadAt
		d.Version = r.Version
	}
	return d
}

// whole returns the record of the event as a whole from base, the record
// kept unrouted or one of a delivery.
func (g *Group) whole(base *store.Record) *store.Record {
	if base.Unrouted() {
		return base
	}
	r := *base
	r.Destination, r.Endpoint = "", ""
	r.Attempts, r.Deliveries, r.LastStatus, r.LastError = 0, 0, 0, ""
	r.NextAttemptAt, r.DeadReason, r.DeadAt, r.Version = time.Time{}, "", time.Time{}, 0
	for _, d := range g.Deliveries {
		if d.State == store.StatePending && (r.NextAttemptAt.IsZero() || d.NextAttemptAt.Before(r.NextAttemptAt)) {
			r.NextAttemptAt = d.NextAttemptAt
		}
		r.Attempts = max(r.Attempts, d.Attempts)
		r.Deliveries = max(r.Deliveries, d.Deliveries)
		r.Version = max(r.Version, d.Version)
	}
	return &r
}

// Attempt is a logged attempt of the delivery of a topic event to
// Endpoint.
type Attempt struct {
	store.Attempt
	Endpoint string
}

// GroupAttempts returns the attempts of all the deliveries of the topic
// event id, in the order they started. ok is false when id has no group.
func (a *Admin) GroupAttempts(id string) ([]Attempt, bool, error) {
	members, err := a.St.Group(id)
	if err != nil || len(members) == 0 {
		return nil, false, err
	}
	var out []Attempt
	for _, m := range members {
		as, err := a.St.Attempts(m.ID)
		if errors.Is(err, store.ErrNotFound) {
			continue // trimmed meanwhile
		}
		if err != nil {
			return nil, true, err
		}
		ep := m.ID[len(id)+len(store.GroupSep):]
		for _, at := range as {
			out = append(out, Attempt{Attempt: at, Endpoint: ep})
		}
	}
	slices.SortStableFunc(out, func(a, b Attempt) int {
		return cmp.Or(a.StartedAt.Compare(b.StartedAt), cmp.Compare(a.Endpoint, b.Endpoint), cmp.Compare(a.Seq, b.Seq))
	})
	return out, true, nil
}
