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

// addMember starts an instance of f that requires clusterToken.
func (f *fleet) addMember(name string) *instance {
	f.t.Helper()
	f.mu.Lock()
	if !strings.HasSuffix(f.tuning, "-token.yaml") {
		b, err := os.ReadFile(f.tuning)
		if err != nil {
			f.t.Fatal(err)
		}
		tuning := strings.TrimSuffix(f.tuning, ".yaml") + "-token.yaml"
		if err := os.WriteFile(tuning, append(b, "token: "+clusterToken+"\n"...), 0o600); err != nil {
			f.t.Fatal(err)
		}
		f.tuning = tuning
	}
	f.mu.Unlock()
	return f.add(name)
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
	req, _ := http.NewRequest(http.MethodGet, in.p.url("/v1/stats"), nil)
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
	var out []int
	for _, p := range s.Kafka.Partitions {
		if p.State == kafka.PartitionActive {
			out = append(out, p.Partition)
		}
	}
	return out
}

// waitShared waits until every partition is active on exactly one of ins,
// and each has at least one.
func waitShared(t *testing.T, ins ...*instance) {
	t.Helper()
	testkit.WaitFor(t, waitLong, "the partitions shared by the members", func() bool {
		seen := map[int]bool{}
		for _, in := range ins {
			parts := activeParts(in)
			if len(parts) == 0 {
				return false
			}
			for _, p := range parts {
				if seen[p] {
					return false
				}
				seen[p] = true
			}
		}
		return len(seen) == fleetPartitions
	})
}

// produceScheduled produces one record per ID, to be delivered at at.
func (f *fleet) produceScheduled(t *testing.T, idList []string, at time.Time) {
	t.Helper()
	p := f.producer()
	msgs := make([]kafkago.Message, len(idList))
	for i, id := range idList {
		msgs[i] = kafkago.Message{Key: []byte(id), Value: []byte(`{"id":"` + id + `"}`), Headers: []kafkago.Header{
			{Key: kafka.DefaultIDHeader, Value: []byte(id)},
			{Key: kafka.DefaultDeliverAtHeader, Value: []byte(at.UTC().Format(time.RFC3339))},
		}}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.w.WriteMessages(ctx, msgs...); err != nil {
		t.Fatalf("producing %d records: %v", len(idList), err)
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
	f.rc.setRespond(func(_ *http.Request, id string) int {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case replayed[id]:
			return http.StatusNoContent
		case strings.HasPrefix(id, "dead-"):
			return http.StatusUnprocessableEntity // a dead letter at once
		}
		return http.StatusServiceUnavailable
	})
	a, b, c := f.addMember("a"), f.addMember("b"), f.addMember("c")
	fleet := []*instance{a, b, c}
	waitShared(t, fleet...)

	// Events scheduled an hour ahead do not change while they are asked
	// about: every instance must give the same bytes.
	later := ids("later", 0, 12)
	dead := ids("dead", 0, 6)
	f.produceScheduled(t, later, time.Now().Add(time.Hour))
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

	// The group's stats, on any instance.
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
