package config

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/outboxd/outbox/outbox"
)

// An endpoint's topics and filter, from the file or the --endpoint flag,
// become the outbox's subscriptions; the unrouted settings become its
// policy and retention.
func TestTopicsFilterAndUnroutedSettings(t *testing.T) {
	file := writeFile(t, `
delivery:
  unrouted_retention: 6h
endpoints:
  - name: billing
    url: https://billing.example.com/
    topics: ["invoice.*"]
    filter: {X-Region: eu}
  - name: plain
    url: https://plain.example.com/
`)
	cfg, err := load(t, []string{"--config", file, "--drop-unrouted",
		"--endpoint", "orders=https://orders.example.com/,topic=order.paid,topic=order.refunded.*"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	oc, err := cfg.OutboxConfig(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	subs := map[string]outbox.Subscription{}
	for _, s := range oc.Subscriptions {
		subs[s.Endpoint] = s
	}
	if len(subs) != 2 {
		t.Fatalf("subscriptions %+v, want billing's and orders'", oc.Subscriptions)
	}
	if b := subs["billing"]; len(b.Topics) != 1 || b.Topics[0] != "invoice.*" || b.Headers["X-Region"] != "eu" {
		t.Errorf("billing's subscription %+v", b)
	}
	if o := subs["orders"]; strings.Join(o.Topics, " ") != "order.paid order.refunded.*" || len(o.Headers) != 0 {
		t.Errorf("orders' subscription %+v", o)
	}
	if oc.Unrouted != outbox.UnroutedDrop || oc.UnroutedRetention != 6*time.Hour {
		t.Errorf("unrouted policy %v, retention %v; want drop and 6h", oc.Unrouted, oc.UnroutedRetention)
	}
	if oc.RateLimits == nil {
		t.Error("no rate limits: endpoints created at run time could not be limited")
	}

	for _, tc := range []struct{ yaml, setting string }{
		{"endpoints:\n  - {name: a, url: \"https://a.example.com/\", filter: {X-Region: eu}}\n", "endpoints[0].filter"},
		{"endpoints:\n  - {name: a, url: \"https://a.example.com/\", topics: [\"\"]}\n", "endpoints[0].topics[0]"},
		{"endpoints:\n  - {name: a, url: \"https://a.example.com/\", topics: [\"ok\", \"a.*.b\"]}\n", "endpoints[0].topics[1]"},
		{"endpoints:\n  - {name: a, url: \"https://a.example.com/\", topics: [\"a\"], filter: {\"bad name\": x}}\n", `endpoints[0].filter["bad name"]`},
	} {
		_, err := load(t, []string{"--config", writeFile(t, tc.yaml)}, nil)
		var se *SettingError
		if !errors.As(err, &se) || se.Setting != tc.setting {
			t.Errorf("%q: %v; want a *SettingError for %s", tc.yaml, err, tc.setting)
		}
	}
}
