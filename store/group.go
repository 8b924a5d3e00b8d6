package store

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
)

// GroupSep separates the group ID from the rest of a record's ID. The
// records of one fan-out event (its deliveries, one per endpoint, or the
// event kept unrouted) are stored under GroupID ‖ GroupSep ‖ Endpoint and
// form a group, which Insert deduplicates as a whole: an ID without GroupSep
// is a group of its own. The outbox never accepts control characters in an
// event ID, so no ID of its own contains the separator.
const GroupSep = "\x1f"

// GroupOf returns the group ID of a record ID: the part before the first
// GroupSep, or the whole ID when it has none.
func GroupOf(id string) string {
	if i := strings.IndexByte(id, GroupSep[0]); i >= 0 {
		return id[:i]
	}
	return id
}

// Unrouted reports whether r is a fan-out event kept unrouted: it has a
// Topic and no Endpoint (no endpoint subscribed to its topic when it was
// stored). Stats.Unrouted counts such pending records.
func (r *Record) Unrouted() bool { return r.Topic != "" && r.Endpoint == "" }

// indexKey is the key under which the key index orders r: its Key, scoped
// by its Endpoint for a fan-out delivery (Endpoint ‖ GroupSep ‖ Key), so
// that one endpoint's deliveries of a key never wait for another's. "" when
// r has no Key.
func (r *Record) indexKey() string {
	if r.Key == "" || r.Topic == "" {
		return r.Key
	}
	return r.Endpoint + GroupSep + r.Key
}

// SameEvent reports whether r and o are records of the same event: equal
// group, Key, Topic, Method, Headers and Payload, and, for records without
// a Topic, equal Destination. Two deliveries of one fan-out event to
// different endpoints are the same event.
func (r *Record) SameEvent(o *Record) bool {
	if r == nil || o == nil {
		return r == o
	}
	if r.Topic == "" && r.Destination != o.Destination {
		return false
	}
	return GroupOf(r.ID) == GroupOf(o.ID) && r.Key == o.Key && r.Topic == o.Topic && r.Method == o.Method &&
		maps.Equal(r.Headers, o.Headers) && bytes.Equal(r.Payload, o.Payload)
}

// groupState is what a group holds apart from one record of it.
type groupState struct {
	live      *Record // a pending or dead member, nil when none
	tomb      bool    // a member has a tombstone
	deleted   bool    // a member's tombstone is of a drop by an operator
	deletedAt time.Time
}

// groupState looks at the members of group g: pending, dead or
// tombstoned.
func (w *wtx) groupState(g string) (groupState, error) {
	var gs groupState
	exact := []byte(g)
	prefix := []byte(g + GroupSep)
	member := func(k []byte) bool {
		return bytes.Equal(k, exact) || bytes.HasPrefix(k, prefix)
	}
	for _, b := range []*bolt.Bucket{w.events, w.dead} {
		c := w.cursor(b)
		for k, v := c.Seek(exact); k != nil && (bytes.Equal(k, exact) || bytes.HasPrefix(k, prefix)); k, v = c.Next() {
			if !member(k) {
				continue
			}
			r, err := decodeStored(k, v)
			if err != nil {
				return gs, err
			}
			gs.live = r
			return gs, nil
		}
	}
	var tombs [][]byte
	c := w.cursor(w.tombs)
	for k, _ := c.Seek(exact); k != nil && (bytes.Equal(k, exact) || bytes.HasPrefix(k, prefix)); k, _ = c.Next() {
		if member(k) {
			tombs = append(tombs, bytes.Clone(k))
		}
	}
	for _, k := range tombs {
		t, ok, err := w.lookupTombstone(k)
		if err != nil {
			return gs, err
		}
		if !ok {
			continue
		}
		gs.tomb = true
		if t.kind == tombDeleted {
			gs.deleted, gs.deletedAt = true, t.deletedAt
		}
	}
	return gs, nil
}

// insertCheckGroup decides what inserting r (not stored under its own ID,
// pending or dead) would do given its group: AlreadyPresent when a member
// of the same event is pending or dead (a conflict when it is another
// event), Deleted when only tombstones remain of the group and one is of a
// drop by an operator (a *DeletedError when refuseDeleted), Duplicate when
// only tombstones of deliveries remain, Inserted when the group is new. A
// record without GroupSep in its ID is a group of its own, for which this
// is the tombstone check of its ID.
func (w *wtx) insertCheckGroup(r *Record, refuseDeleted bool) (InsertStatus, error) {
	gs, err := w.groupState(GroupOf(r.ID))
	if err != nil {
		return 0, err
	}
	if gs.live != nil {
		if !gs.live.SameEvent(r) {
			return 0, &ConflictError{ID: GroupOf(r.ID)}
		}
		return AlreadyPresent, nil
	}
	switch {
	case !gs.tomb:
		return Inserted, nil
	case !gs.deleted:
		return Duplicate, nil
	case refuseDeleted:
		return 0, &DeletedError{ID: GroupOf(r.ID), DeletedAt: gs.deletedAt}
	}
	return Deleted, nil
}

// checkGroupsInCall refuses a call that holds two different events of one
// group (say a fan-out event and a single-destination event under one ID).
func checkGroupsInCall(recs []*Record) error {
	grouped := false
	for _, r := range recs {
		if strings.Contains(r.ID, GroupSep) {
			grouped = true
			break
		}
	}
	if !grouped {
		return nil
	}
	first := make(map[string]*Record, len(recs))
	for _, r := range recs {
		g := GroupOf(r.ID)
		if f, ok := first[g]; !ok {
			first[g] = r
		} else if !f.SameEvent(r) {
			return &ConflictError{ID: g}
		}
	}
	return nil
}

// Member is one record of a group as Group returns it.
type Member struct {
	// ID is the record's ID.
	ID string
	// State is pending, dead, delivered or deleted.
	State State
	// Record is the record (pending or dead); nil for a tombstone.
	Record *Record
}

// Group returns the members of group g stored under g ‖ GroupSep ‖ ...:
// pending and dead records and tombstones, in ID order (a record pending
// or dead is not listed again for a tombstone of its ID). The record
// stored under g itself, if any, is not a member: Get reads it.
func (s *Store) Group(g string) ([]Member, error) {
	var out []Member
	err := s.view(func(tx *bolt.Tx) error {
		prefix := []byte(g + GroupSep)
		seen := map[string]bool{}
		for _, b := range []struct {
			name []byte
			st   State
		}{{bucketEvents, StatePending}, {bucketDead, StateDead}} {
			c := tx.Bucket(b.name).Cursor()
			for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
				r, err := decodeStored(k, v)
				if err != nil {
					return err
				}
				out = append(out, Member{ID: r.ID, State: b.st, Record: r})
				seen[r.ID] = true
			}
		}
		tc := tx.Bucket(bucketTombs).Cursor()
		index := tx.Bucket(bucketTombTime).Cursor()
		var ids [][]byte
		for k, _ := tc.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = tc.Next() {
			if !seen[string(k)] {
				ids = append(ids, bytes.Clone(k))
			}
		}
		for _, k := range ids {
			t, ok, err := lookupTombstone(tx.Bucket(bucketTombs).Cursor(), index, k)
			if err != nil {
				return err
			}
			if !ok {
				continue
			}
			st := StateDelivered
			if t.kind == tombDeleted {
				st = StateDeleted
			}
			out = append(out, Member{ID: string(k), State: st})
		}
		return nil
	})
	slices.SortFunc(out, func(a, b Member) int { return cmp.Compare(a.ID, b.ID) })
	return out, err
}

// DropGroup drops every pending and dead member of group g, as Drop does
// each, in one transaction, and returns how many. ErrNotFound when none is
// pending or dead.
func (s *Store) DropGroup(ctx context.Context, g, reason string) (int, error) {
	n := 0
	err := s.do(ctx, 1, func(w *wtx) error {
		n = 0
		recs, dead, err := w.groupLive(g)
		if err != nil {
			return err
		}
		if len(recs)+len(dead) == 0 {
			return fmt.Errorf("%w: no pending or dead record in group %q", ErrNotFound, g)
		}
		for _, r := range recs {
			lsn := w.next()
			w.removePending(r)
			w.tombstone(r.ID, tombDeleted)
			w.log(lsn, OpDrop, r.ID, nil, cmp.Or(reason, "dropped by operator"))
		}
		for _, r := range dead {
			lsn := w.next()
			w.removeDead(r)
			w.tombstone(r.ID, tombDeleted)
			w.log(lsn, OpDrop, r.ID, nil, cmp.Or(reason, "dropped by operator"))
		}
		n = len(recs) + len(dead)
		return nil
	})
	return n, err
}

// ReplayGroup replays every dead member of group g, as Replay does each, in
// one transaction, and returns how many. ErrNotDead when members are
// pending but none is dead, ErrNotFound when none is pending or dead.
func (s *Store) ReplayGroup(ctx context.Context, g string, now time.Time) (int, error) {
	n := 0
	err := s.do(ctx, 1, func(w *wtx) error {
		n = 0
		recs, dead, err := w.groupLive(g)
		if err != nil {
			return err
		}
		if len(dead) == 0 {
			if len(recs) > 0 {
				return fmt.Errorf("%w: no member of group %q is dead", ErrNotDead, g)
			}
			return fmt.Errorf("%w: no dead record in group %q", ErrNotFound, g)
		}
		for _, d := range dead {
			w.replay(d, now)
		}
		n = len(dead)
		return nil
	})
	return n, err
}

// groupLive returns the pending and the dead members of group g.
func (w *wtx) groupLive(g string) (pending, dead []*Record, err error) {
	prefix := []byte(g + GroupSep)
	for _, b := range []*bolt.Bucket{w.events, w.dead} {
		var recs []*Record
		c := b.Cursor()
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			r, err := decodeStored(k, v)
			if err != nil {
				return nil, nil, err
			}
			recs = append(recs, r)
		}
		if b == w.events {
			pending = recs
		} else {
			dead = recs
		}
	}
	return pending, dead, nil
}

// Route replaces the pending record id (a fan-out event kept unrouted, at
// the version given) with recs, its deliveries, in one transaction: the
// record is removed with a tombstone (OpSupersede) and each delivery
// inserted pending (OpEnqueue; defaults as in Insert), keeping the
// record's CreatedAt when theirs is zero. Every delivery must be of the
// same group and event and new to the store. It returns ErrStale when the
// record is not pending at that version (it expired, was dropped or
// routed meanwhile) and writes nothing.
func (s *Store) Route(ctx context.Context, id string, version uint64, recs []*Record) error {
	if err := checkRoute(id, recs); err != nil {
		return err
	}
	return s.do(ctx, max(len(recs), 1), func(w *wtx) error {
		cur, err := w.routable(id, version, recs)
		if err != nil {
			return err
		}
		w.route(cur, recs)
		return nil
	})
}

// Routing is one pending record to replace with its deliveries in a
// RouteMany call: Route's arguments.
type Routing struct {
	ID      string
	Version uint64
	Recs    []*Record
}

// RouteMany does what Route does for each of rs, in one write transaction
// (keep it bounded: a few hundred records). The answer has one error per
// routing, nil for those done: ErrStale or a *ConflictError leaves that
// one as it was and the others go on. The error is the transaction's
// (then nothing was written) or a routing's invalid record.
func (s *Store) RouteMany(ctx context.Context, rs []Routing) ([]error, error) {
	weight := 0
	for _, r := range rs {
		if err := checkRoute(r.ID, r.Recs); err != nil {
			return nil, err
		}
		weight += max(len(r.Recs), 1)
	}
	errs := make([]error, len(rs))
	err := s.do(ctx, max(weight, 1), func(w *wtx) error {
		curs := make([]*Record, len(rs))
		for i, r := range rs {
			cur, err := w.routable(r.ID, r.Version, r.Recs)
			var ce *ConflictError
			switch {
			case errors.Is(err, ErrStale) || errors.As(err, &ce):
				errs[i] = err
			case err != nil:
				return err
			}
			curs[i] = cur
		}
		for i, r := range rs {
			if errs[i] == nil {
				w.route(curs[i], r.Recs)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return errs, nil
}

// checkRoute checks Route's records before the transaction.
func checkRoute(id string, recs []*Record) error {
	for i, r := range recs {
		if err := validateRecord(r); err != nil {
			return fmt.Errorf("record %d: %w", i, err)
		}
		if GroupOf(r.ID) != GroupOf(id) || r.ID == id {
			return fmt.Errorf("%w: record %d (%q) is not a delivery of %q", ErrInvalid, i, r.ID, id)
		}
	}
	return nil
}

// routable returns the pending record id at version when recs, its
// deliveries, can replace it: ErrStale when it is not pending at that
// version, a *ConflictError when a delivery is of another event or exists.
// It writes nothing.
func (w *wtx) routable(id string, version uint64, recs []*Record) (*Record, error) {
	cur, err := w.getPending(id)
	if err != nil {
		return nil, err
	}
	if cur == nil || cur.Version != version {
		return nil, ErrStale
	}
	for _, r := range recs {
		if !cur.SameEvent(r) {
			return nil, &ConflictError{ID: GroupOf(id)}
		}
		k := []byte(r.ID)
		if w.get(w.events, k) != nil || w.get(w.dead, k) != nil || w.get(w.tombs, k) != nil {
			return nil, &ConflictError{ID: r.ID}
		}
	}
	return cur, nil
}

// route replaces cur with recs (checked by routable).
func (w *wtx) route(cur *Record, recs []*Record) {
	lsn := w.next()
	w.removePending(cur)
	w.tombstone(cur.ID, tombDelivered)
	w.log(lsn, OpSupersede, cur.ID, nil, "routed")
	for _, r := range recs {
		c := r.clone()
		c.Version, c.seq = 0, 0
		c.DeadReason, c.DeadAt = "", time.Time{}
		if c.CreatedAt.IsZero() {
			c.CreatedAt = cur.CreatedAt
		}
		w.insertNew(c)
		r.Version = c.Version
	}
}
