package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/outboxd/outbox/store"
)

// inspect --id prints an attempt's transport error, and a body that is not
// text as base64; an event without attempts says so.
func TestInspectEventPrintsAttempts(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	ro := inspectFile(t, []*store.Record{{ID: "a", Destination: "orders", Method: "POST"}, {ID: "b", Destination: "orders", Method: "POST"}},
		func(ctx context.Context, st *store.Store, _ []*store.Record) error {
			_, err := st.Apply(ctx, []store.Outcome{
				{Kind: store.OutcomeAttempt, ID: "a", Attempt: &store.Attempt{Delivery: 1, StartedAt: at, Duration: time.Second, Action: "retry", Error: "dial tcp: connection refused"}},
				{Kind: store.OutcomeAttempt, ID: "a", Attempt: &store.Attempt{Delivery: 2, StartedAt: at.Add(time.Minute), Action: "dead", Status: 400, Body: []byte{0xff, 0, 1}}},
			}, nil)
			return err
		})
	var out bytes.Buffer
	if err := inspectEvent(&out, ro, "a", false); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"#1   2026-03-01T12:00:00.000Z  retry    no response took 1s (delivery 1)",
		"error: dial tcp: connection refused",
		"#2   2026-03-01T12:01:00.000Z  dead     status 400",
		"body (3 bytes, base64): /wAB",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("inspect --id a lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	if err := inspectEvent(&out, ro, "b", false); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "attempts: none recorded") {
		t.Errorf("inspect --id b:\n%s", out.String())
	}
}
