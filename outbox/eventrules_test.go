package outbox_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/outboxd/outbox/outbox"
)

// TestEnqueueRefusesWhatTheSinkWouldDrop: headers a sink sets itself or that
// belong to one connection's framing, two spellings of one header, and
// methods outside the standard set are refused with a *ValidationError
// naming the header or method, instead of being accepted and then dropped.
func TestEnqueueRefusesWhatTheSinkWouldDrop(t *testing.T) {
	o, _ := open(t, testConfig(newWebSink()))
	ctx := context.Background()
	dest := "http://127.0.0.1:1/x"
	cases := []struct {
		name  string
		ev    outbox.Event
		field string
		want  string
	}{
		{"Host", outbox.Event{Headers: map[string]string{"Host": "evil.example"}}, "headers", `"Host" is set by the HTTP transport`},
		{"content-length", outbox.Event{Headers: map[string]string{"content-length": "3"}}, "headers", `"content-length" is set by the HTTP transport`},
		{"Transfer-Encoding", outbox.Event{Headers: map[string]string{"Transfer-Encoding": "chunked"}}, "headers", `"Transfer-Encoding"`},
		{"webhook-id", outbox.Event{Headers: map[string]string{"webhook-id": "other"}}, "headers", `"webhook-id" is set by the sink`},
		{"Webhook-Signature", outbox.Event{Headers: map[string]string{"Webhook-Signature": "v1,x"}}, "headers", `"Webhook-Signature" is set by the sink`},
		{"Idempotency-Key", outbox.Event{Headers: map[string]string{"Idempotency-Key": "k"}}, "headers", `"Idempotency-Key" is set by the sink`},
		{"Connection", outbox.Event{Headers: map[string]string{"Connection": "close"}}, "headers", `"Connection" is a hop-by-hop header`},
		{"Upgrade", outbox.Event{Headers: map[string]string{"Upgrade": "websocket"}}, "headers", `"Upgrade" is a hop-by-hop header`},
		{"TE", outbox.Event{Headers: map[string]string{"TE": "trailers"}}, "headers", `"TE" is a hop-by-hop header`},
		{"two spellings", outbox.Event{Headers: map[string]string{"X-Tenant": "a", "x-tenant": "b"}}, "headers", `"X-Tenant" and "x-tenant" are the same header`},
		{"CONNECT", outbox.Event{Method: "CONNECT"}, "method", `"CONNECT" is not one of GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS`},
		{"TRACE", outbox.Event{Method: "TRACE"}, "method", `"TRACE" is not one of`},
		{"lower case", outbox.Event{Method: "post"}, "method", "case-sensitive"},
		{"extension method", outbox.Event{Method: "PROPFIND"}, "method", `"PROPFIND"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ev := c.ev
			ev.Destination = dest
			_, err := o.Enqueue(ctx, ev)
			var ve *outbox.ValidationError
			if !errors.As(err, &ve) || ve.Field != c.field || !strings.Contains(ve.Reason, c.want) {
				t.Fatalf("got %v, want a ValidationError on %s saying %q", err, c.field, c.want)
			}
		})
	}
	// What a sink sends as given stays accepted.
	ok := outbox.Event{Destination: dest, Method: "PATCH", Headers: map[string]string{
		"Content-Type": "application/cloudevents+json", "User-Agent": "shop/1", "Webhook-Version": "2", "X-Tenant": "a"}}
	for _, m := range []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"} {
		ok.Method = m
		if _, err := o.Enqueue(ctx, ok); err != nil {
			t.Errorf("method %s with ordinary headers: %v", m, err)
		}
	}
	if s := o.Stats(); s.Pending != 7 {
		t.Errorf("pending %d, want only the 7 accepted events", s.Pending)
	}
}

// The header rules are exported so that every path into the outbox (the HTTP
// decoder, the HTTP sink's configuration) applies the same ones.
func TestHeaderRules(t *testing.T) {
	for name, want := range map[string]bool{"X-Ok": true, "x_ok.1~": true, "": false, "a b": false, "a:b": false, "é": false} {
		if got := outbox.ValidHeaderName(name); got != want {
			t.Errorf("ValidHeaderName(%q) = %v, want %v", name, got, want)
		}
	}
	for v, want := range map[string]bool{"": true, "a\tb c": true, "caf\xc3\xa9": true, "a\r\nb": false, "nul\x00": false, "del\x7f": false} {
		if got := outbox.ValidHeaderValue(v); got != want {
			t.Errorf("ValidHeaderValue(%q) = %v, want %v", v, got, want)
		}
	}
	for name, want := range map[string]bool{"host": true, "HOST": true, "Keep-Alive": true, "Proxy-Connection": true, "Trailer": true, "X-Host": false, "Webhook-Version": false} {
		if _, got := outbox.ReservedHeader(name); got != want {
			t.Errorf("ReservedHeader(%q) = %v, want %v", name, got, want)
		}
	}
}

// ConflictingID tells a caller which ID an ErrConflict is about, without
// importing the store.
func TestConflictingID(t *testing.T) {
	o, _ := open(t, testConfig(newWebSink()))
	ctx := context.Background()
	dest := "http://127.0.0.1:1/x"
	if _, err := o.Enqueue(ctx, outbox.Event{ID: "taken", Destination: dest, Payload: []byte("a")}); err != nil {
		t.Fatal(err)
	}
	_, err := o.Enqueue(ctx, outbox.Event{ID: "free", Destination: dest}, outbox.Event{ID: "taken", Destination: dest, Payload: []byte("b")})
	if id, ok := outbox.ConflictingID(err); !errors.Is(err, outbox.ErrConflict) || !ok || id != "taken" {
		t.Fatalf("ConflictingID(%v) = %q, %v; want \"taken\"", err, id, ok)
	}
	if _, ok := outbox.ConflictingID(errors.New("other")); ok {
		t.Error("ConflictingID of another error reports an ID")
	}
}
