package admin

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"time"

	"github.com/outboxd/outbox/outbox/internal/engine"
	"github.com/outboxd/outbox/outbox/internal/ratelimit"
	"github.com/outboxd/outbox/store"
)

// Admin runs the operator's reads and writes on one store.
type Admin struct {
	St  *store.Store
	Log *slog.Logger
	// Now is the outbox's clock.
	Now func() time.Time
	// MapErr maps a store error of operation op on the event id to the
	// outbox's errors.
	MapErr func(op, id string, err error) error
	// LogStoreErr logs a store error of a background step.
	LogStoreErr func(step string, err error)
	// Wake asks the delivery punctuation to run now.
	Wake func()
	// Stopped is closed when the outbox stops; pacing then ends with
	// ErrStopped.
	Stopped    <-chan struct{}
	ErrStopped error
}

// ListFilter selects the pending or dead records List returns. Zero fields
// match everything.
type ListFilter struct {
	// Dead lists dead letters, where the unrouted and the routed are
	// listed together; otherwise Unrouted chooses between them.
	Dead, Unrouted                bool
	Topic, Destination, KeyPrefix string
	// CreatedFrom and CreatedTo keep the records created in [From, To).
	CreatedFrom, CreatedTo time.Time
}

// Match reports whether r passes the filter.
func (f *ListFilter) Match(r *store.Record) bool {
	switch {
	case !f.Dead && f.Unrouted != r.Unrouted(),
		f.Topic != "" && r.Topic != f.Topic,
		f.Destination != "" && r.Destination != f.Destination,
		f.KeyPrefix != "" && !strings.HasPrefix(r.Key, f.KeyPrefix),
		!f.CreatedFrom.IsZero() && r.CreatedAt.Before(f.CreatedFrom),
		!f.CreatedTo.IsZero() && !r.CreatedAt.Before(f.CreatedTo):
		return false
	}
	return true
}

// List returns one page of the records in state (pending or dead) after
// the ID after, that f keeps, and the cursor of the next page. Pending
// records are filtered whenever events are kept unrouted, which are
// listed only when f asks for them.
func (a *Admin) List(state store.State, after string, limit int, f ListFilter) ([]*store.Record, string, error) {
	f.Dead = state == store.StateDead
	q := store.ListQuery{State: state, After: after, Limit: limit}
	if f.Destination != "" || f.KeyPrefix != "" || !f.CreatedFrom.IsZero() || !f.CreatedTo.IsZero() ||
		f.Topic != "" || f.Unrouted || (state == store.StatePending && a.HasUnrouted()) {
		q.Filter = f.Match
	}
	return a.St.List(q)
}

// HasUnrouted reports whether events are kept unrouted (List then leaves
// them out of the pending events).
func (a *Admin) HasUnrouted() bool {
	ss, err := a.St.Stats()
	return err != nil || ss.Unrouted > 0
}

// DeadFilter selects dead letters for ReplayDead. Zero fields match
// everything.
type DeadFilter struct {
	Destination, KeyPrefix, Topic string
	Status                        int
	// From and To keep the records that became dead in [From, To).
	From, To time.Time
}

// Match reports whether r passes the filter.
func (f *DeadFilter) Match(r *store.Record) bool {
	switch {
	case f.Topic != "" && r.Topic != f.Topic,
		f.Destination != "" && r.Destination != f.Destination,
		f.Status != 0 && r.LastStatus != f.Status,
		f.KeyPrefix != "" && !strings.HasPrefix(r.Key, f.KeyPrefix),
		!f.From.IsZero() && r.DeadAt.Before(f.From),
		!f.To.IsZero() && !r.DeadAt.Before(f.To):
		return false
	}
	return true
}

// ReplayDead moves the dead letters f keeps back to pending, perSecond of
// them a second, at most limit of them (0: all), and returns how many it
// replayed. It stops early, returning the count so far and the error, when
// ctx is done or the outbox stops.
func (a *Admin) ReplayDead(ctx context.Context, f DeadFilter, limit int, perSecond float64, pageSize int) (int, error) {
	start := time.Now()
	n := 0
	after := ""
	for {
		page := pageSize
		if limit > 0 {
			page = min(page, limit-n)
		}
		recs, next, err := a.St.List(store.ListQuery{State: store.StateDead, After: after, Limit: page, Filter: f.Match})
		if err != nil {
			return n, a.MapErr("replay dead", "", err)
		}
		for _, r := range recs {
			if err := a.pace(ctx, start.Add(ratelimit.Span(n, perSecond))); err != nil {
				return n, err
			}
			if _, err := a.St.Replay(ctx, r.ID, a.Now().UTC()); err != nil {
				if isGone(err) {
					continue // dropped or replayed meanwhile
				}
				return n, a.MapErr("replay dead", r.ID, err)
			}
			n++
			if n == 1 || n%64 == 0 {
				a.Wake()
			}
		}
		if next == "" || (limit > 0 && n >= limit) {
			break
		}
		after = next
	}
	if n > 0 {
		a.Wake()
	}
	return n, nil
}

func isGone(err error) bool {
	return errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrNotDead)
}

// pace waits until t (monotonic), ctx is done, or the outbox stops.
func (a *Admin) pace(ctx context.Context, t time.Time) error {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err()
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-a.Stopped:
		return a.ErrStopped
	}
}

// OldestPending estimates when the age of the oldest pending event started
// (as the max age counts it) from the first IDs (UUIDv7 IDs sort by
// creation) and the earliest due events, without a full scan. Events kept
// unrouted do not count.
func (a *Admin) OldestPending(now time.Time) (time.Time, bool) {
	var oldest time.Time
	consider := func(recs []*store.Record) {
		for _, r := range recs {
			if r.Unrouted() {
				continue // waiting for a subscriber, not for a delivery
			}
			if start := engine.AgeStart(r); oldest.IsZero() || start.Before(oldest) {
				oldest = start
			}
		}
	}
	if recs, _, err := a.St.List(store.ListQuery{State: store.StatePending, Limit: 16}); err == nil {
		consider(recs)
	}
	if recs, err := a.St.Due(store.DueQuery{Now: now.Add(100 * 365 * 24 * time.Hour), Limit: 16}); err == nil {
		consider(recs)
	}
	return oldest, !oldest.IsZero()
}

// Maintain trims the tombstones older than tombstones, and the changelog
// past p (when p sets a limit). Failures are logged.
func (a *Admin) Maintain(ctx context.Context, tombstones time.Time, p store.TrimPolicy) {
	if n, err := a.St.TrimTombstones(ctx, tombstones); err != nil {
		a.LogStoreErr("trim tombstones", err)
	} else if n > 0 {
		a.Log.Debug("outbox: trimmed tombstones", "n", n)
	}
	if p.MaxAge > 0 || p.MaxEntries > 0 {
		if n, err := a.St.TrimChangelog(ctx, p); err != nil {
			a.LogStoreErr("trim changelog", err)
		} else if n > 0 {
			a.Log.Debug("outbox: trimmed changelog", "n", n)
		}
	}
}

// TrimArchive removes the archived deliveries made before olderThan, and
// then the oldest beyond maxBytes (when > 0). Failures are logged.
func (a *Admin) TrimArchive(ctx context.Context, olderThan time.Time, maxBytes int64) {
	if n, err := a.St.TrimArchive(ctx, olderThan, maxBytes); err != nil {
		a.LogStoreErr("trim archive", err)
	} else if n > 0 {
		a.Log.Debug("outbox: trimmed archive", "n", n)
	}
}
