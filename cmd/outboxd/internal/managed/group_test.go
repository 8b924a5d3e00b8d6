package managed_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/outboxd/outbox/cmd/outboxd/internal/managed"
	"github.com/outboxd/outbox/httpsink"
	"github.com/outboxd/outbox/internal/testkit"
	"github.com/outboxd/outbox/kafka"
	"github.com/outboxd/outbox/outbox"
	"github.com/outboxd/outbox/outbox/httpapi"
)

// member is one instance of a group as outboxd wires it: a registry over
// the group's endpoints topic, a sink, and one partition store.
type member struct {
	reg   *managed.Registry
	table *kafka.Table
	sink  *httpsink.Sink
	store *outbox.Outbox
}

// groupKey is the members' key of the secrets.
var groupKey = []byte("0123456789abcdef0123456789abcdef")

func newKafka(t *testing.T) []string {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c.ListenAddrs()
}

func kafkaConfig(brokers []string) kafka.Config {
	return kafka.Config{Brokers: brokers, Topic: "events", Group: "g", DialTimeout: 5 * time.Second,
		RetryBackoff: 20 * time.Millisecond, RetryBackoffMax: 100 * time.Millisecond}
}

// join opens a member with key (nil: none) and its store, prepared as a
// partition store is; the error is the start-up's.
func join(t *testing.T, brokers []string, key []byte) (*member, error) {
	t.Helper()
	sink, err := httpsink.New(httpsink.Config{AllowPrivateNetworks: true})
	if err != nil {
		t.Fatal(err)
	}
	limits, _ := outbox.NewRateLimits(nil)
	reg, err := managed.NewGroup(managed.GroupConfig{Sink: sink, Limits: limits, Key: key})
	if err != nil {
		sink.Close()
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	tbl, err := kafka.OpenTable(ctx, kafkaConfig(brokers), kafka.TableConfig{Handlers: map[string]kafka.TableHandler{
		managed.RecordPrefix: func(r kafka.TableRecord) error { return reg.ApplyRecord(r.Offset, r.Key, r.Value) },
	}})
	if err != nil {
		t.Fatal(err)
	}
	m := &member{reg: reg, table: tbl, sink: sink}
	t.Cleanup(m.close)
	if err := reg.Attach(ctx, tbl); err != nil {
		return nil, err
	}
	o, err := outbox.Open(filepath.Join(t.TempDir(), "p0.db"), outbox.Config{Sink: sink, RateLimits: limits,
		Interval: 20 * time.Millisecond, BackoffInitial: time.Hour, BackoffMax: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	m.store = o
	if err := reg.Prepare(0, o); err != nil {
		t.Fatal(err)
	}
	return m, nil
}

func (m *member) close() {
	if m.store != nil {
		m.store.Stop(context.Background())
	}
	m.table.Close()
	m.sink.Close()
}

func mustJoin(t *testing.T, brokers []string) *member {
	t.Helper()
	m, err := join(t, brokers, groupKey)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// An endpoint created through one member is in force on every member, in
// their stores too (a topic event routes to it), with the secret the
// creation returned; a member that joins later reads it whole.
func TestGroupEndpointIsInForceOnEveryMember(t *testing.T) {
	brokers := newKafka(t)
	a, b := mustJoin(t, brokers), mustJoin(t, brokers)
	ctx := context.Background()
	def, secret, err := a.reg.CreateEndpoint(ctx, "billing", httpapi.EndpointSpec{URL: "http://127.0.0.1:1/hook", Topics: []string{"order.*"}})
	if err != nil || !def.Managed || !strings.HasPrefix(secret, "whsec_") {
		t.Fatalf("create: %+v %q %v", def, secret, err)
	}
	if _, ok := a.reg.EndpointDefinition("billing"); !ok {
		t.Fatal("the creating member does not list the endpoint when the call returns")
	}
	testkit.WaitFor(t, 10*time.Second, "the other member to list billing", func() bool {
		_, ok := b.reg.EndpointDefinition("billing")
		return ok
	})
	for _, m := range []*member{a, b} {
		if subs := m.store.Subscriptions(); len(subs) != 1 || subs[0].Endpoint != "billing" {
			t.Fatalf("a member's store subscriptions: %+v; want billing's", subs)
		}
	}
	c := mustJoin(t, brokers)
	if subs := c.store.Subscriptions(); len(subs) != 1 || subs[0].Endpoint != "billing" {
		t.Fatalf("a member joining later: store subscriptions %+v; want billing's", subs)
	}
	newSecret, _, err := c.reg.RotateSecret(ctx, "billing", 0)
	if err != nil || newSecret == secret {
		t.Fatalf("rotate through the late member: %q %v", newSecret, err)
	}
}

// Two members creating the same endpoint at once: one is created, the
// other answered 409 as on one machine, and every member holds the winner.
func TestGroupConcurrentCreatesOneWins(t *testing.T) {
	brokers := newKafka(t)
	a, b := mustJoin(t, brokers), mustJoin(t, brokers)
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, m := range []*member{a, b} {
		wg.Go(func() {
			_, _, errs[i] = m.reg.CreateEndpoint(context.Background(), "crm", httpapi.EndpointSpec{URL: "http://127.0.0.1:1/" + string(rune('a'+i))})
		})
	}
	wg.Wait()
	won := 0
	for _, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, httpapi.ErrEndpointExists):
			t.Fatalf("the losing create: %v; want ErrEndpointExists", err)
		}
	}
	if won != 1 {
		t.Fatalf("creates: %v; want exactly one to succeed", errs)
	}
	testkit.WaitFor(t, 10*time.Second, "both members to hold the same definition", func() bool {
		da, oka := a.reg.EndpointDefinition("crm")
		db, okb := b.reg.EndpointDefinition("crm")
		return oka && okb && da.URL == db.URL
	})
	// A member that reads the topic afresh holds the winner too.
	c := mustJoin(t, brokers)
	da, _ := a.reg.EndpointDefinition("crm")
	if dc, ok := c.reg.EndpointDefinition("crm"); !ok || dc.URL != da.URL {
		t.Fatalf("a new member holds %+v; want %s", dc, da.URL)
	}
}

// A deletion dead-letters the endpoint's pending deliveries in every
// member's stores.
func TestGroupDeleteDeadLettersOnEveryMember(t *testing.T) {
	brokers := newKafka(t)
	a, b := mustJoin(t, brokers), mustJoin(t, brokers)
	ctx := context.Background()
	refuse := refusing(t)
	if _, _, err := a.reg.CreateEndpoint(ctx, "sms", httpapi.EndpointSpec{URL: refuse, Topics: []string{"sms.*"}}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 10*time.Second, "b to hold sms", func() bool { _, ok := b.reg.EndpointDefinition("sms"); return ok })
	for i, m := range []*member{a, b} {
		if err := m.store.Start(); err != nil {
			t.Fatal(err)
		}
		if _, err := m.store.Enqueue(ctx, outbox.Event{ID: "e" + string(rune('0'+i)), Topic: "sms.sent", Payload: []byte("{}")}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.reg.DeleteEndpoint(ctx, "sms"); err != nil {
		t.Fatal(err)
	}
	for _, m := range []*member{a, b} {
		testkit.WaitFor(t, 10*time.Second, "the delivery dead-lettered on each member", func() bool {
			evs, _, err := m.store.List(ctx, outbox.ListOptions{State: outbox.StateDead})
			return err == nil && len(evs) == 1
		})
	}
	if _, err := a.reg.DeleteEndpoint(ctx, "sms"); !errors.Is(err, outbox.ErrNotFound) {
		t.Fatalf("deleting it again: %v; want ErrNotFound", err)
	}
}

// refusing returns the URL of a receiver that answers 503 to everything.
func refusing(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) }))
	t.Cleanup(srv.Close)
	return srv.URL + "/hook"
}

// A member without the key, or with another key, does not start once the
// topic holds a managed endpoint, and the error names the setting; with
// no endpoint yet, it starts but refuses to create one.
func TestGroupKeyRequiredOnceAnEndpointExists(t *testing.T) {
	brokers := newKafka(t)
	bare, err := join(t, brokers, nil)
	if err != nil {
		t.Fatalf("a member without a key and no endpoint in the topic: %v", err)
	}
	_, _, err = bare.reg.CreateEndpoint(context.Background(), "x", httpapi.EndpointSpec{URL: "http://127.0.0.1:1/"})
	if !errors.Is(err, httpapi.ErrEndpointsFixed) || !strings.Contains(err.Error(), "endpoint_secret_key_file") {
		t.Fatalf("create without a key: %v; want a refusal naming endpoint_secret_key_file", err)
	}
	a := mustJoin(t, brokers)
	if _, _, err := a.reg.CreateEndpoint(context.Background(), "x", httpapi.EndpointSpec{URL: "http://127.0.0.1:1/"}); err != nil {
		t.Fatal(err)
	}
	for name, key := range map[string][]byte{"no key": nil, "another key": []byte("ffffffffffffffffffffffffffffffff")} {
		_, err := join(t, brokers, key)
		if !errors.Is(err, managed.ErrKey) || !strings.Contains(err.Error(), "endpoint_secret_key_file") {
			t.Errorf("%s: start-up error %v; want one naming endpoint_secret_key_file", name, err)
		}
	}
}

// The key file holds 32 bytes, raw or as 64 hex digits; anything else is
// an error naming the setting that never shows the file's content.
func TestLoadKey(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	hexKey := "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
	for _, p := range []string{write("raw", string(groupKey)), write("hex", hexKey+"\n")} {
		if k, err := managed.LoadKey(p); err != nil || len(k) != managed.KeySize {
			t.Errorf("LoadKey(%s): %d bytes, %v", filepath.Base(p), len(k), err)
		}
	}
	for name, p := range map[string]string{
		"missing":  filepath.Join(dir, "none"),
		"short":    write("short", "secret-words"),
		"not hex":  write("nothex", strings.Repeat("z", 64)),
		"too long": write("long", hexKey+hexKey),
		"empty":    write("empty", ""),
	} {
		_, err := managed.LoadKey(p)
		if !errors.Is(err, managed.ErrKey) || !strings.Contains(err.Error(), "endpoint_secret_key_file") {
			t.Errorf("%s: %v; want an ErrKey naming the setting", name, err)
		}
		if err != nil && strings.Contains(err.Error(), "secret-words") {
			t.Errorf("%s: the error quotes the file: %v", name, err)
		}
	}
}

// A partition store assigned after a deletion (restored holding the
// deleted endpoint's deliveries) has them dead-lettered before it
// delivers.
func TestGroupDeleteReachesStoresPreparedLater(t *testing.T) {
	brokers := newKafka(t)
	a, b := mustJoin(t, brokers), mustJoin(t, brokers)
	ctx := context.Background()
	if _, _, err := a.reg.CreateEndpoint(ctx, "sms", httpapi.EndpointSpec{URL: refusing(t)}); err != nil {
		t.Fatal(err)
	}
	// A store of another partition, written while sms existed, closed
	// before the deletion (as a store is between two owners).
	path := filepath.Join(t.TempDir(), "p1.db")
	later, err := outbox.Open(path, outbox.Config{Sink: a.sink, BackoffInitial: time.Hour, BackoffMax: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := later.Enqueue(ctx, outbox.Event{ID: "held", Destination: "sms", Payload: []byte("{}")}); err != nil {
		t.Fatal(err)
	}
	if err := later.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := b.reg.DeleteEndpoint(ctx, "sms"); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 10*time.Second, "a to apply the deletion", func() bool { _, ok := a.reg.EndpointDefinition("sms"); return !ok })
	later, err = outbox.Open(path, outbox.Config{Sink: a.sink, BackoffInitial: time.Hour, BackoffMax: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer later.Stop(ctx)
	if err := a.reg.Prepare(1, later); err != nil {
		t.Fatal(err)
	}
	ev, err := later.Get(ctx, "held")
	if err != nil || ev.State != outbox.StateDead || !strings.Contains(ev.DeadReason, `endpoint "sms" deleted`) {
		t.Fatalf("the held delivery after Prepare: %+v %v; want dead, the endpoint named deleted", ev, err)
	}
}
