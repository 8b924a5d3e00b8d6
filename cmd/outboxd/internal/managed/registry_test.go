package managed_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outboxd/outbox/cmd/outboxd/internal/managed"
	"github.com/outboxd/outbox/httpsink"
	"github.com/outboxd/outbox/internal/testkit"
	"github.com/outboxd/outbox/outbox"
	"github.com/outboxd/outbox/outbox/httpapi"
)

// settle bounds the waits for deliveries.
const settle = time.Minute

// node is one run of an outbox on a file with a sink and a registry, as
// outboxd serve wires them.
type node struct {
	o      *outbox.Outbox
	sink   *httpsink.Sink
	limits *outbox.RateLimits
	reg    *managed.Registry
}

// start opens the outbox's file at path with static endpoints, loads the
// managed ones and starts delivering. It is stopped at the end of the test
// unless stopped before.
func start(t *testing.T, path string, static []httpsink.Endpoint, subs []outbox.Subscription) *node {
	t.Helper()
	sink, err := httpsink.New(httpsink.Config{Endpoints: static, AllowPrivateNetworks: true})
	if err != nil {
		t.Fatal(err)
	}
	limits, err := outbox.NewRateLimits(nil)
	if err != nil {
		t.Fatal(err)
	}
	o, err := outbox.Open(path, outbox.Config{Sink: sink, RateLimits: limits, Subscriptions: subs,
		Interval: 20 * time.Millisecond, BackoffInitial: 20 * time.Millisecond, BackoffMax: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var st []managed.Static
	for _, e := range static {
		s := managed.Static{Name: e.Name, URL: e.URL, Secrets: len(e.Secrets)}
		for _, sub := range subs {
			if sub.Endpoint == e.Name {
				s.Topics, s.Filter = sub.Topics, sub.Headers
			}
		}
		st = append(st, s)
	}
	reg, err := managed.Open(context.Background(), managed.Config{Outbox: o, Sink: sink, Limits: limits, Static: st})
	if err != nil {
		o.Stop(context.Background())
		sink.Close()
		t.Fatal(err)
	}
	if err := o.Start(); err != nil {
		t.Fatal(err)
	}
	n := &node{o: o, sink: sink, limits: limits, reg: reg}
	t.Cleanup(n.stop)
	return n
}

func (n *node) stop() {
	n.o.Stop(context.Background())
	n.sink.Close()
}

// verifies reports whether a request's signature verifies with secret.
func verifies(t *testing.T, r testkit.Request, secret string) error {
	t.Helper()
	v, err := httpsink.NewVerifier([]string{secret}, 0)
	if err != nil {
		t.Fatal(err)
	}
	return v.Verify(r.Header, r.Body, time.Now())
}

func lastRequest(t *testing.T, rc *testkit.Receiver) testkit.Request {
	t.Helper()
	reqs := rc.Requests()
	if len(reqs) == 0 {
		t.Fatal("the receiver saw no request")
	}
	return reqs[len(reqs)-1]
}

// An endpoint created through the registry is in force at once (events
// name it, deliveries are signed with the secret returned once), and it is
// stored: after a restart on the same file it is defined, subscribed,
// rate-limited and signing with the same secret.
func TestCreatedEndpointIsInForceAndSurvivesRestart(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "outboxd.db")
	rc := testkit.NewReceiver(t, "webhook-id", nil)
	n := start(t, path, nil, nil)

	def, secret, err := n.reg.CreateEndpoint(ctx, "billing", httpapi.EndpointSpec{
		URL: rc.URL + "/hook", Topics: []string{"order.*"}, Filter: map[string]string{"X-Region": "eu"},
		Headers: map[string]string{"X-Team": "billing-secret-token"}, Rate: 50, Burst: 5,
	})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(secret, "whsec_") || len(secret) != len("whsec_")+44 {
		t.Fatalf("secret %q: want whsec_ and the base64 of 32 bytes", secret)
	}
	if !def.Managed || !def.Signed || len(def.Topics) != 1 || def.HeaderNames[0] != "X-Team" {
		t.Fatalf("definition %+v", def)
	}
	wantSub := outbox.Subscription{Endpoint: "billing", Topics: []string{"order.*"}, Headers: map[string]string{"X-Region": "eu"}}
	checkSubs := func(when string, o *outbox.Outbox) {
		t.Helper()
		subs := o.Subscriptions()
		if len(subs) != 1 || subs[0].Endpoint != wantSub.Endpoint || subs[0].Topics[0] != "order.*" || subs[0].Headers["X-Region"] != "eu" {
			t.Fatalf("%s: subscriptions %+v, want %+v", when, subs, wantSub)
		}
	}
	checkSubs("after create", n.o)
	if l, ok := n.limits.Limit("billing"); !ok || l != (outbox.RateLimit{PerSecond: 50, Burst: 5}) {
		t.Fatalf("rate limit after create: %v %v", l, ok)
	}
	if _, err := n.o.Enqueue(ctx, outbox.Event{ID: "e1", Destination: "billing", Payload: []byte(`{"n":1}`)}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, settle, "the first delivery", func() bool { return rc.Acked("e1") == 1 })
	if err := verifies(t, lastRequest(t, rc), secret); err != nil {
		t.Fatalf("the delivery does not verify with the secret returned: %v", err)
	}
	if got := lastRequest(t, rc).Header.Get("X-Team"); got != "billing-secret-token" {
		t.Fatalf("X-Team = %q", got)
	}

	n.stop()
	n = start(t, path, nil, nil)
	checkSubs("after a restart", n.o)
	if l, ok := n.limits.Limit("billing"); !ok || l != (outbox.RateLimit{PerSecond: 50, Burst: 5}) {
		t.Fatalf("rate limit after a restart: %v %v", l, ok)
	}
	if d, ok := n.reg.EndpointDefinitions()["billing"]; !ok || !d.Managed || d.CreatedAt.IsZero() {
		t.Fatalf("definitions after a restart: %+v", n.reg.EndpointDefinitions())
	}
	if _, err := n.o.Enqueue(ctx, outbox.Event{ID: "e2", Destination: "billing", Payload: []byte(`{"n":2}`)}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, settle, "the delivery after a restart", func() bool { return rc.Acked("e2") == 1 })
	if err := verifies(t, lastRequest(t, rc), secret); err != nil {
		t.Fatalf("after a restart the delivery does not verify with the secret: %v", err)
	}
}

// Bad definitions are refused with a *outbox.ValidationError naming the
// API's field, and nothing is stored or put in force.
func TestBadDefinitionsAreRefusedNamingTheField(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "outboxd.db")
	n := start(t, path, nil, nil)
	ok := httpapi.EndpointSpec{URL: "https://example.com/hook"}
	with := func(f func(*httpapi.EndpointSpec)) httpapi.EndpointSpec { s := ok; f(&s); return s }
	for _, tc := range []struct {
		name  string
		spec  httpapi.EndpointSpec
		field string
	}{
		{"billing", with(func(s *httpapi.EndpointSpec) { s.URL = "" }), "url"},
		{"billing", with(func(s *httpapi.EndpointSpec) { s.URL = "ftp://example.com/" }), "url"},
		{"billing", with(func(s *httpapi.EndpointSpec) { s.URL = "not a url" }), "url"},
		{"bad name", ok, "name"},
		{"billing", with(func(s *httpapi.EndpointSpec) { s.Topics = []string{"order.paid", ""} }), "topics[1]"},
		{"billing", with(func(s *httpapi.EndpointSpec) { s.Topics = []string{"order..paid"} }), "topics[0]"},
		{"billing", with(func(s *httpapi.EndpointSpec) { s.Topics = []string{"order.*.paid"} }), "topics[0]"},
		{"billing", with(func(s *httpapi.EndpointSpec) { s.Topics = []string{"a", "a"} }), "topics[1]"},
		{"billing", with(func(s *httpapi.EndpointSpec) { s.Filter = map[string]string{"X-Region": "eu"} }), "filter"},
		{"billing", with(func(s *httpapi.EndpointSpec) {
			s.Topics, s.Filter = []string{"a"}, map[string]string{"bad name": "eu"}
		}), `filter["bad name"]`},
		{"billing", with(func(s *httpapi.EndpointSpec) { s.Headers = map[string]string{"webhook-signature": "x"} }), `headers["webhook-signature"]`},
		{"billing", with(func(s *httpapi.EndpointSpec) { s.Timeout = -time.Second }), "timeout"},
		{"billing", with(func(s *httpapi.EndpointSpec) { s.MaxInFlight = -1 }), "max_in_flight"},
		{"billing", with(func(s *httpapi.EndpointSpec) { s.Rate = -1 }), "rate"},
		{"billing", with(func(s *httpapi.EndpointSpec) { s.Rate = 1e-300 }), "rate"},
		{"billing", with(func(s *httpapi.EndpointSpec) { s.Rate = outbox.MaxRate * 2 }), "rate"},
		{"billing", with(func(s *httpapi.EndpointSpec) { s.Burst = 3 }), "burst"},
	} {
		_, _, err := n.reg.CreateEndpoint(ctx, tc.name, tc.spec)
		var ve *outbox.ValidationError
		if !errors.As(err, &ve) || ve.Field != tc.field {
			t.Errorf("CreateEndpoint(%q, %+v): %v; want a validation error naming %s", tc.name, tc.spec, err, tc.field)
		}
	}
	if defs := n.reg.EndpointDefinitions(); len(defs) != 0 {
		t.Fatalf("definitions after refused creations: %v", defs)
	}
	if names := n.sink.EndpointNames(); len(names) != 0 {
		t.Fatalf("sink endpoints after refused creations: %v", names)
	}
	n.stop()
	n = start(t, path, nil, nil)
	if defs := n.reg.EndpointDefinitions(); len(defs) != 0 {
		t.Fatalf("definitions stored by refused creations: %v", defs)
	}
}

// A static endpoint cannot be created, replaced, rotated or deleted
// through the registry; a taken name cannot be created again; an unknown
// one cannot be replaced, rotated or deleted. A fixed registry refuses
// everything.
func TestRefusedChanges(t *testing.T) {
	ctx := context.Background()
	n := start(t, filepath.Join(t.TempDir(), "outboxd.db"),
		[]httpsink.Endpoint{{Name: "orders", URL: "https://example.com/orders"}},
		[]outbox.Subscription{{Endpoint: "orders", Topics: []string{"order.*"}}})
	spec := httpapi.EndpointSpec{URL: "https://example.com/hook"}
	if _, _, err := n.reg.CreateEndpoint(ctx, "orders", spec); !errors.Is(err, httpapi.ErrStaticEndpoint) || !strings.Contains(err.Error(), `"orders" is static`) {
		t.Errorf("create over a static endpoint: %v", err)
	}
	if _, err := n.reg.ReplaceEndpoint(ctx, "orders", spec); !errors.Is(err, httpapi.ErrStaticEndpoint) {
		t.Errorf("replace a static endpoint: %v", err)
	}
	if _, err := n.reg.DeleteEndpoint(ctx, "orders"); !errors.Is(err, httpapi.ErrStaticEndpoint) {
		t.Errorf("delete a static endpoint: %v", err)
	}
	if _, _, err := n.reg.RotateSecret(ctx, "orders", time.Hour); !errors.Is(err, httpapi.ErrStaticEndpoint) {
		t.Errorf("rotate a static endpoint's secret: %v", err)
	}
	if d := n.reg.EndpointDefinitions()["orders"]; d.Managed || len(d.Topics) != 1 {
		t.Errorf("the static endpoint's definition: %+v", d)
	}
	if _, _, err := n.reg.CreateEndpoint(ctx, "billing", spec); err != nil {
		t.Fatal(err)
	}
	if _, _, err := n.reg.CreateEndpoint(ctx, "billing", spec); !errors.Is(err, httpapi.ErrEndpointExists) {
		t.Errorf("create a taken name: %v", err)
	}
	if _, err := n.reg.ReplaceEndpoint(ctx, "nobody", spec); !errors.Is(err, outbox.ErrNotFound) {
		t.Errorf("replace an unknown endpoint: %v", err)
	}
	if _, err := n.reg.DeleteEndpoint(ctx, "nobody"); !errors.Is(err, outbox.ErrNotFound) {
		t.Errorf("delete an unknown endpoint: %v", err)
	}
	if _, _, err := n.reg.RotateSecret(ctx, "nobody", time.Hour); !errors.Is(err, outbox.ErrNotFound) {
		t.Errorf("rotate an unknown endpoint's secret: %v", err)
	}
	var ve *outbox.ValidationError
	if _, _, err := n.reg.RotateSecret(ctx, "billing", -time.Hour); !errors.As(err, &ve) || ve.Field != "grace" {
		t.Errorf("rotate with a negative grace: %v", err)
	}
	if subs := n.o.Subscriptions(); len(subs) != 1 || subs[0].Endpoint != "orders" {
		t.Errorf("subscriptions after refused changes: %+v", subs)
	}

	fixed := managed.Fixed([]managed.Static{{Name: "orders", URL: "https://example.com/orders"}}, "endpoints are managed in the settings file in Kafka mode")
	if _, _, err := fixed.CreateEndpoint(ctx, "billing", spec); !errors.Is(err, httpapi.ErrEndpointsFixed) || !strings.Contains(err.Error(), "Kafka mode") {
		t.Errorf("create in a fixed registry: %v", err)
	}
	if _, ok := fixed.EndpointDefinitions()["orders"]; !ok {
		t.Errorf("a fixed registry's definitions: %v", fixed.EndpointDefinitions())
	}
}

// A replacement keeps the secret and takes the new URL and subscription;
// a rotation signs with the new secret and, during the grace, with the
// old one too, and both survive a restart.
func TestReplaceAndRotate(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "outboxd.db")
	rc1 := testkit.NewReceiver(t, "webhook-id", nil)
	rc2 := testkit.NewReceiver(t, "webhook-id", nil)
	n := start(t, path, nil, nil)
	_, secret, err := n.reg.CreateEndpoint(ctx, "billing", httpapi.EndpointSpec{URL: rc1.URL, Topics: []string{"order.paid"}})
	if err != nil {
		t.Fatal(err)
	}
	def, err := n.reg.ReplaceEndpoint(ctx, "billing", httpapi.EndpointSpec{URL: rc2.URL, Topics: []string{"invoice.*"}, MaxInFlight: 2})
	if err != nil {
		t.Fatal(err)
	}
	if def.MaxInFlight != 2 || def.Topics[0] != "invoice.*" || !def.Signed {
		t.Fatalf("definition after replace: %+v", def)
	}
	if subs := n.o.Subscriptions(); len(subs) != 1 || subs[0].Topics[0] != "invoice.*" {
		t.Fatalf("subscriptions after replace: %+v", subs)
	}
	if _, ok := n.limits.Limit("billing"); ok {
		t.Fatal("a rate limit without rate")
	}
	if _, err := n.o.Enqueue(ctx, outbox.Event{ID: "e1", Destination: "billing", Payload: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, settle, "the delivery to the new URL", func() bool { return rc2.Acked("e1") == 1 })
	if err := verifies(t, lastRequest(t, rc2), secret); err != nil || len(rc1.Requests()) != 0 {
		t.Fatalf("after replace: signature %v, old URL saw %d requests", err, len(rc1.Requests()))
	}

	newSecret, until, err := n.reg.RotateSecret(ctx, "billing", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if newSecret == secret || !strings.HasPrefix(newSecret, "whsec_") || time.Until(until) < 59*time.Minute {
		t.Fatalf("rotation: secret %q, previous valid until %v", newSecret, until)
	}
	if d := n.reg.EndpointDefinitions()["billing"]; !d.PreviousSecretValidUntil.Equal(until) {
		t.Fatalf("definition after rotation: %+v, want the previous secret valid until %v", d, until)
	}
	n.stop()
	n = start(t, path, nil, nil)
	if _, err := n.o.Enqueue(ctx, outbox.Event{ID: "e2", Destination: "billing", Payload: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, settle, "the delivery after the rotation", func() bool { return rc2.Acked("e2") == 1 })
	req := lastRequest(t, rc2)
	if err := verifies(t, req, newSecret); err != nil {
		t.Errorf("the new secret does not verify: %v", err)
	}
	if err := verifies(t, req, secret); err != nil {
		t.Errorf("during the grace the old secret does not verify: %v", err)
	}
	if sigs := strings.Fields(req.Header.Get("webhook-signature")); len(sigs) != 2 {
		t.Errorf("webhook-signature %q: want two signatures", req.Header.Get("webhook-signature"))
	}

	// A rotation with no grace retires the previous secret at once.
	third, _, err := n.reg.RotateSecret(ctx, "billing", 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.o.Enqueue(ctx, outbox.Event{ID: "e3", Destination: "billing", Payload: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, settle, "the delivery after the second rotation", func() bool { return rc2.Acked("e3") == 1 })
	req = lastRequest(t, rc2)
	if err := verifies(t, req, third); err != nil {
		t.Errorf("the third secret does not verify: %v", err)
	}
	if err := verifies(t, req, newSecret); !errors.Is(err, httpsink.ErrSignatureMismatch) {
		t.Errorf("the secret rotated without grace: %v, want a mismatch", err)
	}
	if err := verifies(t, req, secret); err != nil {
		t.Errorf("the first secret, still in its grace: %v", err)
	}
}

// A stored endpoint that the settings now define gives way to the
// settings' definition and is deleted from the file; a stored value that
// cannot be read stops the start with an error naming the endpoint.
func TestLoadingStoredEndpoints(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "outboxd.db")
	n := start(t, path, nil, nil)
	if _, _, err := n.reg.CreateEndpoint(ctx, "orders", httpapi.EndpointSpec{URL: "https://example.com/managed"}); err != nil {
		t.Fatal(err)
	}
	n.stop()

	n = start(t, path, []httpsink.Endpoint{{Name: "orders", URL: "https://example.com/static"}}, nil)
	if d := n.reg.EndpointDefinitions()["orders"]; d.Managed || d.URL != "https://example.com/static" {
		t.Fatalf("an endpoint in the settings and the file: %+v, want the settings' one", d)
	}
	err := n.o.View(ctx, func(tx *outbox.ViewTx) error {
		if b := tx.Bucket([]byte("outboxd_endpoints")); b != nil && b.Get([]byte("orders")) != nil {
			return errors.New("the stored definition is still in the file")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	err = n.o.Update(ctx, func(tx *outbox.Tx) error {
		b, err := tx.CreateBucketIfNotExists([]byte("outboxd_endpoints"))
		if err != nil {
			return err
		}
		return b.Put([]byte("broken"), []byte(`{"v":1,"url":`))
	})
	if err != nil {
		t.Fatal(err)
	}
	n.stop()

	sink, err := httpsink.New(httpsink.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	limits, _ := outbox.NewRateLimits(nil)
	o, err := outbox.Open(path, outbox.Config{Sink: sink, RateLimits: limits})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Stop(ctx)
	_, err = managed.Open(ctx, managed.Config{Outbox: o, Sink: sink, Limits: limits})
	if err == nil || !strings.Contains(err.Error(), `managed endpoint "broken"`) {
		t.Fatalf("Open with a damaged stored endpoint: %v, want an error naming it", err)
	}
}

// Subscriptions follow the managed endpoints: an event published before
// anyone subscribed is kept and routed to the endpoint created for it; a
// filter narrows an endpoint's share; every delivery of an event carries
// its ID; a deleted endpoint's pending delivery becomes a dead letter with
// the reason while the other endpoint's delivery is untouched.
func TestSubscriptionsFollowManagedEndpoints(t *testing.T) {
	ctx := context.Background()
	billing := testkit.NewReceiver(t, "webhook-id", nil)
	crm := testkit.NewReceiver(t, "webhook-id", nil)
	n := start(t, filepath.Join(t.TempDir(), "outboxd.db"), nil, nil)
	publish := func(id, region string) {
		t.Helper()
		ev := outbox.Event{ID: id, Topic: "order.paid", Headers: map[string]string{"X-Region": region}, Payload: []byte(`{}`)}
		if _, err := n.o.Enqueue(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	publish("early", "eu")
	if st := n.o.Stats(); st.Unrouted != 1 {
		t.Fatalf("unrouted = %d before any subscriber, want 1", st.Unrouted)
	}
	if _, _, err := n.reg.CreateEndpoint(ctx, "billing", httpapi.EndpointSpec{URL: billing.URL, Topics: []string{"order.*"}}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, settle, "the early event routed to the new endpoint", func() bool { return billing.Acked("early") == 1 })

	_, crmSecret, err := n.reg.CreateEndpoint(ctx, "crm", httpapi.EndpointSpec{URL: crm.URL, Topics: []string{"order.paid"},
		Filter: map[string]string{"X-Region": "eu"}})
	if err != nil {
		t.Fatal(err)
	}
	publish("eu-1", "eu")
	publish("us-1", "us")
	testkit.WaitFor(t, settle, "the deliveries", func() bool {
		return billing.Acked("eu-1") == 1 && billing.Acked("us-1") == 1 && crm.Acked("eu-1") == 1
	})
	if crm.Attempts("us-1") != 0 || crm.Attempts("early") != 0 {
		t.Errorf("crm got events outside its filter or from before it subscribed: us-1 %d, early %d", crm.Attempts("us-1"), crm.Attempts("early"))
	}
	for _, r := range crm.Requests() {
		if r.Header.Get("Idempotency-Key") != r.ID {
			t.Errorf("a delivery's Idempotency-Key %q is not its webhook-id %q", r.Header.Get("Idempotency-Key"), r.ID)
		}
		if err := verifies(t, r, crmSecret); err != nil {
			t.Errorf("crm's delivery of %s: %v", r.ID, err)
		}
	}

	crm.SetAnswer(func(*http.Request, string, int) testkit.Reply {
		return testkit.Reply{Status: http.StatusServiceUnavailable}
	})
	publish("eu-2", "eu")
	testkit.WaitFor(t, settle, "billing's delivery and crm's failed attempt", func() bool {
		return billing.Acked("eu-2") == 1 && crm.Attempts("eu-2") > 0
	})
	moved, err := n.reg.DeleteEndpoint(ctx, "crm")
	if err != nil || moved != 1 {
		t.Fatalf("DeleteEndpoint(crm) = %d, %v; want its one pending delivery dead-lettered", moved, err)
	}
	ev, err := n.o.Get(ctx, "eu-2")
	if err != nil {
		t.Fatal(err)
	}
	var states []string
	for _, d := range ev.DeliveryStates {
		states = append(states, d.Endpoint+":"+d.State.String()+":"+d.DeadReason)
	}
	if len(ev.DeliveryStates) != 2 || ev.DeliveryStates[1].Endpoint != "crm" || ev.DeliveryStates[1].State != outbox.StateDead ||
		!strings.Contains(ev.DeliveryStates[1].DeadReason, `endpoint "crm" deleted`) || ev.DeliveryStates[0].State == outbox.StateDead {
		t.Fatalf("deliveries of eu-2 after crm's deletion: %v; want billing's delivered and crm's dead with the reason", states)
	}
	if subs := n.o.Subscriptions(); len(subs) != 1 || subs[0].Endpoint != "billing" {
		t.Fatalf("subscriptions after the deletion: %+v", subs)
	}
}

// An endpoint that answered 410 is disabled, its events kept pending;
// deleting it dead-letters them, and an endpoint created again under the
// name starts afresh: enabled, delivering.
func TestRecreatedEndpointStartsAfresh(t *testing.T) {
	ctx := context.Background()
	rc := testkit.NewReceiver(t, "webhook-id", func(*http.Request, string, int) testkit.Reply {
		return testkit.Reply{Status: http.StatusGone}
	})
	n := start(t, filepath.Join(t.TempDir(), "outboxd.db"), nil, nil)
	spec := httpapi.EndpointSpec{URL: rc.URL, Topics: []string{"order.*"}}
	if _, _, err := n.reg.CreateEndpoint(ctx, "crm", spec); err != nil {
		t.Fatal(err)
	}
	if _, err := n.o.Enqueue(ctx, outbox.Event{ID: "gone-1", Topic: "order.paid", Payload: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	disabled := func() bool {
		eps, err := n.o.Endpoints(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, ep := range eps {
			if ep.Name == "crm" {
				return ep.Disabled
			}
		}
		return false
	}
	testkit.WaitFor(t, settle, "the endpoint disabled by its 410", disabled)
	if moved, err := n.reg.DeleteEndpoint(ctx, "crm"); err != nil || moved != 1 {
		t.Fatalf("DeleteEndpoint = %d, %v; want the disabled endpoint's pending delivery dead-lettered", moved, err)
	}

	rc.SetAnswer(nil) // 204
	if _, _, err := n.reg.CreateEndpoint(ctx, "crm", spec); err != nil {
		t.Fatal(err)
	}
	if disabled() {
		t.Fatal("the endpoint created again under the name is disabled")
	}
	if _, err := n.o.Enqueue(ctx, outbox.Event{ID: "back-1", Topic: "order.paid", Payload: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, settle, "the delivery to the endpoint created again", func() bool { return rc.Acked("back-1") == 1 })
}

// A subscription the outbox itself refuses (here: an endpoint name that
// leaves too little room for the event IDs it accepts) is a validation
// error naming the field, and the endpoint is neither stored nor in force.
func TestSubscriptionRefusedByTheOutboxStoresNothing(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "outboxd.db")
	open := func() (*outbox.Outbox, *httpsink.Sink, *managed.Registry) {
		sink, err := httpsink.New(httpsink.Config{AllowPrivateNetworks: true})
		if err != nil {
			t.Fatal(err)
		}
		limits, _ := outbox.NewRateLimits(nil)
		// Event IDs of up to 1000 bytes leave 23 for an endpoint's name in
		// a delivery's store ID (1024 bytes).
		o, err := outbox.Open(path, outbox.Config{Sink: sink, RateLimits: limits, MaxIDBytes: 1000})
		if err != nil {
			t.Fatal(err)
		}
		reg, err := managed.Open(ctx, managed.Config{Outbox: o, Sink: sink, Limits: limits})
		if err != nil {
			t.Fatal(err)
		}
		return o, sink, reg
	}
	o, sink, reg := open()
	name := "an-endpoint-name-of-thirty-bytes"
	_, _, err := reg.CreateEndpoint(ctx, name, httpapi.EndpointSpec{URL: "https://example.com/hook", Topics: []string{"order.*"}, Rate: 5})
	var ve *outbox.ValidationError
	if !errors.As(err, &ve) || ve.Field != "name" {
		t.Fatalf("CreateEndpoint with a name the outbox cannot subscribe: %v; want a validation error naming the name", err)
	}
	if _, ok := reg.EndpointDefinitions()[name]; ok {
		t.Error("the refused endpoint is defined")
	}
	if _, err := sink.ResolveEndpoint(name); err == nil {
		t.Error("the refused endpoint is in the sink")
	}
	if len(o.Subscriptions()) != 0 {
		t.Errorf("subscriptions after the refusal: %+v", o.Subscriptions())
	}
	// Without topics the name needs no room: the endpoint is accepted.
	if _, _, err := reg.CreateEndpoint(ctx, name, httpapi.EndpointSpec{URL: "https://example.com/hook"}); err != nil {
		t.Fatalf("the same endpoint without topics: %v", err)
	}
	o.Stop(ctx)
	sink.Close()

	o, sink, reg = open()
	defer sink.Close()
	defer o.Stop(ctx)
	if d, ok := reg.EndpointDefinitions()[name]; !ok || len(d.Topics) != 0 {
		t.Fatalf("after a restart: %+v, want the endpoint without topics", reg.EndpointDefinitions())
	}
}

// Changes made at once from several goroutines while events are delivered
// leave the file and the running state in agreement: after a restart the
// endpoints defined are those that were last created and not deleted.
func TestConcurrentChangesAgreeWithTheFile(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "outboxd.db")
	rc := testkit.NewReceiver(t, "webhook-id", nil)
	n := start(t, path, nil, nil)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 10 {
				name := fmt.Sprintf("ep-%d-%d", g, i%3)
				spec := httpapi.EndpointSpec{URL: rc.URL, Topics: []string{fmt.Sprintf("t%d.*", i)}, Rate: float64(1 + i)}
				switch i % 4 {
				case 0, 1:
					if _, _, err := n.reg.CreateEndpoint(ctx, name, spec); err != nil && !errors.Is(err, httpapi.ErrEndpointExists) {
						t.Errorf("create %s: %v", name, err)
					}
				case 2:
					if _, err := n.reg.ReplaceEndpoint(ctx, name, spec); err != nil && !errors.Is(err, outbox.ErrNotFound) {
						t.Errorf("replace %s: %v", name, err)
					}
				case 3:
					if _, err := n.reg.DeleteEndpoint(ctx, name); err != nil && !errors.Is(err, outbox.ErrNotFound) {
						t.Errorf("delete %s: %v", name, err)
					}
				}
				if _, err := n.o.Enqueue(ctx, outbox.Event{Topic: fmt.Sprintf("t%d.x", i), Payload: []byte(`{}`)}); err != nil {
					t.Errorf("publish: %v", err)
				}
				_ = n.reg.EndpointDefinitions()
			}
		})
	}
	wg.Wait()
	want := map[string]httpapi.EndpointDefinition{}
	for name, d := range n.reg.EndpointDefinitions() {
		want[name] = d
	}
	wantSubs := len(n.o.Subscriptions())
	n.stop()
	n = start(t, path, nil, nil)
	got := n.reg.EndpointDefinitions()
	if len(got) != len(want) || len(n.o.Subscriptions()) != wantSubs {
		t.Fatalf("after a restart: %d endpoints and %d subscriptions, want %d and %d", len(got), len(n.o.Subscriptions()), len(want), wantSubs)
	}
	for name, d := range want {
		if g, ok := got[name]; !ok || g.Topics[0] != d.Topics[0] || !g.UpdatedAt.Equal(d.UpdatedAt) {
			t.Errorf("%s after a restart: %+v, want %+v", name, g, d)
		}
		if l, ok := n.limits.Limit(name); !ok || l.PerSecond < 1 {
			t.Errorf("%s after a restart: rate limit %v %v", name, l, ok)
		}
	}
}
