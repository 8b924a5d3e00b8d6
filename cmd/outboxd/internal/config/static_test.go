package config

import (
	"strings"
	"testing"
	"time"
)

// staticEndpoint is an endpoint with every field of its definition set.
func staticEndpoint() Endpoint {
	return Endpoint{
		Name: "orders", URL: "https://orders.example/hook", Secrets: []string{"whsec_b25l", "whsec_dHdv"},
		Timeout: 5 * time.Second, Headers: map[string]string{"X-Tenant": "t1", "X-Region": "eu"},
		MaxInFlight: 4, AllowPrivate: true, RateLimit: 100, Burst: 10,
		Topics: []string{"order.paid", "order.*"}, Filter: map[string]string{"tenant": "t1", "region": "eu"},
	}
}

func hashOf(c Config, e Endpoint) string {
	c.Endpoints = []Endpoint{e}
	return c.StaticHashes()[e.Name]
}

// The hash of a definition does not depend on the order of its lists and
// maps, nor on whether a default is written out, and it holds no secret.
func TestStaticHashIgnoresOrderAndSpelledOutDefaults(t *testing.T) {
	c := Default()
	c.Delivery.Timeout = 5 * time.Second
	e := staticEndpoint()
	want := hashOf(c, e)
	if len(want) != 16 {
		t.Fatalf("hash %q, want 16 hex digits", want)
	}
	reordered := staticEndpoint()
	reordered.Secrets = []string{"whsec_dHdv", "whsec_b25l"}
	reordered.Topics = []string{"order.*", "order.paid"}
	reordered.Headers = map[string]string{"x-region": "eu", "x-tenant": "t1"} // header names are case-insensitive
	if got := hashOf(c, reordered); got != want {
		t.Errorf("reordered definition hashes to %s, want %s", got, want)
	}
	defaulted := staticEndpoint()
	defaulted.Timeout = 0 // delivery.timeout: the same 5s
	if got := hashOf(c, defaulted); got != want {
		t.Errorf("the default timeout left out hashes to %s, want %s", got, want)
	}
	noBurst, oneBurst := staticEndpoint(), staticEndpoint()
	noBurst.Burst, oneBurst.Burst = 0, 1
	if hashOf(c, noBurst) != hashOf(c, oneBurst) {
		t.Error("a limit without a burst hashes unlike one with the burst of 1 it gets")
	}
	for _, s := range e.Secrets {
		if strings.Contains(want, s) {
			t.Errorf("the hash holds a secret")
		}
	}
	c.Endpoints = nil
	if hs := c.StaticHashes(); hs == nil || len(hs) != 0 {
		t.Errorf("no endpoints: %#v, want an empty map", hs)
	}
}

// Every field that changes a delivery changes the hash.
func TestStaticHashChangesWithEachField(t *testing.T) {
	c := Default()
	base := hashOf(c, staticEndpoint())
	for name, change := range map[string]func(*Endpoint){
		"url":            func(e *Endpoint) { e.URL += "2" },
		"secret":         func(e *Endpoint) { e.Secrets[0] = "whsec_b3Ro" },
		"secret dropped": func(e *Endpoint) { e.Secrets = e.Secrets[:1] },
		"timeout":        func(e *Endpoint) { e.Timeout = 6 * time.Second },
		"header value":   func(e *Endpoint) { e.Headers["X-Tenant"] = "t2" },
		"header added":   func(e *Endpoint) { e.Headers["X-More"] = "" },
		"max in flight":  func(e *Endpoint) { e.MaxInFlight = 5 },
		"allow private":  func(e *Endpoint) { e.AllowPrivate = false },
		"rate":           func(e *Endpoint) { e.RateLimit = 50 },
		"burst":          func(e *Endpoint) { e.Burst = 11 },
		"topic":          func(e *Endpoint) { e.Topics[0] = "order.refunded" },
		"topic dropped":  func(e *Endpoint) { e.Topics = e.Topics[:1] },
		"filter value":   func(e *Endpoint) { e.Filter["tenant"] = "t2" },
		"filter dropped": func(e *Endpoint) { delete(e.Filter, "region") },
		"value moved":    func(e *Endpoint) { e.Headers = map[string]string{"X-Tenant": "t1eu"} },
	} {
		e := staticEndpoint()
		change(&e)
		if got := hashOf(c, e); got == base {
			t.Errorf("%s: the hash did not change", name)
		}
	}
	c.Delivery.Timeout = time.Minute
	e := staticEndpoint()
	e.Timeout = 0
	c2 := Default()
	c2.Delivery.Timeout = 2 * time.Minute
	if hashOf(c, e) == hashOf(c2, e) {
		t.Error("endpoints that take different delivery.timeout defaults hash alike")
	}
}
