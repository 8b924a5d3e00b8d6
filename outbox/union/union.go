package union

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/outboxd/outbox/outbox"
)

// View serves a primary outbox and a changing set of others as one; the
// package documentation gives the semantics of each method. It is safe for
// concurrent use, as its outboxes are.
type View struct {
	primary *outbox.Outbox
	others  func() []*outbox.Outbox
	settle  func(context.Context, *outbox.Outbox) error
}

// WithSettle returns a View over the same outboxes whose every write
// (Enqueue, Delete, Replay, DeleteDelivery, ReplayDelivery, ReplayDead,
// EnableEndpoint, RetryEndpoint) returns only once settle(ctx, o) returned
// nil for each outbox o the write changed, after the change; its error, if
// any, is the write's (the change was made, but is not known to be
// settled). A write that changed nothing (it failed, or a ReplayDead
// found nothing to replay in a store) does not wait for that store. In
// Kafka group mode settle is Group.WaitShipped: a write is answered once it
// is in the changelog topic, so that no restore undoes it.
func (v *View) WithSettle(settle func(context.Context, *outbox.Outbox) error) *View {
	w := *v
	w.settle = settle
	return &w
}

// settled is err when the write failed, else the first error of settle on
// each outbox the write changed, in turn (nil without settle). Every write
// of the View answers through it.
func (v *View) settled(ctx context.Context, err error, changed ...*outbox.Outbox) error {
	if err != nil || v.settle == nil {
		return err
	}
	for _, o := range changed {
		if err := v.settle(ctx, o); err != nil {
			return err
		}
	}
	return nil
}

// New returns a View over primary, which takes every Enqueue, and the
// outboxes others returns: it is called on every call of the View, from
// any goroutine, and must be quick (return a snapshot, do not open stores).
// A nil others serves the primary alone. New panics when primary is nil.
func New(primary *outbox.Outbox, others func() []*outbox.Outbox) *View {
	if primary == nil {
		panic("union: New with a nil primary outbox")
	}
	return &View{primary: primary, others: others}
}

// stores returns the outboxes to ask, in order: the primary, then the
// others, without nils and repeats.
func (v *View) stores() []*outbox.Outbox {
	if v.others == nil {
		return []*outbox.Outbox{v.primary}
	}
	others := v.others()
	out := make([]*outbox.Outbox, 1, 1+len(others))
	out[0] = v.primary
	for _, o := range others {
		if o != nil && !slices.Contains(out, o) {
			out = append(out, o)
		}
	}
	return out
}

// errAllClosed is the error of a call none of whose stores was open.
func errAllClosed(op string) error {
	return fmt.Errorf("union: %s: %w", op, outbox.ErrClosed)
}

// Enqueue stores the events in the primary outbox (see Outbox.Enqueue).
func (v *View) Enqueue(ctx context.Context, events ...outbox.Event) ([]string, error) {
	ids, err := v.primary.Enqueue(ctx, events...)
	return ids, v.settled(ctx, err, v.primary)
}

// first calls fn on the stores in order until one succeeds. When none does,
// it returns the first error that is neither ErrNotFound nor ErrClosed,
// else the first ErrNotFound, else (every store closed) ErrClosed.
func (v *View) first(op string, fn func(o *outbox.Outbox) error) error {
	var errs storeErrors
	for _, o := range v.stores() {
		if errs.note(fn(o)) {
			return nil
		}
	}
	return errs.result(op)
}

// storeErrors sorts the errors of one call made on several stores: a
// closed store's are dropped, the first ErrNotFound and the first other
// error are kept.
type storeErrors struct {
	notFound, failed error
}

// note records err and reports whether it is nil (the call succeeded).
func (e *storeErrors) note(err error) bool {
	switch {
	case err == nil:
		return true
	case errors.Is(err, outbox.ErrClosed):
	case errors.Is(err, outbox.ErrNotFound):
		e.notFound = cmp.Or(e.notFound, err)
	default:
		e.failed = cmp.Or(e.failed, err)
	}
	return false
}

// result is the call's error when no store succeeded: the first error that
// is neither ErrNotFound nor ErrClosed, else the first ErrNotFound, else
// (every store closed) ErrClosed.
func (e *storeErrors) result(op string) error {
	return cmp.Or(e.failed, e.notFound, errAllClosed(op))
}

// Get returns the event from the first store that holds its ID (see
// Outbox.Get): pending, dead, or delivered or deleted while its tombstone
// lasts. ErrNotFound when no store holds it.
func (v *View) Get(ctx context.Context, id string) (outbox.Event, error) {
	var ev outbox.Event
	err := v.first("get", func(o *outbox.Outbox) error {
		var err error
		ev, err = o.Get(ctx, id)
		return err
	})
	if err != nil {
		return outbox.Event{}, err
	}
	return ev, nil
}

// Delete drops the pending or dead event with that ID from the store that
// holds it (see Outbox.Delete). ErrNotFound when no store holds it.
func (v *View) Delete(ctx context.Context, id string) error {
	return v.first("delete", func(o *outbox.Outbox) error { return v.settled(ctx, o.Delete(ctx, id), o) })
}

// Replay moves the dead event with that ID back to pending in the store that
// holds it (see Outbox.Replay). ErrNotFound when no store holds it,
// ErrNotDead when it is not a dead letter.
func (v *View) Replay(ctx context.Context, id string) error {
	return v.first("replay", func(o *outbox.Outbox) error { return v.settled(ctx, o.Replay(ctx, id), o) })
}

// List returns one page of the pending or dead events of every store, in ID
// order, and the cursor of the next page ("" after the last page), as
// Outbox.List does for one store.
func (v *View) List(ctx context.Context, opt outbox.ListOptions) ([]outbox.Event, string, error) {
	if opt.Limit <= 0 {
		opt.Limit = outbox.DefaultListLimit
	}
	opt.Limit = min(opt.Limit, outbox.MaxListLimit)
	var (
		all     []listed
		bound   string // the lowest next cursor of a store that has more
		bounded bool
		open    bool
	)
	for _, o := range v.stores() {
		evs, next, err := o.List(ctx, opt)
		if errors.Is(err, outbox.ErrClosed) {
			continue
		}
		if err != nil {
			return nil, "", err
		}
		open = true
		for i := range evs {
			all = append(all, listed{cursorOf(&evs[i]), evs[i]})
		}
		if next != "" && (!bounded || next < bound) {
			bound, bounded = next, true
		}
	}
	if !open {
		return nil, "", errAllClosed("list")
	}
	// Stable: of events with the same cursor, the first store's comes
	// first and is the one kept. The cursor orders as a store lists: a
	// topic event's deliveries sort right after an ID equal to the event's.
	slices.SortStableFunc(all, func(a, b listed) int { return strings.Compare(a.cursor, b.cursor) })
	all = slices.CompactFunc(all, func(a, b listed) bool { return a.cursor == b.cursor })
	if bounded {
		// A store that has more may hold events just after its cursor:
		// keep only what is certainly in order.
		all = all[:sort.Search(len(all), func(i int) bool { return all[i].cursor > bound })]
	}
	next := ""
	switch {
	case len(all) > opt.Limit:
		all = all[:opt.Limit]
		next = all[len(all)-1].cursor
	case bounded:
		next = bound
	}
	out := make([]outbox.Event, len(all))
	for i := range all {
		out[i] = all[i].ev
	}
	return out, next, nil
}

// listed is an event of a store's page with its cursor.
type listed struct {
	cursor string
	ev     outbox.Event
}

// ReplayDead replays the dead events matching f in every store in turn
// (see Outbox.ReplayDead), each at f.Rate, with f.Limit bounding the sum,
// and returns how many it replayed. It stops at the first error but
// ErrClosed, returning the count so far and the error.
func (v *View) ReplayDead(ctx context.Context, f outbox.ReplayFilter) (int, error) {
	total := 0
	open := false
	var changed []*outbox.Outbox
	for _, o := range v.stores() {
		g := f
		if f.Limit > 0 {
			if g.Limit = f.Limit - total; g.Limit <= 0 {
				break
			}
		}
		n, err := o.ReplayDead(ctx, g)
		total += n
		if n > 0 {
			changed = append(changed, o)
		}
		if errors.Is(err, outbox.ErrClosed) {
			continue // stopped before or while replaying: the rest is its next owner's
		}
		open = true
		if err != nil {
			return total, err
		}
	}
	if !open && total == 0 {
		return 0, errAllClosed("replay dead")
	}
	return total, v.settled(ctx, nil, changed...)
}

// merged is an endpoint's state over the stores, with the failure streak of
// the store its LastStatus comes from.
type merged struct {
	outbox.EndpointState
	statusStreak int
}

// Endpoints returns the state of every endpoint known to a store, merged
// over the stores (the package documentation gives the rule), sorted by
// name.
func (v *View) Endpoints(ctx context.Context) ([]outbox.EndpointState, error) {
	byName := map[string]*merged{}
	open := false
	for _, o := range v.stores() {
		eps, err := o.Endpoints(ctx)
		if errors.Is(err, outbox.ErrClosed) {
			continue
		}
		if err != nil {
			return nil, err
		}
		open = true
		for _, e := range eps {
			m, ok := byName[e.Name]
			if !ok {
				byName[e.Name] = &merged{EndpointState: e, statusStreak: e.FailureStreak}
				continue
			}
			m.add(e)
		}
	}
	if !open {
		return nil, errAllClosed("endpoints")
	}
	out := make([]outbox.EndpointState, 0, len(byName))
	for _, m := range byName {
		out = append(out, m.EndpointState)
	}
	slices.SortFunc(out, func(a, b outbox.EndpointState) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// EndpointsPage returns one page of what Endpoints returns: up to limit
// endpoints (default outbox.DefaultListLimit, at most outbox.MaxListLimit)
// whose names sort after after, merged over the stores, by name, and the
// cursor of the next page ("" after the last page). It reads one page of
// each store and keeps the names up to the lowest next cursor of a store
// that has more, so that every name on the page is merged over every
// store that knows it and paging misses none.
func (v *View) EndpointsPage(ctx context.Context, after string, limit int) ([]outbox.EndpointState, string, error) {
	if limit <= 0 {
		limit = outbox.DefaultListLimit
	}
	limit = min(limit, outbox.MaxListLimit)
	byName := map[string]*merged{}
	var (
		bound         string // the lowest next cursor of a store that has more
		bounded, open bool
	)
	for _, o := range v.stores() {
		eps, next, err := o.EndpointsPage(ctx, after, limit)
		if errors.Is(err, outbox.ErrClosed) {
			continue
		}
		if err != nil {
			return nil, "", err
		}
		open = true
		for _, e := range eps {
			if m, ok := byName[e.Name]; ok {
				m.add(e)
			} else {
				byName[e.Name] = &merged{EndpointState: e, statusStreak: e.FailureStreak}
			}
		}
		if next != "" && (!bounded || next < bound) {
			bound, bounded = next, true
		}
	}
	if !open {
		return nil, "", errAllClosed("endpoints")
	}
	names := slices.Sorted(maps.Keys(byName))
	if bounded {
		names = names[:sort.Search(len(names), func(i int) bool { return names[i] > bound })]
	}
	next := ""
	switch {
	case len(names) > limit:
		names = names[:limit]
		next = names[limit-1]
	case bounded:
		next = bound
	}
	out := make([]outbox.EndpointState, len(names))
	for i, n := range names {
		out[i] = byName[n].EndpointState
	}
	return out, next, nil
}

// add merges the state e of the same endpoint in a later store.
func (m *merged) add(e outbox.EndpointState) {
	if e.Disabled && (!m.Disabled || e.DisabledAt.Before(m.DisabledAt)) {
		m.Disabled, m.DisabledReason, m.DisabledAt = true, e.DisabledReason, e.DisabledAt
	}
	if e.ThrottledUntil.After(m.ThrottledUntil) {
		m.ThrottledUntil = e.ThrottledUntil
	}
	if openness(e.Breaker) > openness(m.Breaker) || (e.Breaker == m.Breaker && e.BreakerUntil.After(m.BreakerUntil)) {
		// The most open breaker (open, then half-open) stands for all.
		m.Breaker, m.BreakerOpenedAt, m.BreakerUntil, m.BreakerOpens = e.Breaker, e.BreakerOpenedAt, e.BreakerUntil, e.BreakerOpens
	}
	m.Rate += e.Rate // the limit is shared; the rates add up
	// Each store delivers on its own: what is under way and allowed adds
	// up, and the slowest store's latencies stand for all.
	m.InFlight += e.InFlight
	m.InFlightLimit += e.InFlightLimit
	m.LatencyP50, m.LatencyP99 = max(m.LatencyP50, e.LatencyP50), max(m.LatencyP99, e.LatencyP99)
	if e.LastStatus != 0 && (m.LastStatus == 0 || e.FailureStreak > m.statusStreak) {
		m.LastStatus, m.statusStreak = e.LastStatus, e.FailureStreak
	}
	m.FailureStreak += e.FailureStreak
}

// EnableEndpoint re-enables the endpoint and lifts its throttle in every
// store that knows it (see Outbox.EnableEndpoint). ErrNotFound when no
// store does; another store's error is returned after every store was
// asked.
func (v *View) EnableEndpoint(ctx context.Context, name string) error {
	var (
		errs    storeErrors
		enabled []*outbox.Outbox
	)
	for _, o := range v.stores() {
		if errs.note(o.EnableEndpoint(ctx, name)) {
			enabled = append(enabled, o)
		}
	}
	if len(enabled) > 0 && errs.failed == nil {
		return v.settled(ctx, nil, enabled...)
	}
	return errs.result("enable endpoint")
}

// openness ranks breaker states: open, then half-open, then closed.
func openness(s outbox.BreakerState) int {
	switch s {
	case outbox.BreakerOpen:
		return 2
	case outbox.BreakerHalfOpen:
		return 1
	}
	return 0
}

// RetryEndpoint makes the endpoint's pending events due in every store
// that knows it (see Outbox.RetryEndpoint), sharing rate among the stores
// so that the pace over all of them is rate (no store's share below
// outbox.MinRate), and returns how many it made
// due in all. ErrNotFound when no store knows the endpoint; another
// store's error (ErrEndpointDisabled, say) is returned after every store
// was asked.
func (v *View) RetryEndpoint(ctx context.Context, name string, rate float64) (int, error) {
	if rate != 0 {
		if err := outbox.ValidateRate(rate); err != nil {
			return 0, err
		}
	}
	stores := v.stores()
	share := max(outbox.MinRate, cmp.Or(rate, outbox.DefaultReplayRate)/float64(max(1, len(stores))))
	var (
		errs    storeErrors
		retried []*outbox.Outbox
	)
	total := 0
	for _, o := range stores {
		n, err := o.RetryEndpoint(ctx, name, share)
		total += n
		if errs.note(err) {
			retried = append(retried, o)
		}
	}
	if len(retried) > 0 && errs.failed == nil {
		return total, v.settled(ctx, nil, retried...)
	}
	return total, errs.result("retry endpoint")
}

// Stats returns the sum of the stores' Stats (the package documentation
// gives the exceptions).
func (v *View) Stats() outbox.Stats {
	var sum outbox.Stats
	for i, o := range v.stores() {
		s := o.Stats()
		if i == 0 {
			sum = s
			continue
		}
		sum.Pending += s.Pending
		sum.Dead += s.Dead
		sum.Unrouted += s.Unrouted
		sum.UnroutedDroppedTotal += s.UnroutedDroppedTotal
		sum.InFlight += s.InFlight
		sum.DeliveredTotal += s.DeliveredTotal
		sum.FailedTotal += s.FailedTotal
		sum.DeadTotal += s.DeadTotal
		sum.EnqueuedTotal += s.EnqueuedTotal
		sum.DuplicatesTotal += s.DuplicatesTotal
		sum.OldestPendingAge = max(sum.OldestPendingAge, s.OldestPendingAge)
		sum.EndpointsThrottled += s.EndpointsThrottled
		sum.EndpointsDisabled += s.EndpointsDisabled
		sum.EndpointsBreakerOpen += s.EndpointsBreakerOpen
		sum.Tombstones += s.Tombstones
		sum.Endpoints += s.Endpoints
		sum.ChangelogEntries += s.ChangelogEntries
		sum.FileSize += s.FileSize
		sum.KeyIndex = sum.KeyIndex && s.KeyIndex
		sum.Commits = addCommits(sum.Commits, s.Commits)
		sum.Backfill = outbox.Backfill{Running: sum.Backfill.Running || s.Backfill.Running,
			Routed: sum.Backfill.Routed + s.Backfill.Routed, Deliveries: sum.Backfill.Deliveries + s.Backfill.Deliveries,
			Remaining: sum.Backfill.Remaining + s.Backfill.Remaining}
	}
	return sum
}

// Health returns the first error of a store's Health (see Outbox.Health),
// or nil when every store can do its job.
func (v *View) Health() error {
	for _, o := range v.stores() {
		if err := o.Health(); err != nil {
			return err
		}
	}
	return nil
}

// CommitStats returns the sum of the stores' commit statistics, with
// Running the longest (see Outbox.CommitStats). Like it, it takes no lock
// of a store and does not touch a file.
func (v *View) CommitStats() outbox.CommitStats {
	var sum outbox.CommitStats
	for _, o := range v.stores() {
		sum = addCommits(sum, o.CommitStats())
	}
	return sum
}

func addCommits(a, b outbox.CommitStats) outbox.CommitStats {
	return outbox.CommitStats{
		Commits: a.Commits + b.Commits, Failed: a.Failed + b.Failed,
		Calls: a.Calls + b.Calls, Records: a.Records + b.Records,
		Busy:    a.Busy + b.Busy,
		Running: max(a.Running, b.Running),
	}
}
