package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
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

// ServeHTTP verifies the webhook, stores one event per target of its source
// and answers 2xx only once they are durable.
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

	// One event per target, each with its own retries, parks and dead
	// letter. The IDs are derived from the provider's delivery ID, so a
	// redelivery maps onto the same events and the outbox's dedup drops it.
	events := make([]outbox.Event, len(src.Targets))
	for i, t := range src.Targets {
		h := map[string]string{
			"Content-Type":      contentType(r),
			"X-Relay-Source":    name,
			"X-Relay-Delivery":  in.DeliveryID,
			"X-Relay-Signature": "verified:" + src.Scheme,
		}
		if in.Type != "" {
			h["X-Relay-Event-Type"] = in.Type
		}
		events[i] = outbox.Event{
			ID:          eventID(name, in.DeliveryID, t),
			Destination: t,
			Headers:     h,
			Payload:     body,
		}
	}
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
	rl.out.Printf("✓ %s: delivery %s verified (%s) and stored for %v", name, in.DeliveryID, src.Scheme, src.Targets)
	replyJSON(w, http.StatusAccepted, map[string]any{"status": "stored", "delivery": in.DeliveryID, "targets": src.Targets})
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

// eventID is the ID of the event that carries one provider delivery to one
// target: deterministic, so every redelivery maps onto it.
func eventID(source, delivery, target string) string {
	return source + ":" + delivery + ":" + target
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
