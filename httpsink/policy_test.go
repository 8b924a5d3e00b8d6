package httpsink_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/outboxd/outbox/httpsink"
	"github.com/outboxd/outbox/outbox"
)

func TestParsePolicy(t *testing.T) {
	p, err := httpsink.ParsePolicy("404=retry", " 4XX = Dead ", "429=throttle", "2xx=success", "default=dead", "error=throttle", "418=park")
	if err != nil {
		t.Fatal(err)
	}
	for status, want := range map[int]outbox.Action{
		404: outbox.ActionRetry, 418: outbox.ActionPark, 400: outbox.ActionDead, 410: outbox.ActionDisable, 429: outbox.ActionThrottle,
		200: outbox.ActionSuccess, 503: outbox.ActionRetry, 600: outbox.ActionDead, 99: outbox.ActionDead, 1000: outbox.ActionDead,
	} {
		if got := p.Action(status); got != want {
			t.Errorf("%d: %s, want %s", status, got, want)
		}
	}
	if p.ErrorAction() != outbox.ActionThrottle {
		t.Errorf("error row %s", p.ErrorAction())
	}

	// Rules rebuild the table exactly, and the zero Policy is the default.
	q, err := httpsink.ParsePolicy(p.Rules()...)
	if err != nil || q != p {
		t.Fatalf("round trip through Rules: %v\n%s\n%s", err, p, q)
	}
	var zero httpsink.Policy
	if zero.String() != httpsink.DefaultPolicy().String() || zero.Action(404) != outbox.ActionPark || zero.ErrorAction() != outbox.ActionRetry {
		t.Fatalf("zero Policy is not the default: %s", zero)
	}
	want := []string{"1xx=retry", "2xx=success", "3xx=dead", "4xx=dead", "5xx=retry", "404=park", "408=retry", "410=disable",
		"425=retry", "429=throttle", "500=retry", "502=throttle", "503=retry", "504=throttle", "default=retry", "error=retry"}
	if got := httpsink.DefaultPolicy().Rules(); !slices.Equal(got, want) {
		t.Fatalf("DefaultPolicy().Rules() = %q", got)
	}

	// With leaves its receiver alone.
	d := httpsink.DefaultPolicy()
	if _, err := d.With("404=dead"); err != nil || d.Action(404) != outbox.ActionPark {
		t.Fatalf("With changed its receiver: %v", err)
	}

	for _, bad := range []string{"", "404", "=retry", "404=", "404=nope", "abc=retry", "99=retry", "1000=retry", "6xx=dead", "0xx=dead", "x4xx=dead", "error=success", "40=retry", "+40=retry"} {
		_, err := httpsink.ParsePolicy(bad)
		var pe *httpsink.PolicyError
		if !errors.Is(err, httpsink.ErrInvalidPolicy) || !errors.As(err, &pe) || pe.Rule != bad {
			t.Errorf("ParsePolicy(%q): %v", bad, err)
		}
	}
}
