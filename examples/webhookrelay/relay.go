package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/outboxd/outbox/examples/internal/console"
	"github.com/outboxd/outbox/outbox"
)

// relay receives provider webhooks at POST /hooks/{source}.
type relay struct {
	cfg *Config
	box *outbox.Outbox
	out *console.Console
	now func() time.Time
}

// ServeHTTP verifies the webhook, stores it as one event on its topic (one
// delivery per subscribed target) and answers 2xx only once it is durable.
func (rl *relay) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("source")
	src := rl.cfg.Sources[name]
	if src == nil {
		reply(w, http.StatusNotFound, "unknown source")
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, int64(rl.cfg.MaxBody)))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			reply(w, http.StatusRequestEntityTooLarge, "body too large")
			return
		}
		reply(w, http.StatusBadRequest, "could not read the body")
		return
	}
	in, err := src.verifier.verify(r.Header, body, rl.now())
	if err != nil {
		status := http.StatusUnauthorized
		if errors.Is(err, errNoDeliveryID) || errors.Is(err, errBadDeliveryID) {
			status = http.StatusBadRequest // signed, but not something we can relay
		}
		rl.out.Printf("✗ %s: %d %s — %v, nothing stored", name, status, http.StatusText(status), err)
		reply(w, status, err.Error())
		return
	}

	// One event on the topic <source>.<type>: the outbox makes one
	// delivery of it per target subscribed to that topic, each with its own
	// retries, parks and dead letter, all carrying the event ID as
	// webhook-id. The ID is derived from the provider's delivery ID, so a
	// redelivery maps onto the same event and the outbox's dedup drops it.
	topic := topicOf(name, in.Type)
	h := map[string]string{
		"Content-Type":      contentType(r),
		"X-Relay-Source":    name,
		"X-Relay-Delivery":  in.DeliveryID,
		"X-Relay-Signature": "verified:" + src.Scheme,
		"X-Relay-Topic":     topic,
	}
	if in.Type != "" {
		h["X-Relay-Event-Type"] = in.Type
	}
	events := []outbox.Event{{ID: eventID(name, in.DeliveryID), Topic: topic, Headers: h, Payload: body}}
	dup := rl.seen(r.Context(), events)
	if _, err := rl.box.Enqueue(r.Context(), events...); err != nil {
		switch {
		case errors.Is(err, outbox.ErrConflict):
			// The same delivery ID was stored with another body: not a
			// redelivery. Refuse it loudly rather than pick one.
			rl.out.Printf("✗ %s: delivery %s reused with a different body: 409", name, in.DeliveryID)
			reply(w, http.StatusConflict, "delivery ID already stored with another body")
		case errors.Is(err, outbox.ErrInvalid):
			reply(w, http.StatusBadRequest, err.Error())
		case errors.Is(err, outbox.ErrClosed):
			reply(w, http.StatusServiceUnavailable, "shutting down")
		default:
			// Not stored: a 5xx makes the provider try again later.
			rl.out.Printf("✗ %s: delivery %s not stored: %v", name, in.DeliveryID, err)
			reply(w, http.StatusInternalServerError, "not stored, try again")
		}
		return
	}
	if dup {
		rl.out.Printf("= %s: delivery %s is a redelivery: already stored, nothing new", name, in.DeliveryID)
		replyJSON(w, http.StatusOK, map[string]any{"status": "duplicate", "delivery": in.DeliveryID})
		return
	}
	targets := rl.targets(r.Context(), events[0].ID)
	if len(targets) == 0 {
		rl.out.Printf("✓ %s: delivery %s verified (%s) and stored as %s, unrouted: no target subscribes to it yet", name, in.DeliveryID, src.Scheme, topic)
	} else {
		rl.out.Printf("✓ %s: delivery %s verified (%s) and stored as %s for %v", name, in.DeliveryID, src.Scheme, topic, targets)
	}
	replyJSON(w, http.StatusAccepted, map[string]any{"status": "stored", "delivery": in.DeliveryID, "topic": topic, "targets": targets})
}

// targets returns the targets the stored event was routed to, sorted.
func (rl *relay) targets(ctx context.Context, id string) []string {
	out := []string{}
	if ev, err := rl.box.Get(ctx, id); err == nil {
		for _, d := range ev.DeliveryStates {
			out = append(out, d.Endpoint)
		}
	}
	return out
}

// topicOf is the topic of a webhook of source with the provider's event
// type: "<source>.<type>" ("stripe.invoice.paid", "github.push"), or
// "<source>.untyped" when the provider gives no type. Characters a topic
// cannot hold become '_'.
func topicOf(source, typ string) string {
	if typ == "" {
		return source + ".untyped"
	}
	if len(typ) > 150 {
		typ = typ[:150]
	}
	segs := strings.Split(typ, ".")
	for i, seg := range segs {
		b := []byte(seg)
		for j, c := range b {
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
				b[j] = '_'
			}
		}
		if len(b) == 0 {
			b = []byte("_")
		}
		segs[i] = string(b)
	}
	return source + "." + strings.Join(segs, ".")
}

// seen reports whether every event is already known to the outbox (pending,
// dead, or delivered within the dedup window). It only decides what the
// relay says: Enqueue is idempotent by ID either way.
func (rl *relay) seen(ctx context.Context, events []outbox.Event) bool {
	for _, ev := range events {
		if _, err := rl.box.Get(ctx, ev.ID); err != nil {
			return false
		}
	}
	return true
}

// eventID is the ID of the event that carries one provider delivery:
// deterministic, so every redelivery maps onto it.
func eventID(source, delivery string) string {
	return source + ":" + delivery
}

func contentType(r *http.Request) string {
	if ct := r.Header.Get("Content-Type"); ct != "" && len(ct) < 200 {
		return ct
	}
	return "application/octet-stream"
}

func reply(w http.ResponseWriter, status int, msg string) {
	replyJSON(w, status, map[string]string{"error": msg})
}

func replyJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
