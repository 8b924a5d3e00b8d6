package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"net/http"
	"regexp"
	"slices"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/outboxd/outbox/outbox"
)

// service is a small orders-and-rooms HTTP service. It keeps its own state in
// its own bbolt file and tells other services about every change through the
// outbox, in the same request:
//
//   - An order goes created → paid → shipped. Each step commits the order and
//     then enqueues its event, keyed by the order: with Config.Ordered the
//     receiver gets an order's events in that order, even while one of them
//     is being retried.
//   - A room's membership changes with joins and leaves. The receiver needs
//     the current membership, not every step, so each change upserts one
//     snapshot per room (outbox.Upsert, keyed by the room): a snapshot still
//     pending is replaced by the newer one (latest state wins).
//
// Both steps of a request are idempotent: the state change is a no-op when
// already made, and the event IDs are derived from the change (order:ID:paid)
// so enqueueing it again is a duplicate the outbox drops. A request that
// failed between the two steps (the process died, the disk filled up) is
// therefore completed by the client's retry, which it makes anyway since it
// got no 2xx.
type service struct {
	db  *bolt.DB
	box *outbox.Outbox

	// roomLocks serialize the changes of one room (striped: rooms that
	// share a stripe just wait for each other). See changeRoom.
	roomLocks [64]sync.Mutex
}

var (
	bucketOrders = []byte("orders")
	bucketRooms  = []byte("rooms")
	validName    = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)
)

// Destinations (httpsink named endpoints) of the events.
const (
	destOrders = "orders"
	destRooms  = "rooms"
)

func openService(path string, box *outbox.Outbox) (*service, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		return nil, fmt.Errorf("service state %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketOrders, bucketRooms} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, err
	}
	return &service{db: db, box: box}, nil
}

func (s *service) close() error { return s.db.Close() }

func (s *service) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /orders", s.createOrder)
	mux.HandleFunc("POST /orders/{id}/pay", s.advanceOrder("paid"))
	mux.HandleFunc("POST /orders/{id}/ship", s.advanceOrder("shipped"))
	mux.HandleFunc("GET /orders/{id}", s.getOrder)
	mux.HandleFunc("POST /rooms/{room}/join", s.changeMembership(true))
	mux.HandleFunc("POST /rooms/{room}/leave", s.changeMembership(false))
	mux.HandleFunc("GET /rooms/{room}", s.getRoom)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	return mux
}

// Order is the service's order record.
type Order struct {
	ID         string `json:"id"`
	Customer   string `json:"customer"`
	TotalCents int64  `json:"total_cents"`
	Status     string `json:"status"` // created, paid, shipped
}

var nextStatus = map[string]string{"paid": "created", "shipped": "paid"} // status -> the one it follows

func (s *service) createOrder(w http.ResponseWriter, r *http.Request) {
	var in Order
	if err := decode(r, &in); err != nil {
		replyError(w, http.StatusBadRequest, err.Error())
		return
	}
	if !validName.MatchString(in.ID) {
		replyError(w, http.StatusBadRequest, "id: 1-64 letters, digits, '_', '.', '-'")
		return
	}
	if in.Customer == "" || in.TotalCents < 0 {
		replyError(w, http.StatusBadRequest, "customer is required and total_cents must not be negative")
		return
	}
	in.Status = "created"
	var stored Order
	err := s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketOrders)
		if v := b.Get([]byte(in.ID)); v != nil {
			if err := json.Unmarshal(v, &stored); err != nil {
				return err
			}
			if stored.Customer != in.Customer || stored.TotalCents != in.TotalCents {
				return errConflict
			}
			return nil // the same order again: a client retry
		}
		stored = in
		v, err := json.Marshal(stored)
		if err != nil {
			return err
		}
		return b.Put([]byte(in.ID), v)
	})
	if err != nil {
		replyStateError(w, err)
		return
	}
	if err := s.enqueueOrderEvent(r.Context(), in, "created"); err != nil {
		replyError(w, http.StatusInternalServerError, "order stored but its event was not: retry the request")
		return
	}
	replyJSON(w, http.StatusCreated, stored)
}

var (
	errConflict       = errors.New("conflict")
	errNotFound       = errors.New("not found")
	errEventNotStored = errors.New("event not stored")
)

type stateError struct{ msg string }

func (e *stateError) Error() string { return e.msg }

func (s *service) advanceOrder(to string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		var o Order
		err := s.db.Update(func(tx *bolt.Tx) error {
			b := tx.Bucket(bucketOrders)
			v := b.Get([]byte(id))
			if v == nil {
				return errNotFound
			}
			if err := json.Unmarshal(v, &o); err != nil {
				return err
			}
			switch {
			case o.Status == to:
				return nil // already done: a client retry
			case o.Status != nextStatus[to]:
				return &stateError{fmt.Sprintf("order %s is %s: it cannot become %s", id, o.Status, to)}
			}
			o.Status = to
			v, err := json.Marshal(o)
			if err != nil {
				return err
			}
			return b.Put([]byte(id), v)
		})
		if err != nil {
			replyStateError(w, err)
			return
		}
		if err := s.enqueueOrderEvent(r.Context(), o, to); err != nil {
			replyError(w, http.StatusInternalServerError, "order updated but its event was not stored: retry the request")
			return
		}
		replyJSON(w, http.StatusOK, o)
	}
}

// enqueueOrderEvent stores the event of one order step. Its ID names the
// step, so a retried request enqueues the same event again and the outbox
// recognises it; its Key is the order, which orders its events.
func (s *service) enqueueOrderEvent(ctx context.Context, o Order, step string) error {
	o.Status = step
	payload, err := json.Marshal(map[string]any{"type": "order." + step, "order": o})
	if err != nil {
		return err
	}
	_, err = s.box.Enqueue(ctx, outbox.Event{
		ID:          "order:" + o.ID + ":" + step,
		Key:         "order:" + o.ID,
		Destination: destOrders,
		Headers:     map[string]string{"Content-Type": "application/json", "X-Event-Type": "order." + step},
		Payload:     payload,
	})
	return err
}

func (s *service) getOrder(w http.ResponseWriter, r *http.Request) {
	var o Order
	err := s.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketOrders).Get([]byte(r.PathValue("id")))
		if v == nil {
			return errNotFound
		}
		return json.Unmarshal(v, &o)
	})
	if err != nil {
		replyStateError(w, err)
		return
	}
	replyJSON(w, http.StatusOK, o)
}

// Room is a room's membership, with a revision that grows with every change.
type Room struct {
	Name     string   `json:"room"`
	Revision uint64   `json:"revision"`
	Members  []string `json:"members"` // sorted
}

func (s *service) changeMembership(join bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			User string `json:"user"`
		}
		if err := decode(r, &in); err != nil {
			replyError(w, http.StatusBadRequest, err.Error())
			return
		}
		room := r.PathValue("room")
		if !validName.MatchString(room) || !validName.MatchString(in.User) {
			replyError(w, http.StatusBadRequest, "room and user: 1-64 letters, digits, '_', '.', '-'")
			return
		}
		rm, err := s.changeRoom(r.Context(), room, in.User, join)
		if errors.Is(err, errEventNotStored) {
			replyError(w, http.StatusInternalServerError, "membership changed but its event was not stored: retry the request")
			return
		}
		if err != nil {
			replyStateError(w, err)
			return
		}
		replyJSON(w, http.StatusOK, rm)
	}
}

// changeRoom adds or removes user and upserts the room's snapshot.
//
// The room-leave race, and how it is avoided. Two users leave a room {a, b}
// at once; each request reads the room, removes its user and writes it back.
// Done naively, both read {a, b}, one writes {b}, the other {a}: the room
// keeps a user who left. The same race can happen a second time on the way
// out: if the snapshots {b} (older) and {} (newer) reach the outbox in the
// wrong order, the receiver ends with the older one.
//
// So a change of a room runs under that room's lock, around both steps:
//
//  1. the read-modify-write of the membership, in one bbolt write
//     transaction (which also serializes it against every other writer);
//  2. the upsert of the snapshot, which replaces the room's pending snapshot
//     inside the outbox's own serialized write transaction.
//
// Snapshots therefore reach the outbox in the order of the changes, and the
// latest one always wins. (Comparing revisions inside Upsert's fn alone would
// not do: once the previous snapshot was delivered, fn sees no pending event
// and cannot tell a late, older snapshot from a new one.) Each carries the room's revision, so a receiver can
// also drop one that arrives after a newer one (delivery is at-least-once:
// a snapshot already being delivered when a newer one replaced it still
// arrives).
func (s *service) changeRoom(ctx context.Context, room, user string, join bool) (Room, error) {
	mu := &s.roomLocks[stripe(room, len(s.roomLocks))]
	mu.Lock()
	defer mu.Unlock()

	var rm Room
	err := s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketRooms)
		rm = Room{Name: room}
		if v := b.Get([]byte(room)); v != nil {
			if err := json.Unmarshal(v, &rm); err != nil {
				return err
			}
		}
		i, member := slices.BinarySearch(rm.Members, user)
		switch {
		case join && !member:
			rm.Members = slices.Insert(rm.Members, i, user)
		case !join && member:
			rm.Members = slices.Delete(rm.Members, i, i+1)
		default:
			return nil // nothing changes (a retry, or a leave of a non-member)
		}
		rm.Revision++
		v, err := json.Marshal(rm)
		if err != nil {
			return err
		}
		return b.Put([]byte(room), v)
	})
	if err != nil {
		return Room{}, err
	}
	if rm.Members == nil {
		rm.Members = []string{}
	}

	// Upsert even when nothing changed: if the previous attempt of this
	// request failed after its state change, this stores the snapshot it
	// could not. A snapshot the receiver already has is harmless (same
	// revision).
	payload, err := json.Marshal(map[string]any{"type": "room.membership", "room": rm.Name, "revision": rm.Revision, "members": rm.Members})
	if err != nil {
		return Room{}, err
	}
	_, err = s.box.Upsert(ctx, "room:"+room, func(current *outbox.Event) (outbox.Event, error) {
		// A new ID per revision: a receiver that deduplicates on webhook-id
		// must not mistake a newer snapshot for one it already has.
		return outbox.Event{
			ID:          fmt.Sprintf("room:%s:r%d", room, rm.Revision),
			Destination: destRooms,
			Headers:     map[string]string{"Content-Type": "application/json", "X-Event-Type": "room.membership"},
			Payload:     payload,
		}, nil
	})
	if err != nil {
		return Room{}, fmt.Errorf("%w: %w", errEventNotStored, err)
	}
	return rm, nil
}

func stripe(s string, n int) int {
	h := fnv.New32a()
	h.Write([]byte(s))
	return int(h.Sum32() % uint32(n))
}

func (s *service) getRoom(w http.ResponseWriter, r *http.Request) {
	rm := Room{Name: r.PathValue("room"), Members: []string{}}
	err := s.db.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bucketRooms).Get([]byte(rm.Name)); v != nil {
			return json.Unmarshal(v, &rm)
		}
		return nil
	})
	if err != nil {
		replyStateError(w, err)
		return
	}
	replyJSON(w, http.StatusOK, rm)
}

func decode(r *http.Request, v any) error {
	dec := json.NewDecoder(io.LimitReader(r.Body, 64<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("bad JSON body: %v", err)
	}
	return nil
}

func replyStateError(w http.ResponseWriter, err error) {
	var se *stateError
	switch {
	case errors.Is(err, errNotFound):
		replyError(w, http.StatusNotFound, "not found")
	case errors.Is(err, errConflict):
		replyError(w, http.StatusConflict, "an order with this id exists with other details")
	case errors.As(err, &se):
		replyError(w, http.StatusConflict, se.msg)
	default:
		replyError(w, http.StatusInternalServerError, "state not stored: retry the request")
	}
}

func replyError(w http.ResponseWriter, status int, msg string) {
	replyJSON(w, status, map[string]string{"error": msg})
}

func replyJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
