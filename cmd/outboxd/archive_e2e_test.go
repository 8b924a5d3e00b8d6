package main

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/outboxd/outbox/internal/testkit"
)

// archiveTopics are the topics the archive tests publish on, in turn.
var archiveTopics = []string{"order.created", "order.paid", "invoice.sent"}

// publishTopics publishes n events with IDs prefix-00000..., on the
// archiveTopics in turn, keys cust-<i%50>, in batches of 1,000, and
// returns their IDs.
func publishTopics(t *testing.T, p *proc, prefix string, n int) []string {
	t.Helper()
	var ids []string
	for i := 0; i < n; i += 1000 {
		var evs []string
		for j := i; j < min(i+1000, n); j++ {
			id := fmt.Sprintf("%s-%05d", prefix, j)
			ids = append(ids, id)
			evs = append(evs, fmt.Sprintf(`{"id": %q, "topic": %q, "key": "cust-%d", "payload": {"n": %d}}`, id, archiveTopics[j%3], j%50, j))
		}
		if code, body := call(t, "POST", p.url("/v1/events"), "", "["+strings.Join(evs, ",")+"]"); code != http.StatusAccepted {
			t.Fatalf("publish: %d %v", code, body)
		}
	}
	return ids
}

// archiveIDs pages through GET /v1/archive with q and returns the IDs
// found, in order, and the number of pages.
func archiveIDs(t *testing.T, p *proc, q url.Values) ([]string, int) {
	t.Helper()
	var ids []string
	for pages := 1; ; pages++ {
		code, body := call(t, "GET", p.url("/v1/archive?"+q.Encode()), "", "")
		if code != http.StatusOK {
			t.Fatalf("GET /v1/archive?%s: %d %v", q.Encode(), code, body)
		}
		for _, ev := range body["events"].([]any) {
			ids = append(ids, ev.(map[string]any)["id"].(string))
		}
		next, _ := body["next"].(string)
		if next == "" {
			return ids, pages
		}
		q.Set("cursor", next)
	}
}

// With --retain 1h, 10,000 events are delivered and kept: paging
// topic=order.*&from= returns exactly the 6,667 on order.* topics, each
// once, and inspect --archive reads the same archive offline.
func TestArchiveSearchOfTenThousandDelivered(t *testing.T) {
	dir := t.TempDir()
	rc := newReceiver(t, nil)
	p := start(t, dir, "--allow-private-networks", "--interval", "20ms", "--retain", "1h",
		"--endpoint", rc.endpoint("billing")+",topic=*")
	from := time.Now().UTC()
	ids := publishTopics(t, p, "ev", 10_000)
	testkit.WaitFor(t, 3*time.Minute, "10,000 deliveries archived", func() bool {
		_, body := call(t, "GET", p.url("/v1/stats"), "", "")
		return body["archived"] == 10_000.0 && body["pending"] == 0.0
	})
	got, pages := archiveIDs(t, p, url.Values{"topic": {"order.*"}, "from": {from.Format(time.RFC3339Nano)}, "limit": {"1000"}})
	want := map[string]bool{}
	for i, id := range ids {
		if i%3 != 2 {
			want[id] = true
		}
	}
	seen := map[string]bool{}
	for _, id := range got {
		if !want[id] || seen[id] {
			t.Fatalf("order.* returned %s, not on order.* or twice", id)
		}
		seen[id] = true
	}
	if len(seen) != len(want) || pages < 7 {
		t.Fatalf("order.* returned %d of %d events in %d pages", len(seen), len(want), pages)
	}
	// Nothing was delivered twice, and nothing archived is delivered again.
	for _, id := range ids {
		if n := rc.ackedCount(id); n != 1 {
			t.Fatalf("%s delivered %d times", id, n)
		}
	}
	p.signal(syscall.SIGTERM, 10*time.Second)
	code, out := run(t, dir, "inspect", "--archive", "--topic", "invoice.*", "--key-prefix", "cust-2", "--limit", "1000", "--json")
	// Keys cust-2, cust-20..cust-29 (i%50) on invoice.sent (i%3 == 2).
	if wantN := countMatching(10_000, func(i int) bool { return i%3 == 2 && strings.HasPrefix(fmt.Sprintf("cust-%d", i%50), "cust-2") }); code != 0 || strings.Count(out, `"delivered_at"`) != wantN {
		t.Fatalf("inspect --archive: exit %d, %d deliveries, want %d:\n%.2000s", code, strings.Count(out, `"delivered_at"`), wantN, out)
	}
}

// countMatching counts the i in [0, n) that keep says.
func countMatching(n int, keep func(int) bool) int {
	c := 0
	for i := range n {
		if keep(i) {
			c++
		}
	}
	return c
}

// --retain with Kafka is refused at start-up (exit status 2) with the
// reason, rather than keeping an archive a partition would not carry.
func TestRetainRefusedWithKafka(t *testing.T) {
	code, out := run(t, t.TempDir(), "serve", "--retain", "7d", "--kafka-brokers", "127.0.0.1:1", "--kafka-topic", "events")
	if code != 2 || !strings.Contains(out, "delivery.retain (--retain, OUTBOXD_RETAIN)") || !strings.Contains(out, "Kafka") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
}
