package outbox_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/outboxd/outbox/outbox"
)

// Validate refuses what Enqueue refuses, with the same error, and stores
// nothing, whether the events are valid or not.
func TestValidateRefusesWhatEnqueueRefusesAndStoresNothing(t *testing.T) {
	sink := newWebSink()
	t.Cleanup(sink.close)
	o, _ := open(t, testConfig(sink))
	ok := outbox.Event{ID: "a", Destination: "http://example.com/hook", Payload: []byte("x")}
	cases := []struct {
		name  string
		evs   []outbox.Event
		field string
	}{
		{"no destination", []outbox.Event{ok, {ID: "b"}}, "destination"},
		{"bad method", []outbox.Event{{Destination: ok.Destination, Method: "get"}}, "method"},
		{"reserved header", []outbox.Event{{Destination: ok.Destination, Headers: map[string]string{"Idempotency-Key": "x"}}}, "headers"},
		{"beyond the horizon", []outbox.Event{{Destination: ok.Destination, DeliverAt: time.Now().Add(10 * 365 * 24 * time.Hour)}}, "deliver_at"},
	}
	for _, c := range cases {
		verr := o.Validate(c.evs...)
		_, eerr := o.Enqueue(context.Background(), c.evs...)
		var ve, ee *outbox.ValidationError
		if !errors.As(verr, &ve) || !errors.As(eerr, &ee) {
			t.Fatalf("%s: Validate: %v, Enqueue: %v; want validation errors", c.name, verr, eerr)
		}
		if *ve != *ee || ve.Field != c.field {
			t.Errorf("%s: Validate said %+v, Enqueue %+v; want field %q from both", c.name, *ve, *ee, c.field)
		}
	}

	twice := []outbox.Event{ok, {ID: "a", Destination: ok.Destination, Payload: []byte("y")}}
	verr := o.Validate(twice...)
	_, eerr := o.Enqueue(context.Background(), twice...)
	vid, vok := outbox.ConflictingID(verr)
	eid, eok := outbox.ConflictingID(eerr)
	if !errors.Is(verr, outbox.ErrConflict) || !vok || !eok || vid != eid || vid != "a" {
		t.Errorf("one ID twice with other content: Validate %v (id %q), Enqueue %v (id %q); want the same conflict on \"a\"", verr, vid, eerr, eid)
	}
	same := []outbox.Event{ok, ok, {Destination: ok.Destination}, {Destination: ok.Destination}}
	if err := o.Validate(same...); err != nil {
		t.Errorf("repeated events with the same content, and events without IDs: %v", err)
	}
	if err := o.Validate(ok); err != nil {
		t.Fatal(err)
	}
	if _, err := o.Get(context.Background(), "a"); !errors.Is(err, outbox.ErrNotFound) {
		t.Errorf("Get after Validate: %v; want ErrNotFound (Validate stores nothing)", err)
	}
}
