//go:build unix

package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"

	"github.com/outboxd/outbox/internal/openapitest"
	"github.com/outboxd/outbox/internal/testkit"
	"github.com/outboxd/outbox/kafka"
	"github.com/outboxd/outbox/outbox/cluster"
)

// The tests of a group in which any instance answers for any event (issue
// 22): three outboxd instances of the failover harness on a kfake broker,
// with a token, each asked about events the others own.

const clusterToken = "cluster-e2e-token"

// withToken makes the instances f starts from now on require
// clusterToken, with the group session timeout session.
func (f *fleet) withToken(session time.Duration) {
	f.t.Helper()
	b, err := os.ReadFile(f.tuning)
	if err != nil {
		f.t.Fatal(err)
	}
	text := strings.Replace(string(b), "session_timeout: "+fleetSession.String(), "session_timeout: "+session.String(), 1)
	tuning := strings.TrimSuffix(f.tuning, ".yaml") + "-token.yaml"
	if err := os.WriteFile(tuning, []byte(text+"token: "+clusterToken+"\n"), 0o600); err != nil {
		f.t.Fatal(err)
	}
	f.tuning = tuning
}

// apiCall is one answer of an instance's API.
type apiCall struct {
	status int
	header http.Header
	body   []byte
}

// ask sends a request with the token to in and checks the answer against
// the OpenAPI document.
func ask(t *testing.T, in *instance, method, path string) apiCall {
	t.Helper()
	req, err := http.NewRequest(method, in.p.url(path), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+clusterToken)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s on %s: %v", method, path, in.name, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	openapitest.Check(t, req, nil, resp.StatusCode, resp.Header, b)
	return apiCall{status: resp.StatusCode, header: resp.Header, body: b}
}

// memberStats is an instance's GET /v1/stats, read with the token; ok is
// false when it did not answer.
func memberStats(in *instance) (instanceStats, bool) {
	var s instanceStats
	req, _ := http.NewRequest(http.MethodGet, in.p.url("/v1/stats?scope=local"), nil)
	req.Header.Set("Authorization", "Bearer "+clusterToken)
	resp, err := statsClient.Do(req)
	if err != nil {
		return s, false
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&s) != nil || s.Kafka == nil {
		return s, false
	}
	return s, true
}

// activeParts returns the partitions in delivers.
func activeParts(in *instance) []int {
	s, ok := memberStats(in)
	if !ok {
		return nil
	}
	return s.active()
}

// waitShared waits until every partition is active on exactly one of ins,
// and each has at least one, and until each instance sees every member
// with its address (its scope=cluster stats are complete): the group has
// settled, and a member's metadata has reached the others.
func waitShared(t *testing.T, ins ...*instance) {
	t.Helper()
	testkit.WaitFor(t, waitLong, "the partitions shared by the members", func() bool {
		return sharedOnce(activeParts, ins...)
	})
	testkit.WaitFor(t, waitLong, "every member seen by each with its address", func() bool {
		for _, in := range ins {
			if !clusterComplete(in, len(ins)) {
				return false
			}
		}
		return true
	})
}

// clusterComplete reports whether in's scope=cluster stats list that many
// members and every one answered.
func clusterComplete(in *instance, members int) bool {
	req, _ := http.NewRequest(http.MethodGet, in.p.url("/v1/stats?scope=cluster"), nil)
	req.Header.Set("Authorization", "Bearer "+clusterToken)
	resp, err := statsClient.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	var s struct {
		Complete bool              `json:"complete"`
		Members  []json.RawMessage `json:"members"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&s) != nil {
		return false
	}
	return s.Complete && len(s.Members) == members
}

// produceScheduled produces one record per key, to be delivered at at,
// with the key as its ID unless noID.
func (f *fleet) produceScheduled(t *testing.T, keys []string, at time.Time, noID bool) {
	t.Helper()
	p := f.producer()
	msgs := make([]kafkago.Message, len(keys))
	for i, k := range keys {
		msgs[i] = kafkago.Message{Key: []byte(k), Value: []byte(`{"key":"` + k + `"}`), Headers: []kafkago.Header{
			{Key: kafka.DefaultDeliverAtHeader, Value: []byte(at.UTC().Format(time.RFC3339))},
		}}
		if !noID {
			msgs[i].Headers = append(msgs[i].Headers, kafkago.Header{Key: kafka.DefaultIDHeader, Value: []byte(k)})
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.w.WriteMessages(ctx, msgs...); err != nil {
		t.Fatalf("producing %d records: %v", len(keys), err)
	}
}

// Must show 2: GET /v1/events/{id} answers the same on every instance,
// whichever owns the event (the others forward to it, with the token), and
// a dead letter is replayed through an instance that does not own it. The
// group's stats add up on any instance.
func TestAnyInstanceAnswersForAnyEvent(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	var mu sync.Mutex
	replayed := map[string]bool{}
	healed := false
	f.rc.setRespond(func(_ *http.Request, id string) int {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case replayed[id]:
			return http.StatusNoContent
		case strings.HasPrefix(id, "gone-") && healed:
			return http.StatusNoContent
		case strings.HasPrefix(id, "gone-"):
			return http.StatusGone // disables the endpoint in the store that delivers it
		case strings.HasPrefix(id, "dead-"):
			return http.StatusUnprocessableEntity // a dead letter at once
		}
		return http.StatusServiceUnavailable
	})
	f.withToken(fleetSession)
	a, b, c := f.add("a"), f.add("b"), f.add("c")
	fleet := []*instance{a, b, c}
	waitShared(t, fleet...)

	// Events scheduled an hour ahead do not change while they are asked
	// about: every instance must give the same bytes.
	later := ids("later", 0, 12)
	dead := ids("dead", 0, 6)
	f.produceScheduled(t, later, time.Now().Add(time.Hour), false)
	f.producer().mustWrite(t, dead)
	testkit.WaitFor(t, waitLong, "the events ingested and the dead letters dead", func() bool {
		pend, dl := 0, 0
		for _, in := range fleet {
			s, ok := memberStats(in)
			if !ok {
				return false
			}
			pend += s.pendingIngested()
			for _, p := range s.Kafka.Partitions {
				dl += p.Dead
			}
		}
		return pend == len(later) && dl == len(dead)
	})

	urls := map[string]*instance{}
	for _, in := range fleet {
		urls[in.p.url("")] = in
	}
	owners := map[string]int{}
	for _, id := range later {
		var first apiCall
		holder := ""
		for i, in := range fleet {
			got := ask(t, in, http.MethodGet, "/v1/events/"+id)
			if got.status != http.StatusOK {
				t.Fatalf("GET %s on %s: %d %s", id, in.name, got.status, got.body)
			}
			if i == 0 {
				first = got
			} else if string(got.body) != string(first.body) {
				t.Errorf("GET %s: %s answers %s, %s answered %s", id, in.name, got.body, a.name, first.body)
			}
			served := got.header.Get(cluster.ServedByHeader)
			if served == "" {
				if holder != "" {
					t.Errorf("GET %s: both %s and %s answered from their own stores", id, holder, in.name)
				}
				holder = in.name
			} else if urls[served] == nil || urls[served] == in {
				t.Errorf("GET %s on %s: served by %q, not another member", id, in.name, served)
			}
		}
		if holder == "" {
			t.Errorf("GET %s: no instance answered from its own store", id)
		}
		owners[holder]++
		var ev struct{ State string }
		if json.Unmarshal(first.body, &ev); ev.State != "pending" {
			t.Errorf("GET %s: %s", id, first.body)
		}
	}
	t.Logf("the scheduled events are held by %v; each was asked on every instance", owners)
	for _, in := range fleet {
		if got := ask(t, in, http.MethodGet, "/v1/events/nowhere"); got.status != http.StatusNotFound {
			t.Errorf("GET of an event no member holds, on %s with the group settled: %d %s", in.name, got.status, got.body)
		}
	}
	if len(owners) < 2 {
		t.Errorf("all the events are held by %v: the test asks no instance about another's events", owners)
	}

	// Replay each dead letter through an instance that does not hold it.
	for _, id := range dead {
		var via *instance
		for _, in := range fleet {
			if got := ask(t, in, http.MethodGet, "/v1/events/"+id); got.header.Get(cluster.ServedByHeader) != "" {
				via = in
				break
			}
		}
		if via == nil {
			t.Fatalf("%s: every instance holds it", id)
		}
		mu.Lock()
		replayed[id] = true
		mu.Unlock()
		got := ask(t, via, http.MethodPost, "/v1/events/"+id+"/replay")
		if got.status != http.StatusAccepted || got.header.Get(cluster.ServedByHeader) == "" {
			t.Errorf("replay of %s through %s: %d %s (served by %q)", id, via.name, got.status, got.body, got.header.Get(cluster.ServedByHeader))
		}
	}
	f.waitDelivered(waitLong, dead)
	for _, id := range dead[:2] {
		got := ask(t, a, http.MethodGet, "/v1/events/"+id+"/attempts")
		if got.status != http.StatusOK || !strings.Contains(string(got.body), "422") {
			t.Errorf("attempts of %s on a: %d %s", id, got.status, got.body)
		}
	}

	// The group's stats, on any instance, once the replayed dead letters'
	// outcomes are stored (the receiver has them a moment before).
	testkit.WaitFor(t, waitLong, "the group's stats without the replayed dead letters", func() bool {
		var s struct{ Pending, Dead int }
		got := ask(t, a, http.MethodGet, "/v1/stats")
		return json.Unmarshal(got.body, &s) == nil && s.Pending == len(later) && s.Dead == 0
	})
	for _, in := range fleet {
		got := ask(t, in, http.MethodGet, "/v1/stats?scope=cluster")
		var s struct {
			Pending  int  `json:"pending"`
			Dead     int  `json:"dead"`
			Complete bool `json:"complete"`
			Members  []struct {
				API      string `json:"api"`
				Answered bool   `json:"answered"`
			} `json:"members"`
		}
		if err := json.Unmarshal(got.body, &s); err != nil || got.status != http.StatusOK {
			t.Fatalf("cluster stats on %s: %d %s", in.name, got.status, got.body)
		}
		if s.Pending != len(later) || s.Dead != 0 || !s.Complete || len(s.Members) != len(fleet) {
			t.Errorf("cluster stats on %s: %s, want %d pending, 0 dead, three members", in.name, got.body, len(later))
		}
		for _, m := range s.Members {
			if urls[m.API] == nil || !m.Answered {
				t.Errorf("cluster stats on %s: member %+v", in.name, m)
			}
		}
	}
	if got := ask(t, b, http.MethodDelete, "/v1/events/"+later[0]); got.status != http.StatusNoContent {
		t.Errorf("delete of %s through b: %d %s", later[0], got.status, got.body)
	}
	for _, in := range fleet {
		var ev struct{ State string }
		got := ask(t, in, http.MethodGet, "/v1/events/"+later[0])
		if json.Unmarshal(got.body, &ev); got.status != http.StatusOK || ev.State != "delivered" && ev.State != "deleted" {
			t.Errorf("after the delete, GET %s on %s: %d %s", later[0], in.name, got.status, got.body)
		}
	}

	// inspect --cluster: every partition, its owner and address, no lag
	// once the offsets are committed, and the pending events of its store.
	inspectArgs := []string{"inspect", "--cluster", "--kafka-brokers", f.brokers, "--kafka-topic", fleetTopic,
		"--kafka-group", f.group, "--token", clusterToken}
	var view struct {
		State      string `json:"state"`
		Partitions []struct {
			Partition int    `json:"partition"`
			API       string `json:"api"`
			State     string `json:"state"`
			Lag       int64  `json:"lag"`
			End       int64  `json:"end_offset"`
			Pending   *int   `json:"pending"`
		} `json:"partitions"`
		Unanswered map[string]string `json:"unanswered"`
	}
	var last string
	testkit.WaitFor(t, waitLong, "inspect --cluster: every offset committed", func() bool {
		code, out := run(t, f.dir, append(inspectArgs, "--json")...)
		last = out
		if code != 0 || json.Unmarshal([]byte(out), &view) != nil {
			return false
		}
		for _, p := range view.Partitions {
			if p.Lag != 0 {
				return false
			}
		}
		return true
	})
	pending, end := 0, int64(0)
	for _, p := range view.Partitions {
		if urls[p.API] == nil || p.State != kafka.PartitionActive || p.Pending == nil {
			t.Errorf("inspect --cluster: partition %+v, want an owner with its address and store", p)
			continue
		}
		pending += *p.Pending
		end += p.End
	}
	if len(view.Partitions) != fleetPartitions || pending != len(later)-1 || end != int64(len(later)+len(dead)) || len(view.Unanswered) > 0 {
		t.Errorf("inspect --cluster: %d partitions, %d pending, %d records, want %d, %d, %d:\n%s",
			len(view.Partitions), pending, end, fleetPartitions, len(later)-1, len(later)+len(dead), last)
	}
	code, out := run(t, f.dir, inspectArgs...)
	if code != 0 || !strings.Contains(out, "PARTITION  OWNER") || !strings.Contains(out, a.p.url("")) {
		t.Errorf("inspect --cluster: exit %d:\n%s", code, out)
	}
	t.Logf("outboxd inspect --cluster:\n%s", out)
	code, out = run(t, f.dir, "inspect", "--cluster", "--kafka-brokers", f.brokers, "--kafka-topic", fleetTopic, "--kafka-group", f.group)
	if code != 0 || !strings.Contains(out, "answered 401") || !strings.Contains(out, "?") {
		t.Errorf("inspect --cluster without the token: exit %d:\n%s", code, out)
	}

	// The endpoint disabled (410) in the stores of every member is enabled
	// on all of them through one.
	gone := ids("gone", 0, 12)
	f.producer().mustWrite(t, gone)
	disabledOn := func(in *instance, query string) bool {
		var eps struct{ Endpoints []struct{ Disabled bool } }
		got := ask(t, in, http.MethodGet, "/v1/endpoints"+query)
		return json.Unmarshal(got.body, &eps) == nil && len(eps.Endpoints) == 1 && eps.Endpoints[0].Disabled
	}
	testkit.WaitFor(t, waitLong, "the endpoint disabled on every member", func() bool {
		return disabledOn(a, "") && disabledOn(b, "") && disabledOn(c, "") && disabledOn(c, "?scope=cluster")
	})
	mu.Lock()
	healed = true
	mu.Unlock()
	if got := ask(t, b, http.MethodPost, "/v1/endpoints/orders/enable"); got.status != http.StatusOK || strings.Contains(string(got.body), `"disabled":true`) {
		t.Errorf("enable through b: %d %s", got.status, got.body)
	}
	for _, in := range fleet {
		if disabledOn(in, "") {
			t.Errorf("after the enable through b, the endpoint is still disabled on %s", in.name)
		}
	}
	f.waitDelivered(waitLong, gone)
}

// When the owner of an event is lost, an instance asked about it answers
// 502 naming the owner and its address (its ID, made by Kafka, tells its
// partition), until the group has moved the partition.
func TestLostOwnerIsNamedWithItsAddress(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	f.rc.setRespond(answerAll503)
	// A long session: the group notices the loss long after the asking.
	f.withToken(30 * time.Second)
	a, b, c := f.add("a"), f.add("b"), f.add("c")
	waitShared(t, a, b, c)
	f.produceScheduled(t, ids("k", 0, 12), time.Now().Add(time.Hour), true)
	var held string
	testkit.WaitFor(t, waitLong, "an event b holds", func() bool {
		s, ok := memberStats(b)
		if !ok || s.pendingIngested() == 0 {
			return false
		}
		for _, p := range s.Kafka.Partitions {
			if p.Pending > 0 {
				for off := int64(0); off < 12; off++ {
					id := kafka.RecordID(fleetTopic, p.Partition, off)
					if r := ask(t, b, http.MethodGet, "/v1/events/"+id); r.status == http.StatusOK && r.header.Get(cluster.ServedByHeader) == "" {
						held = id
						return true
					}
				}
			}
		}
		return false
	})
	if r := ask(t, a, http.MethodGet, "/v1/events/"+held); r.status != http.StatusOK {
		t.Fatalf("GET %s through a before the loss: %d %s", held, r.status, r.body)
	}
	b.kill()
	got := ask(t, a, http.MethodGet, "/v1/events/"+held)
	var fe struct {
		Error       string `json:"error"`
		Unreachable []struct {
			API   string `json:"api"`
			Owner bool   `json:"owner"`
		} `json:"unreachable"`
	}
	if err := json.Unmarshal(got.body, &fe); err != nil || got.status != http.StatusBadGateway || len(fe.Unreachable) != 1 ||
		fe.Unreachable[0].API != b.p.url("") || !fe.Unreachable[0].Owner || !strings.Contains(fe.Error, "its owner") {
		t.Errorf("GET %s through a with its owner b lost: %d %s, want 502 naming b at %s as the owner", held, got.status, got.body, b.p.url(""))
	}
	t.Logf("with its owner lost: %d %s", got.status, got.body)
	if n, ok := a.metric("outboxd_cluster_forwards_total", `outcome="unreachable"`); !ok || n != 1 {
		t.Errorf("outboxd_cluster_forwards_total{outcome=\"unreachable\"} on a = %v (found %v), want 1", n, ok)
	}
	if n, ok := a.metric("outboxd_cluster_forwards_total", `outcome="answered"`); !ok || n < 1 {
		t.Errorf("outboxd_cluster_forwards_total{outcome=\"answered\"} on a = %v (found %v), want the GET before the loss", n, ok)
	}
}

// An instance of a group listening on a wildcard address cannot tell the
// others where to reach it: serve refuses to start, naming the setting;
// with --kafka-advertise-url it starts.
func TestWildcardListenNeedsAnAdvertisedAddress(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	kafkaArgs := []string{"serve", "--listen", "0.0.0.0:0", "--kafka-brokers", "127.0.0.1:1", "--kafka-topic", "events"}
	code, out := run(t, dir, kafkaArgs...)
	if code != 2 || !strings.Contains(out, "kafka.advertise_url (--kafka-advertise-url, OUTBOXD_KAFKA_ADVERTISE_URL): required when listen") {
		t.Errorf("exit %d, %q", code, out)
	}
	code, out = run(t, dir, append(kafkaArgs, "--kafka-advertise-url", "http://0.0.0.0:8080")...)
	if code != 2 || !strings.Contains(out, "kafka.advertise_url") || !strings.Contains(out, "wildcard") {
		t.Errorf("a wildcard advertised: exit %d, %q", code, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "outboxd.db")); err == nil {
		t.Error("a refused configuration created the database")
	}
}
