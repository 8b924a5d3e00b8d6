package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/outboxd/outbox/httpsink"
	"github.com/outboxd/outbox/internal/testkit"
	"github.com/outboxd/outbox/outbox"
)

const (
	testSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	testToken  = "Bearer s3cr3t-t0ken-for-the-receiver"
)

// parkParkRetryDeliver answers 404, 404, 500 and then 200, each with a body
// that names it, a cookie, and (the 500) an echo of the request's
// credentials, as a careless receiver might.
func parkParkRetryDeliver(r *http.Request, _ string, n int) testkit.Reply {
	h := http.Header{"Set-Cookie": {"session=abc"}, "Content-Type": {"text/plain"}, "X-Internal": {"no"}}
	switch n {
	case 0, 1:
		return testkit.Reply{Status: 404, Header: h, Body: fmt.Sprintf("not yet %d", n+1)}
	case 2:
		echo := "oops: " + r.Header.Get("Authorization") + " " + r.Header.Get("Webhook-Signature")
		return testkit.Reply{Status: 500, Header: h, Body: echo}
	}
	return testkit.Reply{Status: 200, Header: h, Body: "ok, stored"}
}

// openWithHTTPSink opens and starts an outbox delivering through httpsink
// to one endpoint "orders" at url, with a signing secret and an
// Authorization header.
func openWithHTTPSink(t *testing.T, url string, edit func(*outbox.Config)) *outbox.Outbox {
	t.Helper()
	return startWithHTTPSink(t, []httpsink.Endpoint{{
		Name: "orders", URL: url, AllowPrivate: true,
		Secrets: []string{testSecret}, Headers: map[string]string{"Authorization": testToken},
	}}, edit)
}

func waitState(t *testing.T, o *outbox.Outbox, id string, want outbox.State) {
	t.Helper()
	testkit.WaitFor(t, settle, id+" "+want.String(), func() bool {
		ev, err := o.Get(context.Background(), id)
		return err == nil && ev.State == want
	})
}

// An event parked twice (404), retried once (500) and delivered (200)
// shows four attempts in order with their statuses, actions and excerpts;
// only the safe headers are kept, and the request's secrets never appear,
// though the receiver echoed them.
func TestAttemptLogShowsEveryAttempt(t *testing.T) {
	rc := testkit.NewReceiver(t, "webhook-id", parkParkRetryDeliver)
	o := openWithHTTPSink(t, rc.URL+"/orders", nil)
	ctx := t.Context()
	if _, err := o.Enqueue(ctx, outbox.Event{ID: "evt-1", Destination: "orders", Payload: []byte(`{}`),
		Headers: map[string]string{"X-Api-Key": "event-level-api-key-123"}}); err != nil {
		t.Fatal(err)
	}
	waitState(t, o, "evt-1", outbox.StateDelivered)
	as, err := o.Attempts(ctx, "evt-1")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, a := range as {
		got = append(got, fmt.Sprintf("%d/%d %s %d %q", a.Seq, a.Delivery, a.Action, a.Status, a.Body))
	}
	want := []string{
		`1/1 park 404 "not yet 1"`,
		`2/2 park 404 "not yet 2"`,
		`3/3 retry 500 "oops: xxxxx xxxxx"`,
		`4/4 success 200 "ok, stored"`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("attempts:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for i, a := range as {
		if a.Header["Content-Type"] != "text/plain" || a.Header["Set-Cookie"] != "" || a.Header["X-Internal"] != "" {
			t.Errorf("attempt %d headers %v: want Content-Type only of those sent", i+1, a.Header)
		}
		if a.StartedAt.IsZero() || a.Duration <= 0 || (i > 0 && a.StartedAt.Before(as[i-1].StartedAt)) {
			t.Errorf("attempt %d started %v, took %v", i+1, a.StartedAt, a.Duration)
		}
		all := fmt.Sprintf("%+v", a)
		for _, secret := range []string{testSecret, strings.TrimPrefix(testSecret, "whsec_"), "s3cr3t-t0ken", "event-level-api-key", "session=abc"} {
			if strings.Contains(all, secret) {
				t.Errorf("attempt %d holds %q: %s", i+1, secret, all)
			}
		}
	}
}

// The excerpt size is honoured: a negative one keeps no body (the headers
// stay), a small one cuts it; NoAttemptLog records nothing.
func TestAttemptLogExcerptSize(t *testing.T) {
	for _, tc := range []struct {
		name    string
		edit    func(*outbox.Config)
		attempt string
	}{
		{"none", func(c *outbox.Config) { c.AttemptExcerptBytes = -1 }, `success 200 "" text/plain`},
		{"four bytes", func(c *outbox.Config) { c.AttemptExcerptBytes = 4 }, `success 200 "ok, " text/plain`},
		{"off", func(c *outbox.Config) { c.NoAttemptLog = true }, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc := testkit.NewReceiver(t, "webhook-id", func(*http.Request, string, int) testkit.Reply {
				return parkParkRetryDeliver(nil, "", 3)
			})
			o := openWithHTTPSink(t, rc.URL+"/orders", tc.edit)
			if _, err := o.Enqueue(t.Context(), outbox.Event{ID: "e", Destination: "orders"}); err != nil {
				t.Fatal(err)
			}
			waitState(t, o, "e", outbox.StateDelivered)
			as, err := o.Attempts(t.Context(), "e")
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, a := range as {
				got = append(got, fmt.Sprintf("%s %d %q %s", a.Action, a.Status, a.Body, a.Header["Content-Type"]))
			}
			if strings.Join(got, "\n") != tc.attempt {
				t.Fatalf("attempts %q, want %q", got, tc.attempt)
			}
		})
	}
}

// A 410 leaves its event untouched but was an attempt: it is logged. An
// unknown event has no attempts to list: ErrNotFound.
func TestAttemptLogDisableAndUnknown(t *testing.T) {
	rc := testkit.NewReceiver(t, "webhook-id", func(*http.Request, string, int) testkit.Reply {
		return testkit.Reply{Status: 410, Body: "gone"}
	})
	o := openWithHTTPSink(t, rc.URL+"/orders", nil)
	if _, err := o.Enqueue(t.Context(), outbox.Event{ID: "g", Destination: "orders"}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, settle, "the 410's attempt", func() bool {
		as, err := o.Attempts(context.Background(), "g")
		return err == nil && len(as) == 1 && as[0].Action == outbox.ActionDisable && as[0].Status == 410 && string(as[0].Body) == "gone"
	})
	if ev, _ := o.Get(t.Context(), "g"); ev.State != outbox.StatePending || ev.Deliveries != 0 {
		t.Fatalf("the disabled endpoint's event changed: %+v", ev)
	}
	if _, err := o.Attempts(t.Context(), "nobody"); !errors.Is(err, outbox.ErrNotFound) {
		t.Fatalf("Attempts of an unknown event: %v, want ErrNotFound", err)
	}
}

// A delivered event keeps its attempts while its tombstone lasts, and they
// go with it.
func TestAttemptLogTrimmedWithTombstone(t *testing.T) {
	rc := testkit.NewReceiver(t, "webhook-id", nil)
	o := openWithHTTPSink(t, rc.URL+"/orders", func(c *outbox.Config) {
		c.TombstoneRetention = 50 * time.Millisecond
		c.MaintenanceInterval = 10 * time.Millisecond
	})
	if _, err := o.Enqueue(t.Context(), outbox.Event{ID: "d", Destination: "orders"}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, settle, "the delivery's attempt", func() bool {
		as, err := o.Attempts(context.Background(), "d")
		return err == nil && len(as) == 1 && as[0].Status == 204
	})
	testkit.WaitFor(t, settle, "the attempts to go with the tombstone", func() bool {
		_, err := o.Attempts(context.Background(), "d")
		return errors.Is(err, outbox.ErrNotFound)
	})
}
