//go:build unix

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"

	"github.com/outboxd/outbox/internal/testkit"
	"github.com/outboxd/outbox/kafka"
)

// The tests of endpoints managed through the API in group mode (issue 30):
// three outboxd instances of the failover harness sharing them through the
// group's endpoints topic, events-changelog-endpoints.

// fleetEndpointsTopic is the fleet's endpoints topic: its changelog
// topic's name and "-endpoints".
const fleetEndpointsTopic = fleetChangelog + "-endpoints"

// withEndpointKey gives the instances f starts from now on a key file for
// the secrets of managed endpoints, and lets them deliver to loopback.
func (f *fleet) withEndpointKey() {
	f.t.Helper()
	path := filepath.Join(f.dir, "endpoints.key")
	if err := os.WriteFile(path, []byte("6f7574626f78642d6532652d6b65792d6f662d33322d62797465732d2d2d2d21\n"), 0o600); err != nil {
		f.t.Fatal(err)
	}
	f.extra = append(f.extra, "--endpoint-secret-key-file", path, "--allow-private-networks")
}

// produceTopic produces n records of event topic "order.paid" without an
// ID header, round robin over the partitions: each event's ID,
// kafka:events:<p>:<offset>, names its partition.
func (f *fleet) produceTopic(t *testing.T, n int, tag string) {
	t.Helper()
	msgs := make([]kafkago.Message, n)
	for i := range msgs {
		msgs[i] = kafkago.Message{Value: []byte(fmt.Sprintf(`{"tag":%q,"n":%d}`, tag, i)),
			Headers: []kafkago.Header{{Key: kafka.DefaultTopicHeader, Value: []byte("order.paid")}}}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := f.producer().w.WriteMessages(ctx, msgs...); err != nil {
		t.Fatalf("producing %d records: %v", n, err)
	}
}

// listed reports whether in's GET /v1/endpoints/{name} defines the
// endpoint (an endpoint's state outlives its definition).
func listed(in *instance, name string) bool {
	resp, err := statsClient.Get(in.p.url("/v1/endpoints/" + name))
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	var ep map[string]any
	return resp.StatusCode == http.StatusOK && json.NewDecoder(resp.Body).Decode(&ep) == nil && ep["managed"] != nil
}

// partitionsOf returns the partitions named by the IDs of the requests rc
// received whose body carries tag, with how many requests carried it.
func partitionsOf(rc receiver, tag string) (map[string]bool, int) {
	parts, n := map[string]bool{}, 0
	for _, r := range rc.Requests() {
		if !strings.Contains(string(r.Body), `"tag":"`+tag+`"`) {
			continue
		}
		n++
		if f := strings.Split(r.ID, ":"); len(f) == 4 {
			parts[f[2]] = true
		}
	}
	return parts, n
}

// Must show 1: an endpoint created through b is listed by a and c within a
// second, receives its topic's events from every partition signed with the
// secret its creation returned, and after SIGKILL of all three instances
// and a restart is still listed and delivering with the same secret. Two
// creations of one name at once on two instances: one 201, one 409.
// DELETE through c dead-letters its pending deliveries on every instance.
func TestGroupManagedEndpointIsSharedByEveryInstance(t *testing.T) {
	f := newFleet(t)
	f.withEndpointKey()
	hooks := newReceiver(t, nil)
	a, b, c := f.add("a"), f.add("b"), f.add("c")
	fleet := []*instance{a, b, c}
	f.waitBalanced(waitLong, fleet...)

	began := time.Now()
	code, body := call(t, "POST", b.p.url("/v1/endpoints/hooks"), "", `{"url": "`+hooks.URL+`/hook", "topics": ["order.*"]}`)
	answered := time.Since(began)
	secret, _ := body["secret"].(string)
	if code != http.StatusCreated || secret == "" {
		t.Fatalf("POST /v1/endpoints/hooks through b: %d %v", code, body)
	}
	if !listed(b, "hooks") {
		t.Fatal("b does not list the endpoint it answered 201 for")
	}
	testkit.WaitFor(t, time.Second, "a and c to list the endpoint created through b", func() bool {
		return listed(a, "hooks") && listed(c, "hooks")
	})
	t.Logf("POST through b answered after %s; listed by a and c %s after it was sent",
		answered.Round(time.Millisecond), time.Since(began).Round(time.Millisecond))

	checkDelivered := func(tag string, n int) {
		t.Helper()
		f.produceTopic(t, n, tag)
		testkit.WaitFor(t, waitLong, "the "+tag+" events at the endpoint", func() bool {
			_, got := partitionsOf(hooks, tag)
			return got >= n
		})
		parts, _ := partitionsOf(hooks, tag)
		if len(parts) != fleetPartitions {
			t.Errorf("%s: the endpoint received events of partitions %v; want all %d", tag, parts, fleetPartitions)
		}
		for _, r := range hooks.Requests() {
			if err := verifiesWith(t, r, secret); err != nil {
				t.Fatalf("%s: delivery of %s does not verify with the endpoint's secret: %v", tag, r.ID, err)
			}
		}
	}
	checkDelivered("first", 60)

	// SIGKILL of every instance, then a restart: the endpoint is still in
	// force, with the same secret.
	for _, in := range fleet {
		in.kill()
	}
	for _, in := range fleet {
		in.restart()
	}
	f.waitBalanced(waitLong, fleet...)
	for _, in := range fleet {
		if !listed(in, "hooks") {
			t.Fatalf("%s does not list the endpoint after SIGKILL and restart", in.name)
		}
	}
	checkDelivered("after-restart", 30)

	// Two creations of one name at once: one wins, the other is a 409.
	var wg sync.WaitGroup
	codes := make([]int, 2)
	for i, in := range []*instance{a, c} {
		wg.Go(func() {
			codes[i], _ = call(t, "POST", in.p.url("/v1/endpoints/twice"), "", `{"url": "`+hooks.URL+`/twice"}`)
		})
	}
	wg.Wait()
	if !(codes[0] == http.StatusCreated && codes[1] == http.StatusConflict || codes[0] == http.StatusConflict && codes[1] == http.StatusCreated) {
		t.Errorf("two creations of one name at once: %v; want one 201 and one 409", codes)
	}

	// Pending deliveries on every instance, then DELETE through c.
	hooks.setRespond(answerAll503)
	f.produceTopic(t, 36, "pending")
	testkit.WaitFor(t, waitLong, "the pending events attempted on every instance", func() bool {
		_, got := partitionsOf(hooks, "pending")
		p, ok := pending(fleet...)
		return ok && p == 36 && got >= 36
	})
	code, body = call(t, "DELETE", c.p.url("/v1/endpoints/hooks"), "", "")
	if code != http.StatusOK {
		t.Fatalf("DELETE through c: %d %v", code, body)
	}
	testkit.WaitFor(t, waitLong, "the pending deliveries dead on every instance", func() bool {
		total := 0
		for _, in := range fleet {
			s, ok := in.stats()
			if !ok || s.Dead == 0 {
				return false
			}
			total += s.Dead
		}
		p, ok := pending(fleet...)
		return ok && p == 0 && total == 36
	})
	var deadID string
	for _, r := range hooks.Requests() {
		if strings.Contains(string(r.Body), `"tag":"pending"`) {
			deadID = r.ID
		}
	}
	for _, in := range fleet {
		if listed(in, "hooks") {
			t.Errorf("%s still defines the deleted endpoint", in.name)
		}
		code, ev := call(t, "GET", in.p.url("/v1/events/"+deadID), "", "")
		ds, _ := ev["deliveries"].([]any)
		d, _ := append(ds, nil)[0].(map[string]any)
		if reason, _ := d["dead_reason"].(string); code != http.StatusOK || !strings.Contains(reason, `endpoint "hooks" deleted`) {
			t.Errorf("%s: GET %s: %d %v; want dead with the reason naming the deleted endpoint", in.name, deadID, code, ev)
		}
	}
}

// A record of the endpoints topic that does not decode (an endpoint's
// definition or an endpoint's state) is skipped, logged once and counted
// on every instance, which goes on applying the records after it.
func TestGroupEndpointsTopicSkipsRecordsThatDoNotDecode(t *testing.T) {
	f := newFleet(t)
	f.withEndpointKey()
	a, b := f.add("a"), f.add("b")
	f.waitBalanced(waitLong, a, b)
	tr := &kafkago.Transport{DialTimeout: time.Second}
	defer tr.CloseIdleConnections()
	w := &kafkago.Writer{Addr: kafkago.TCP(f.cluster.ListenAddrs()...), Topic: fleetEndpointsTopic, Transport: tr,
		RequiredAcks: kafkago.RequireAll, BatchTimeout: time.Millisecond}
	defer w.Close()
	if err := w.WriteMessages(context.Background(),
		kafkago.Message{Key: []byte("endpoint/junk"), Value: []byte("not a record")},
		kafkago.Message{Key: []byte("endpoint/junk2"), Value: []byte(`{"v":1,"op":"put","rev":7}`)},
		kafkago.Message{Key: []byte("state/orders/breaker"), Value: []byte("not a transition")},
		kafkago.Message{Key: []byte("state/orders/disable"), // an opening belongs under the breaker's key
			Value: []byte(`{"v":1,"endpoint":"orders","kind":"opened","until":"2099-12-06T07:00:05Z","at":"2026-12-06T07:00:00Z"}`)}); err != nil {
		t.Fatal(err)
	}
	for _, in := range []*instance{a, b} {
		testkit.WaitFor(t, waitLong, in.name+" to count the records skipped", func() bool {
			n, ok := in.metric("outboxd_endpoints_topic_skipped_total", "")
			return ok && n == 4
		})
		if got := len(in.logRecords("kafka: a table record does not decode; skipped")); got != 4 {
			t.Errorf("%s logged %d lines for 4 records that do not decode; want one each", in.name, got)
		}
		if code, ep := call(t, "GET", in.p.url("/v1/endpoints/orders"), "", ""); code != http.StatusOK || breakerOf(ep)["state"] != "closed" {
			t.Errorf("%s: GET /v1/endpoints/orders: %d %v; want its breaker closed", in.name, code, ep)
		}
	}
	code, body := call(t, "POST", a.p.url("/v1/endpoints/after"), "", `{"url": "`+f.rc.URL+`/after"}`)
	if code != http.StatusCreated {
		t.Fatalf("POST after the bad records: %d %v", code, body)
	}
	testkit.WaitFor(t, waitLong, "b to list the endpoint created after the bad records", func() bool { return listed(b, "after") })
}

// The key of the secrets is checked at start: a key file that is missing
// or of the wrong size stops serve with exit code 2 naming the setting;
// so does a missing or different key once the group's topic holds a
// managed endpoint.
func TestGroupEndpointKeyIsCheckedAtStart(t *testing.T) {
	f := newFleet(t)
	f.withEndpointKey()
	a := f.add("a")
	if code, body := call(t, "POST", a.p.url("/v1/endpoints/billing"), "", `{"url": "`+f.rc.URL+`/billing"}`); code != http.StatusCreated {
		t.Fatalf("POST: %d %v", code, body)
	}
	dir := t.TempDir()
	short := filepath.Join(dir, "short.key")
	other := filepath.Join(dir, "other.key")
	if err := os.WriteFile(short, []byte("too short"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(other, []byte(strings.Repeat("ab", 32)), 0o600); err != nil {
		t.Fatal(err)
	}
	base := []string{"serve", "--listen", "127.0.0.1:0", "--db", filepath.Join(dir, "outboxd.db"), "--config", f.tuning,
		"--kafka-brokers", f.brokers, "--kafka-topic", fleetTopic, "--kafka-group", f.group,
		"--kafka-destination", "orders", "--changelog-topic", fleetChangelog, "--endpoint", f.rc.endpoint("orders")}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"missing file", []string{"--endpoint-secret-key-file", filepath.Join(dir, "none.key")}, "no such file"},
		{"wrong size", []string{"--endpoint-secret-key-file", short}, "holds 9 bytes"},
		{"no key", nil, `"billing"`},
		{"another key", []string{"--endpoint-secret-key-file", other}, "does not decrypt"},
	} {
		code, out := run(t, dir, append(slices.Clone(base), tc.args...)...)
		if code != 2 || !strings.Contains(out, "endpoint_secret_key_file") || !strings.Contains(out, tc.want) {
			t.Errorf("%s: exit %d, %q; want exit 2 naming endpoint_secret_key_file and %s", tc.name, code, out, tc.want)
		}
		if strings.Contains(out, "too short") {
			t.Errorf("%s: the key file's content is in the output: %q", tc.name, out)
		}
	}
}
