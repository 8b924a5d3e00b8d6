package main

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
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

// archiveCount is how many deliveries GET /v1/archive with q pages through.
func archiveCount(t *testing.T, p *proc, q url.Values) int {
	t.Helper()
	q.Set("limit", "1000")
	ids, _ := archiveIDs(t, p, q)
	return len(ids)
}

// statsField reads one number of GET /v1/stats.
func statsField(t *testing.T, p *proc, name string) float64 {
	t.Helper()
	_, body := call(t, "GET", p.url("/v1/stats"), "", "")
	n, _ := body[name].(float64)
	return n
}

// SIGKILL while 1,000 archived deliveries are replayed to another
// endpoint at 200/s: after a restart every delivery the replay queued
// reaches that endpoint, none twice beyond the deliveries in flight at
// the kill, and the archive lost nothing (each delivery made is archived
// once). The replay itself is not resumed.
func TestArchiveReplayAcrossSIGKILL(t *testing.T) {
	const concurrency, maxUncommitted = 8, 16
	dir := t.TempDir()
	billing, crm := newReceiver(t, nil), newReceiver(t, nil)
	args := []string{"--allow-private-networks", "--interval", "20ms", "--retain", "1h",
		"--concurrency", fmt.Sprint(concurrency), "--max-uncommitted", fmt.Sprint(maxUncommitted),
		"--endpoint", billing.endpoint("billing") + ",topic=order.*", "--endpoint", crm.endpoint("crm")}
	p := start(t, dir, args...)
	ids := publishTopics(t, p, "ev", 1500) // 1,000 on order.*
	testkit.WaitFor(t, 2*time.Minute, "1,000 deliveries archived", func() bool { return statsField(t, p, "archived") == 1000 })
	code, body := call(t, "POST", p.url("/v1/archive/replay"), "", `{"topic": "order.*", "target": "crm", "rate": 200}`)
	if code != http.StatusAccepted {
		t.Fatalf("POST /v1/archive/replay: %d %v", code, body)
	}
	replay := body["id"].(string)
	testkit.WaitFor(t, time.Minute, "200 replayed deliveries at crm", func() bool { return len(crm.Requests()) >= 200 })
	p.signal(syscall.SIGKILL, 5*time.Second)
	received := len(crm.Requests())

	p = start(t, dir, args...)
	testkit.WaitFor(t, 2*time.Minute, "the replayed deliveries made", func() bool { return statsField(t, p, "pending") == 0 })
	if code, _ := call(t, "GET", p.url("/v1/archive/replay/"+replay), "", ""); code != http.StatusNotFound {
		t.Fatalf("the replay after a restart: %d, want 404 (not resumed)", code)
	}
	twice, distinct := 0, 0
	for _, id := range ids {
		switch n := crm.ackedCount(id); {
		case n > 2:
			t.Fatalf("%s replayed to crm %d times", id, n)
		case n == 2:
			twice++
		}
		if crm.ackedCount(id) > 0 {
			distinct++
		}
	}
	if bound := concurrency + maxUncommitted; twice > bound {
		t.Fatalf("%d deliveries made twice, more than the %d in flight", twice, bound)
	}
	if distinct < received-twice || distinct > 1000 {
		t.Fatalf("crm received %d events (%d before the kill)", distinct, received)
	}
	testkit.WaitFor(t, time.Minute, "every delivery archived", func() bool { return statsField(t, p, "archived") == float64(1000+distinct) })
	if n := archiveCount(t, p, url.Values{"endpoint": {"billing"}}); n != 1000 {
		t.Fatalf("billing's archive holds %d deliveries after the kill, want 1000", n)
	}
	if n := archiveCount(t, p, url.Values{"endpoint": {"crm"}}); n != distinct {
		t.Fatalf("crm's archive holds %d deliveries, crm received %d events", n, distinct)
	}
	t.Logf("killed after %d replayed deliveries; %d in all, %d made twice", received, distinct, twice)
	p.signal(syscall.SIGTERM, 10*time.Second)
}

// SIGKILL while the archive is trimmed to a size limit: after a restart
// the archive is what it was less its oldest deliveries (oldest first),
// every index agrees with it (a trim transaction removes a record and its
// index entries together), and check finds the file sound.
func TestArchiveTrimAcrossSIGKILL(t *testing.T) {
	dir := t.TempDir()
	rc := newReceiver(t, nil)
	base := []string{"--allow-private-networks", "--interval", "20ms", "--retain", "1h", "--endpoint", rc.endpoint("billing") + ",topic=*"}
	p := start(t, dir, base...)
	publishTopics(t, p, "ev", 5000)
	testkit.WaitFor(t, 2*time.Minute, "5,000 deliveries archived", func() bool { return statsField(t, p, "archived") == 5000 })
	before, _ := archiveIDs(t, p, url.Values{"limit": {"1000"}}) // in delivery order
	p.signal(syscall.SIGTERM, 10*time.Second)

	p = start(t, dir, append(base, "--retain-max-bytes", "400KiB", "--maintenance-interval", "20ms")...)
	testkit.WaitFor(t, time.Minute, "the trim to begin", func() bool { return statsField(t, p, "archived") < 5000 })
	p.signal(syscall.SIGKILL, 5*time.Second)

	p = start(t, dir, base...)
	after, _ := archiveIDs(t, p, url.Values{"limit": {"1000"}})
	n := len(after)
	if n == 0 || n >= 5000 || !slices.Equal(after, before[5000-n:]) {
		t.Fatalf("after the kill the archive holds %d deliveries, not the newest %d of before", n, n)
	}
	if got := int(statsField(t, p, "archived")); got != n {
		t.Fatalf("stats count %d archived, the archive holds %d", got, n)
	}
	for _, q := range []url.Values{{"topic": {"*"}}, {"endpoint": {"billing"}}, {"key_prefix": {"cust-"}}} {
		if got := archiveCount(t, p, q); got != n {
			t.Fatalf("archive?%s holds %d deliveries, the archive %d", q.Encode(), got, n)
		}
	}
	if o, i := archiveCount(t, p, url.Values{"topic": {"order.*"}}), archiveCount(t, p, url.Values{"topic": {"invoice.sent"}}); o+i != n {
		t.Fatalf("order.* %d + invoice.sent %d != %d archived", o, i, n)
	}
	p.signal(syscall.SIGTERM, 10*time.Second)
	if code, out := run(t, dir, "check", "--db", "outboxd.db"); code != 0 || !strings.Contains(out, "ok: no problems found") {
		t.Fatalf("check after the trim's kill: exit %d:\n%s", code, out)
	}
}

// An endpoint created with since receives the last hour's events on its
// topics once each (delivered to another endpoint and archived), paced in
// the background, then the new ones as they come.
func TestEndpointCreatedWithSinceIsBackfilled(t *testing.T) {
	dir := t.TempDir()
	billing, crm := newReceiver(t, nil), newReceiver(t, nil)
	p := start(t, dir, "--allow-private-networks", "--interval", "20ms", "--retain", "1h",
		"--endpoint", billing.endpoint("billing")+",topic=*")
	since := time.Now().UTC()
	ids := publishTopics(t, p, "ev", 300)
	testkit.WaitFor(t, time.Minute, "300 deliveries archived", func() bool { return statsField(t, p, "archived") == 300 })
	code, body := call(t, "POST", p.url("/v1/endpoints/crm"), "",
		`{"url": "`+crm.URL+`/hook", "topics": ["order.*"], "since": "`+since.Format(time.RFC3339Nano)+`", "backfill_rate": 500}`)
	backfill, _ := body["backfill"].(string)
	if code != http.StatusCreated || backfill == "" {
		t.Fatalf("POST /v1/endpoints/crm with since: %d %v", code, body)
	}
	testkit.WaitFor(t, time.Minute, "the backfill to end", func() bool {
		_, body = call(t, "GET", p.url("/v1/archive/replay/"+backfill), "", "")
		return body["state"] != "running"
	})
	if body["state"] != "done" || body["replayed"] != 200.0 {
		t.Fatalf("backfill: %v", body)
	}
	later := publishTopics(t, p, "new", 30)
	var want []string
	for i, id := range append(slices.Clone(ids), later...) {
		if i%300%3 != 2 { // order.created and order.paid
			want = append(want, id)
		}
	}
	testkit.WaitFor(t, time.Minute, "crm received every order event", func() bool { return len(crm.missing(want)) == 0 })
	testkit.WaitFor(t, time.Minute, "nothing pending", func() bool { return statsField(t, p, "pending") == 0 })
	for _, id := range append(ids, later...) {
		if n, w := crm.attemptCount(id), b2i(slices.Contains(want, id)); n != w {
			t.Fatalf("crm received %s %d times, want %d", id, n, w)
		}
	}
	p.signal(syscall.SIGTERM, 10*time.Second)
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
