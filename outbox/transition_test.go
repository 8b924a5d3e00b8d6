package outbox_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/outboxd/outbox/outbox"
)

// The JSON encoding of a transition is the documented one, and decodes
// back to the same transition.
func TestEndpointTransitionJSON(t *testing.T) {
	at := time.Date(2026, 12, 6, 7, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		tr   outbox.EndpointTransition
		want string
	}{
		{outbox.EndpointTransition{Endpoint: "orders", Kind: outbox.TransitionOpened, Until: at.Add(5 * time.Second), At: at},
			`{"v":1,"endpoint":"orders","kind":"opened","until":"2026-12-06T07:00:05Z","at":"2026-12-06T07:00:00Z"}`},
		{outbox.EndpointTransition{Endpoint: "orders", Kind: outbox.TransitionDisabled, Reason: "disabled by the receiver: status 410", At: at},
			`{"v":1,"endpoint":"orders","kind":"disabled","reason":"disabled by the receiver: status 410","at":"2026-12-06T07:00:00Z"}`},
		{outbox.EndpointTransition{Endpoint: "orders", Kind: outbox.TransitionThrottled, Until: at.Add(time.Minute), At: at},
			`{"v":1,"endpoint":"orders","kind":"throttled","until":"2026-12-06T07:01:00Z","at":"2026-12-06T07:00:00Z"}`},
		{outbox.EndpointTransition{Endpoint: "orders", Kind: outbox.TransitionClosed, At: at.Add(time.Nanosecond)},
			`{"v":1,"endpoint":"orders","kind":"closed","at":"2026-12-06T07:00:00.000000001Z"}`},
		{outbox.EndpointTransition{Endpoint: "orders", Kind: outbox.TransitionEnabled, At: at},
			`{"v":1,"endpoint":"orders","kind":"enabled","at":"2026-12-06T07:00:00Z"}`},
		{outbox.EndpointTransition{Endpoint: "orders", Kind: outbox.TransitionRetried, At: at},
			`{"v":1,"endpoint":"orders","kind":"retried","at":"2026-12-06T07:00:00Z"}`},
	} {
		b, err := json.Marshal(tc.tr)
		if err != nil || string(b) != tc.want {
			t.Errorf("Marshal(%+v) = %s, %v; want %s", tc.tr, b, err, tc.want)
			continue
		}
		var got outbox.EndpointTransition
		if err := json.Unmarshal(b, &got); err != nil || !reflect.DeepEqual(got, tc.tr) {
			t.Errorf("Unmarshal(%s) = %+v, %v; want %+v", b, got, err, tc.tr)
		}
	}
}

// A record that is not a valid transition is refused with an error naming
// the field, and leaves the value it was decoded into unchanged.
func TestEndpointTransitionBadInput(t *testing.T) {
	long := strings.Repeat("x", outbox.MaxEndpointNameBytes+1)
	for _, tc := range []struct{ in, field string }{
		{`[]`, ""},
		{`{"v":2,"endpoint":"a","kind":"closed","at":"2026-12-06T07:00:00Z"}`, "v"},
		{`{"endpoint":"a","kind":"closed","at":"2026-12-06T07:00:00Z"}`, "v"},
		{`{"v":1,"kind":"closed","at":"2026-12-06T07:00:00Z"}`, "endpoint"},
		{`{"v":1,"endpoint":"` + long + `","kind":"closed","at":"2026-12-06T07:00:00Z"}`, "endpoint"},
		{`{"v":1,"endpoint":"a","kind":"reopened","at":"2026-12-06T07:00:00Z"}`, "kind"},
		{`{"v":1,"endpoint":"a","kind":"closed"}`, "at"},
		{`{"v":1,"endpoint":"a","kind":"opened","at":"2026-12-06T07:00:00Z"}`, "until"},
		{`{"v":1,"endpoint":"a","kind":"closed","until":"2026-12-06T07:00:00Z","at":"2026-12-06T07:00:00Z"}`, "until"},
		{`{"v":1,"endpoint":"a","kind":"closed","reason":"why","at":"2026-12-06T07:00:00Z"}`, "reason"},
		{`{"v":1,"endpoint":"a","kind":"closed","at":"yesterday"}`, ""},
	} {
		before := outbox.EndpointTransition{Endpoint: "kept", Kind: outbox.TransitionClosed}
		got := before
		err := json.Unmarshal([]byte(tc.in), &got)
		var te *outbox.TransitionError
		if !errors.As(err, &te) || te.Field != tc.field || !errors.Is(err, outbox.ErrInvalid) {
			t.Errorf("Unmarshal(%.80s) = %v; want a *TransitionError for %q", tc.in, err, tc.field)
		}
		if got != before {
			t.Errorf("Unmarshal(%.80s) changed the value to %+v", tc.in, got)
		}
	}
}

// FuzzEndpointTransition decodes arbitrary records as read from a topic:
// each is refused with an error, or decodes into a transition that encodes
// and decodes back to itself; it never panics.
func FuzzEndpointTransition(f *testing.F) {
	f.Add([]byte(`{"v":1,"endpoint":"orders","kind":"opened","until":"2026-12-06T07:00:05Z","at":"2026-12-06T07:00:00Z"}`))
	f.Add([]byte(`{"v":1,"endpoint":"orders","kind":"disabled","reason":"status 410","at":"2026-12-06T07:00:00Z"}`))
	f.Add([]byte(`{"v":1,"endpoint":"\u00e9","kind":"enabled","at":"2026-12-06T07:00:00.5+02:00","extra":[1]}`))
	f.Add([]byte(`{"v":1,"endpoint":"a","kind":"throttled","until":"0001-01-01T00:00:00Z","at":"2026-12-06T07:00:00Z"}`))
	f.Add([]byte(`{"v":1e400}`))
	f.Add([]byte("\xff{"))
	f.Fuzz(func(t *testing.T, b []byte) {
		var tr outbox.EndpointTransition
		if err := json.Unmarshal(b, &tr); err != nil {
			return
		}
		enc, err := json.Marshal(tr)
		if err != nil {
			t.Fatalf("decoded %+v from %q, but it does not encode: %v", tr, b, err)
		}
		var again outbox.EndpointTransition
		if err := json.Unmarshal(enc, &again); err != nil || !again.At.Equal(tr.At) || !again.Until.Equal(tr.Until) ||
			again.Endpoint != tr.Endpoint || again.Kind != tr.Kind || again.Reason != tr.Reason {
			t.Fatalf("%q decoded to %+v, encoded to %s, decoded again to %+v, %v", b, tr, enc, again, err)
		}
	})
}
