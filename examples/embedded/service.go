package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"

	"github.com/outboxd/outbox/outbox"
)

// service is a small orders-and-rooms HTTP service. It keeps its own state in
// the outbox's file, in buckets of its own, and every request is one
// Outbox.Update: the state change and the event that tells other services
// about it commit together, or neither does. That is the outbox pattern: no
// crash, full disk or failed request can leave a change without its event or
// an event without its change.
//
//   - An order goes created → paid → shipped. Each step writes the order and
//     enqueues its event, keyed by the order: with Config.Ordered the
//     receiver gets an order's events in that order, even while one of them
//     is being retried.
//   - A room's membership changes with joins and leaves. The receiver needs
//     the current membership, not every step, so each change upserts one
//     snapshot per room (Tx.Upsert, keyed by the room): a snapshot still
//     pending is replaced by the newer one (latest state wins).
//
// A client that got no 2xx retries. Since a request commits whole or not at
// all, the retry either makes the change (the first attempt stored nothing)
// or finds it made, with its event, and changes nothing.
type service struct {
	box *outbox.Outbox
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

// openService creates the service's buckets in the outbox's file.
func openService(box *outbox.Outbox) (*service, error) {
	err := box.Update(context.Background(), func(tx *outbox.Tx) error {
		for _, b := range [][]byte{bucketOrders, bucketRooms} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("service state: %w", err)
	}
	return &service{box: box}, nil
}

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
	err := s.box.Update(r.Context(), func(tx *outbox.Tx) error {
		b := tx.Bucket(bucketOrders)
		if v := b.Get([]byte(in.ID)); v != nil {
			if err := json.Unmarshal(v, &stored); err != nil {
				return err
			}
			if stored.Customer != in.Customer || stored.TotalCents != in.TotalCents {
				return errConflict
			}
			return nil // the same order again: a client retry; its event is stored
		}
		stored = in
		v, err := json.Marshal(stored)
		if err != nil {
			return err
		}
		if err := b.Put([]byte(in.ID), v); err != nil {
			return err
		}
		return enqueueOrderEvent(tx, in, "created")
	})
	if err != nil {
		replyStateError(w, err)
		return
	}
	replyJSON(w, http.StatusCreated, stored)
}

var (
	errConflict = errors.New("conflict")
	errNotFound = errors.New("not found")
)

type stateError struct{ msg string }

func (e *stateError) Error() string { return e.msg }

func (s *service) advanceOrder(to string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		var o Order
		err := s.box.Update(r.Context(), func(tx *outbox.Tx) error {
			b := tx.Bucket(bucketOrders)
			v := b.Get([]byte(id))
			if v == nil {
				return errNotFound
			}
			o = Order{}
			if err := json.Unmarshal(v, &o); err != nil {
				return err
			}
			switch {
			case o.Status == to:
				return nil // already done: a client retry; its event is stored
			case o.Status != nextStatus[to]:
				return &stateError{fmt.Sprintf("order %s is %s: it cannot become %s", id, o.Status, to)}
			}
			o.Status = to
			v, err := json.Marshal(o)
			if err != nil {
				return err
			}
			if err := b.Put([]byte(id), v); err != nil {
				return err
			}
			return enqueueOrderEvent(tx, o, to)
		})
		if err != nil {
			replyStateError(w, err)
			return
		}
		replyJSON(w, http.StatusOK, o)
	}
}

// enqueueOrderEvent enqueues the event of one order step in the step's
// transaction. Its ID names the step; its Key is the order, which orders its
// events.
func enqueueOrderEvent(tx *outbox.Tx, o Order, step string) error {
	o.Status = step
	payload, err := json.Marshal(map[string]any{"type": "order." + step, "order": o})
	if err != nil {
		return err
	}
	_, err = tx.Enqueue(outbox.Event{
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
	err := s.box.View(r.Context(), func(tx *outbox.ViewTx) error {
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
		if err != nil {
			replyStateError(w, err)
			return
		}
		replyJSON(w, http.StatusOK, rm)
	}
}

// changeRoom adds or removes user and upserts the room's snapshot.
//
// The room-leave race, and why one Update avoids it. Two users leave a room
// {a, b} at once; each request reads the room, removes its user and writes
// it back. Done naively, both read {a, b}, one writes {b}, the other {a}:
// the room keeps a user who left. The same race can happen a second time on
// the way out: if the snapshots {b} (older) and {} (newer) reach the outbox
// in the wrong order, the receiver ends with the older one.
//
// In one Update both steps, the read-modify-write of the membership and the
// upsert of its snapshot, run in one write transaction, serialized with
// every other write to the file: no other change of the room comes between
// them, snapshots replace each other in the order of the changes, and the
// latest one always wins. Each carries the room's revision, so a receiver
// can also drop one that arrives after a newer one (delivery is
// at-least-once: a snapshot already being delivered when a newer one
// replaced it still arrives).
func (s *service) changeRoom(ctx context.Context, room, user string, join bool) (Room, error) {
	var rm Room
	err := s.box.Update(ctx, func(tx *outbox.Tx) error {
		b := tx.Bucket(bucketRooms)
		rm = Room{Name: room} // set anew on each run of this function
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
		if err := b.Put([]byte(room), v); err != nil {
			return err
		}
		members := rm.Members
		if members == nil {
			members = []string{}
		}
		payload, err := json.Marshal(map[string]any{"type": "room.membership", "room": rm.Name, "revision": rm.Revision, "members": members})
		if err != nil {
			return err
		}
		_, err = tx.Upsert("room:"+room, func(*outbox.Event) (outbox.Event, error) {
			// A new ID per revision: a receiver that deduplicates on
			// webhook-id must not mistake a newer snapshot for one it
			// already has.
			return outbox.Event{
				ID:          fmt.Sprintf("room:%s:r%d", room, rm.Revision),
				Destination: destRooms,
				Headers:     map[string]string{"Content-Type": "application/json", "X-Event-Type": "room.membership"},
				Payload:     payload,
			}, nil
		})
		return err
	})
	if err != nil {
		return Room{}, err
	}
	if rm.Members == nil {
		rm.Members = []string{}
	}
	return rm, nil
}

func (s *service) getRoom(w http.ResponseWriter, r *http.Request) {
	rm := Room{Name: r.PathValue("room"), Members: []string{}}
	err := s.box.View(r.Context(), func(tx *outbox.ViewTx) error {
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
		replyError(w, http.StatusInternalServerError, "nothing was stored: retry the request")
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
