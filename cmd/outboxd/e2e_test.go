package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/outboxd/outbox/internal/testkit"
)

// Must show 1: defaults in an empty directory, a signed delivery with the
// idempotency headers, and GET says delivered.
func TestServeOnDefaultsDeliversSignedEvent(t *testing.T) {
	dir := t.TempDir()
	rc := newReceiver(t, nil)
	p := start(t, dir, "--endpoint", rc.endpoint("orders"))
	if _, err := os.Stat(filepath.Join(dir, "outboxd.db")); err != nil {
		t.Fatalf("default database file ./outboxd.db not created: %v", err)
	}
	if code, _ := call(t, "GET", p.url("/readyz"), "", ""); code != http.StatusOK {
		t.Fatalf("readyz: %d", code)
	}
	code, m := call(t, "POST", p.url("/v1/events"), "", `{"destination":"orders","payload":{"order":1}}`)
	if code != http.StatusAccepted {
		t.Fatalf("POST: %d %v", code, m)
	}
	id := m["ids"].([]any)[0].(string)
	testkit.WaitFor(t, 10*time.Second, "delivery", func() bool { return rc.ackedCount(id) > 0 })
	h, bad := rc.lastHeader(), rc.badSignatures()
	if len(bad) > 0 || h.Get("webhook-signature") == "" {
		t.Errorf("signature missing or wrong: %q", h.Get("webhook-signature"))
	}
	if h.Get("Idempotency-Key") != id || h.Get("webhook-id") != id || h.Get("webhook-timestamp") == "" {
		t.Errorf("headers %v, want Idempotency-Key and webhook-id %s and a timestamp", h, id)
	}
	testkit.WaitFor(t, 10*time.Second, "GET to say delivered", func() bool {
		_, m := call(t, "GET", p.url("/v1/events/"+id), "", "")
		return m["state"] == "delivered"
	})

	code, _ = call(t, "GET", p.url("/healthz"), "", "")
	if code != http.StatusOK {
		t.Errorf("healthz: %d", code)
	}
	// The delivery hooks run once the outcome is committed, which a GET
	// may see first: wait for the metrics to catch up.
	names := []string{"outbox_enqueued_total 1", "outbox_deliveries_total", "outbox_pending", "outbox_enqueue_to_delivery_seconds", "go_goroutines"}
	var metrics string
	missing := func() []string {
		resp, err := client.Get(p.url("/metrics"))
		if err != nil {
			t.Fatal(err)
		}
		metrics = readAll(t, resp)
		var lack []string
		for _, name := range names {
			if !strings.Contains(metrics, name) {
				lack = append(lack, name)
			}
		}
		return lack
	}
	testkit.WaitFor(t, 10*time.Second, "the delivery in /metrics", func() bool { return len(missing()) == 0 })
	if d := p.signal(syscall.SIGTERM, 10*time.Second); p.exitCode() != 0 {
		t.Errorf("exit code %d after SIGTERM (%s)", p.exitCode(), d)
	}
}

func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			return b.String()
		}
	}
}

// Must show 2: every bad input gets its status and a clear message, and
// none changes the store.
func TestBadInputOverHTTPChangesNothing(t *testing.T) {
	dir := t.TempDir()
	rc := newReceiver(t, nil)
	p := start(t, dir, "--token", "s3cret-token-1234", "--max-body-bytes", "2KiB", "--max-payload-bytes", "1KiB",
		"--max-batch", "3", "--max-deliveries-per-request", "2", "--endpoint", rc.endpoint("orders")+",topic=order.*")
	ok := `{"destination":"orders"}`
	cases := []struct {
		name, method, path, token, body string
		status                          int
		want                            string
	}{
		{"malformed JSON", "POST", "/v1/events", "s3cret-token-1234", `{"destination":"orders"`, 400, "malformed JSON"},
		{"wrong type", "POST", "/v1/events", "s3cret-token-1234", `{"destination":["orders"]}`, 400, "destination: must be a string, got array"},
		{"missing destination", "POST", "/v1/events", "s3cret-token-1234", `{"payload":"x"}`, 400, "destination: is required"},
		{"unknown endpoint", "POST", "/v1/events", "s3cret-token-1234", `{"destination":"billing"}`, 400, `destination: unknown endpoint: "billing"`},
		{"raw URL not allowed", "POST", "/v1/events", "s3cret-token-1234", `{"destination":"https://example.com/x"}`, 400, "raw URL destinations are not allowed"},
		{"both payload forms", "POST", "/v1/events", "s3cret-token-1234", `{"destination":"orders","payload":"x","payload_base64":"eA=="}`, 400, "give one of the two"},
		{"oversize body", "POST", "/v1/events", "s3cret-token-1234", `{"destination":"orders","payload":"` + strings.Repeat("x", 3000) + `"}`, 413, "over the limit of 2048 bytes"},
		{"oversize payload", "POST", "/v1/events", "s3cret-token-1234", `{"destination":"orders","payload":"` + strings.Repeat("x", 1100) + `"}`, 413, "payload: 1102 bytes is over the limit of 1024"},
		{"oversize batch", "POST", "/v1/events", "s3cret-token-1234", "[" + strings.Repeat(ok+",", 3) + ok + "]", 413, "batch of 4 events is over the limit of 3"},
		{"too many deliveries", "POST", "/v1/events", "s3cret-token-1234", `[{"topic":"order.paid"},{"topic":"order.paid"},` + ok + `]`, 413,
			"3 deliveries (one per event with a destination, one per subscribed endpoint of a topic event), over the limit of 2 per request set by " +
				"limits.max_deliveries_per_request (--max-deliveries-per-request, OUTBOXD_MAX_DELIVERIES_PER_REQUEST); nothing was stored"},
		{"no token", "POST", "/v1/events", "", ok, 401, "missing bearer token"},
		{"bad token", "POST", "/v1/events", "s3cret-token-1235", ok, 401, "invalid bearer token"},
		{"unknown route", "GET", "/v2/events", "s3cret-token-1234", "", 404, "no route for GET /v2/events"},
		{"unknown method", "PUT", "/v1/events/abc", "s3cret-token-1234", ok, 405, "method PUT not allowed on /v1/events/abc"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, m := call(t, c.method, p.url(c.path), c.token, c.body)
			msg, _ := m["error"].(string)
			if code != c.status || !strings.Contains(msg, c.want) {
				t.Errorf("got %d %q, want %d with %q", code, msg, c.status, c.want)
			}
		})
	}
	// Wrong Content-Type.
	req, _ := http.NewRequest("POST", p.url("/v1/events"), strings.NewReader(ok))
	req.Header.Set("Authorization", "Bearer s3cret-token-1234")
	req.Header.Set("Content-Type", "text/plain")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if body := readAll(t, resp); resp.StatusCode != 415 || !strings.Contains(body, "Content-Type must be application/json") {
		t.Errorf("text/plain: %d %s", resp.StatusCode, body)
	}

	code, m := call(t, "GET", p.url("/v1/stats"), "s3cret-token-1234", "")
	if code != 200 || m["pending"] != float64(0) || m["dead"] != float64(0) {
		t.Errorf("stats after bad input: %d %v", code, m)
	}
	p.signal(syscall.SIGTERM, 10*time.Second)
	_, out := run(t, dir, "inspect", "--db", "outboxd.db", "--json")
	var summary struct {
		Stats struct {
			Pending          int  `json:"pending"`
			Dead             int  `json:"dead"`
			ChangelogEntries int  `json:"changelog_entries"`
			KeyIndex         bool `json:"key_index"`
		}
	}
	if err := json.Unmarshal([]byte(out), &summary); err != nil {
		t.Fatalf("inspect --json: %v\n%s", err, out)
	}
	if summary.Stats.Pending != 0 || summary.Stats.Dead != 0 || summary.Stats.ChangelogEntries != 0 {
		t.Errorf("the store changed: %+v", summary.Stats)
	}
	if summary.Stats.KeyIndex {
		t.Errorf("inspect: key index kept by a server without --ordered: %s", out)
	}
}

// enqueueBatches posts n events in batches of size with IDs prefix-i and
// returns the acknowledged IDs.
func enqueueBatches(t *testing.T, p *proc, prefix, dest string, n, size int) []string {
	t.Helper()
	var acked []string
	for i := 0; i < n; i += size {
		var b strings.Builder
		b.WriteByte('[')
		var ids []string
		for j := i; j < min(n, i+size); j++ {
			if j > i {
				b.WriteByte(',')
			}
			id := fmt.Sprintf("%s-%05d", prefix, j)
			ids = append(ids, id)
			fmt.Fprintf(&b, `{"id":%q,"destination":%q,"payload":{"n":%d}}`, id, dest, j)
		}
		b.WriteByte(']')
		code, m := call(t, "POST", p.url("/v1/events"), "", b.String())
		if code != http.StatusAccepted {
			t.Fatalf("POST batch: %d %v", code, m)
		}
		acked = append(acked, ids...)
	}
	return acked
}

// Must show 3: SIGTERM with 1,000 events in flight to a slow receiver (all
// of them waiting at the receiver) exits within the grace period; a restart
// delivers everything acknowledged.
func TestSIGTERMUnderLoadExitsWithinGraceAndLosesNothing(t *testing.T) {
	dir := t.TempDir()
	release := make(chan struct{})
	var inFlight atomic.Int64
	rc := newReceiver(t, holdUntil(release, &inFlight))
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()
	const grace = 5 * time.Second
	// The endpoint starts at all 1,000 workers: the premise is that each
	// of them hangs when the signal comes.
	args := []string{"--endpoint", rc.endpoint("slow"), "--concurrency", "1000", "--initial-per-endpoint", "1000", "--interval", "50ms",
		"--backoff-initial", "50ms", "--backoff-max", "200ms", "--shutdown-grace", grace.String()}
	p := start(t, dir, args...)
	acked := enqueueBatches(t, p, "term", "slow", 1000, 100)
	testkit.WaitFor(t, 30*time.Second, "1,000 deliveries in flight", func() bool { return inFlight.Load() >= 1000 })
	took := p.signal(syscall.SIGTERM, grace+5*time.Second)
	// The process exits within the grace; slack for the signal's delivery
	// and the process teardown on a busy machine (CI runs many test
	// binaries at once on two cores). The log's own "stopped" record
	// states the time outboxd took.
	if took > grace+time.Second || p.exitCode() != 0 {
		t.Errorf("exit took %s with code %d, grace is %s", took, p.exitCode(), grace)
	}
	t.Logf("SIGTERM with 1,000 deliveries in flight: exited in %s (grace %s), code %d", took.Round(time.Millisecond), grace, p.exitCode())
	for _, line := range strings.Split(p.log.String(), "\n") {
		if strings.Contains(line, `"msg":"shutting down"`) || strings.Contains(line, `"msg":"stopped"`) || strings.Contains(line, "cancelled") {
			t.Log(line)
		}
	}
	if !strings.Contains(p.log.String(), `"msg":"stopped"`) {
		t.Errorf("no orderly stop in the log:\n%s", p.log)
	}

	close(release)
	p2 := start(t, dir, args...)
	testkit.WaitFor(t, 60*time.Second, "every acknowledged event delivered after restart", func() bool {
		return len(rc.missing(acked)) == 0
	})

	testkit.WaitFor(t, 10*time.Second, "nothing pending", func() bool {
		_, m := call(t, "GET", p2.url("/v1/stats"), "", "")
		return m["pending"] == float64(0)
	})

	p2.signal(syscall.SIGTERM, 10*time.Second)
}

// Must show 4: SIGKILL while clients enqueue and deliveries run; after a
// restart nothing acknowledged is lost.
func TestSIGKILLUnderLoadLosesNothingAcknowledged(t *testing.T) {
	dir := t.TempDir()
	rc := newReceiver(t, func(r *http.Request, id string) int {
		// Every third attempt fails, so that retries are under way too.
		if len(id)%3 == 0 {
			return http.StatusServiceUnavailable
		}
		return http.StatusNoContent
	})
	args := []string{"--endpoint", rc.endpoint("orders"), "--interval", "50ms",
		"--backoff-initial", "50ms", "--backoff-max", "100ms"}
	p := start(t, dir, args...)

	var mu sync.Mutex
	var acked []string
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for c := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				id := fmt.Sprintf("kill-%02d-%06d", c, i)
				if i%2 == 1 {
					id += "x" // vary the length: some fail first
				}
				req, _ := http.NewRequest("POST", p.url("/v1/events"),
					strings.NewReader(fmt.Sprintf(`{"id":%q,"destination":"orders","payload":%d}`, id, i)))
				req.Header.Set("Content-Type", "application/json")
				resp, err := client.Do(req)
				if err != nil {
					return // the server is gone
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusAccepted {
					t.Errorf("POST %s: %s", id, resp.Status)
					return
				}
				mu.Lock()
				acked = append(acked, id)
				mu.Unlock()
			}
		}()
	}
	testkit.WaitFor(t, 60*time.Second, "load: 500 acknowledged", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(acked) >= 500
	})

	p.signal(syscall.SIGKILL, 5*time.Second)
	close(stop)
	wg.Wait()
	mu.Lock()
	all := append([]string(nil), acked...)
	mu.Unlock()
	t.Logf("killed with %d acknowledged, %d not yet delivered", len(all), len(rc.missing(all)))

	rc.setRespond(nil)
	p2 := start(t, dir, args...)
	testkit.WaitFor(t, 60*time.Second, "every acknowledged event delivered after restart", func() bool {
		return len(rc.missing(all)) == 0
	})

	p2.signal(syscall.SIGTERM, 10*time.Second)
}

// Must show 5: replay by filter, enabling an endpoint after a 410, and
// inspect --id showing a 404-parked event's history.
func TestReplayEnableAndInspectHistory(t *testing.T) {
	dir := t.TempDir()
	var mode sync.Map         // endpoint path -> status
	var parkAttempts sync.Map // webhook-id -> *atomic.Int64
	attemptsOf := func(r *http.Request) int64 {
		v, _ := parkAttempts.LoadOrStore(r.Header.Get("webhook-id"), new(atomic.Int64))
		return v.(*atomic.Int64).Add(1)
	}
	status := func(path string) int {
		if v, ok := mode.Load(path); ok {
			return v.(int)
		}
		return http.StatusNoContent
	}
	rc := newReceiver(t, func(r *http.Request, id string) int {
		if strings.HasPrefix(id, "park-") && r.Header.Get("webhook-id") != "" {
			// "Not yet" twice, then the resource exists.
			if n := attemptsOf(r); n <= 2 {
				return http.StatusNotFound
			}
		}
		return status(r.URL.Path)
	})
	mode.Store("/dead", http.StatusBadRequest)
	mode.Store("/gone", http.StatusGone)
	ep := func(name string) string {
		return name + "=" + rc.URL + "/" + name + ",secret=" + testSecret + ",allow-private"
	}
	p := start(t, dir, "--endpoint", ep("dead"), "--endpoint", ep("gone"), "--endpoint", ep("later"),
		"--interval", "50ms", "--park-interval", "100ms")

	// Replay by filter.
	call(t, "POST", p.url("/v1/events"), "", `[{"id":"d-a1","destination":"dead","key":"a/1"},{"id":"d-a2","destination":"dead","key":"a/2"},{"id":"d-b1","destination":"dead","key":"b/1"}]`)
	testkit.WaitFor(t, 10*time.Second, "three dead letters", func() bool {
		_, m := call(t, "GET", p.url("/v1/events?state=dead"), "", "")
		return len(m["events"].([]any)) == 3
	})

	mode.Store("/dead", http.StatusNoContent)
	code, m := call(t, "POST", p.url("/v1/dead/replay"), "", `{"destination":"dead","key_prefix":"a/","status":400,"rate":1000}`)
	if code != http.StatusAccepted || m["replayed"] != float64(2) {
		t.Fatalf("replay by filter: %d %v, want 2 replayed", code, m)
	}
	testkit.WaitFor(t, 10*time.Second, "the replayed events delivered", func() bool {
		return rc.ackedCount("d-a1") == 1 && rc.ackedCount("d-a2") == 1
	})

	if _, m := call(t, "GET", p.url("/v1/events/d-b1"), "", ""); m["state"] != "dead" {
		t.Errorf("d-b1 is %v, want still dead (not matched by the filter)", m["state"])
	}

	// Enable after a 410.
	call(t, "POST", p.url("/v1/events"), "", `{"id":"g-1","destination":"gone"}`)
	testkit.WaitFor(t, 10*time.Second, "the endpoint disabled by 410", func() bool {
		_, m := call(t, "GET", p.url("/v1/endpoints"), "", "")
		for _, e := range m["endpoints"].([]any) {
			if e := e.(map[string]any); e["name"] == "gone" && e["disabled"] == true {
				return true
			}
		}
		return false
	})

	if _, m := call(t, "GET", p.url("/v1/events/g-1"), "", ""); m["state"] != "pending" {
		t.Errorf("event of the disabled endpoint is %v, want pending", m["state"])
	}
	mode.Store("/gone", http.StatusNoContent)
	if code, m := call(t, "POST", p.url("/v1/endpoints/gone/enable"), "", ""); code != http.StatusOK {
		t.Fatalf("enable: %d %v", code, m)
	}
	enabled := time.Now()
	testkit.WaitFor(t, 20*time.Second, "delivery after enable", func() bool {
		if rc.ackedCount("g-1") == 1 {
			return true
		}
		if time.Since(enabled) > 15*time.Second {
			_, ev := call(t, "GET", p.url("/v1/events/g-1"), "", "")
			_, eps := call(t, "GET", p.url("/v1/endpoints"), "", "")
			_, st := call(t, "GET", p.url("/v1/stats"), "", "")
			t.Fatalf("g-1 not delivered 15s after enable: event %v, endpoints %v, stats %v, attempts at the receiver %d",
				ev, eps, st, rc.attemptCount("g-1"))
		}
		return false
	})

	// A 404-parked event, then inspect --id. inspect refuses while the
	// server runs.
	call(t, "POST", p.url("/v1/events"), "", `{"id":"park-1","destination":"later","payload":"x"}`)
	testkit.WaitFor(t, 10*time.Second, "delivery after two parks", func() bool { return rc.ackedCount("park-1") == 1 })
	code2, out := run(t, dir, "inspect", "--db", "outboxd.db", "--id", "park-1")
	if code2 == 0 || !strings.Contains(out, "in use") || !strings.Contains(out, "outboxd.db") {
		t.Errorf("inspect while serving: exit %d, output %q; want a polite refusal naming the file", code2, out)
	}
	p.signal(syscall.SIGTERM, 10*time.Second)
	code2, out = run(t, dir, "inspect", "--db", "outboxd.db", "--id", "park-1")
	if code2 != 0 {
		t.Fatalf("inspect --id: exit %d\n%s", code2, out)
	}
	t.Logf("inspect --id park-1:\n%s", out)
	for _, want := range []string{"event park-1: delivered", "enqueued: POST to later, 3-byte payload",
		"delivery 1 parked (not yet; no attempt spent): status 404", "delivery 2 parked", "deleted: delivered"} {
		if !strings.Contains(out, want) {
			t.Errorf("inspect --id lacks %q", want)
		}
	}
	if strings.Index(out, "enqueued") > strings.Index(out, "parked") || strings.Index(out, "parked") > strings.Index(out, "deleted") {
		t.Error("history not in order")
	}
	_, out = run(t, dir, "inspect", "--db", "outboxd.db")
	for _, want := range []string{"dead events", "d-b1", "gone", "later"} {
		if !strings.Contains(out, want) {
			t.Errorf("inspect lacks %q:\n%s", want, out)
		}
	}
	code2, out = run(t, dir, "compact", "--db", "outboxd.db")
	if code2 != 0 || !strings.Contains(out, "compacted outboxd.db") {
		t.Errorf("compact: exit %d %s", code2, out)
	}
}

// Must show 6: a second serve on the same database fails at once, naming
// the file and the lock.
func TestSecondServeOnSameDatabaseFailsAtOnce(t *testing.T) {
	dir := t.TempDir()
	p := start(t, dir)
	began := time.Now()
	code, out := run(t, dir, "serve", "--listen", "127.0.0.1:0")
	took := time.Since(began)
	if code == 0 || !strings.Contains(out, "outboxd.db") || !strings.Contains(out, "locked") {
		t.Errorf("second serve: exit %d, output %q; want a failure naming the file and the lock", code, out)
	}
	if took > 5*time.Second {
		t.Errorf("second serve took %s to give up", took)
	}
	t.Logf("second serve gave up after %s: %s", took.Round(time.Millisecond), strings.TrimSpace(out))
	if c, _ := call(t, "GET", p.url("/readyz"), "", ""); c != http.StatusOK {
		t.Errorf("the first server is not ready any more: %d", c)
	}
	p.signal(syscall.SIGTERM, 10*time.Second)
}

func TestExampleConfigIsAcceptedAsIs(t *testing.T) {
	dir := t.TempDir()
	example, err := filepath.Abs("outboxd.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p := start(t, dir, "--config", example)
	if c, _ := call(t, "GET", p.url("/readyz"), "", ""); c != http.StatusOK {
		t.Errorf("readyz: %d", c)
	}
	code, m := call(t, "POST", p.url("/v1/events"), "", `{"destination":"billing"}`)
	if code != http.StatusAccepted {
		t.Errorf("the example's endpoint billing: %d %v", code, m)
	}
	p.signal(syscall.SIGTERM, 10*time.Second)
}

func TestBadSettingsStopServeNamingTheSetting(t *testing.T) {
	dir := t.TempDir()
	// 0s would be the default interval, as in outbox.Config; a negative
	// one means nothing.
	code, out := run(t, dir, "serve", "--interval", "-1s")
	if code != 2 || !strings.Contains(out, "delivery.interval (--interval, OUTBOXD_INTERVAL): must not be negative") {
		t.Errorf("exit %d, %q", code, out)
	}
	cmdOut := func(env ...string) (int, string) {
		t.Helper()
		return runEnv(t, dir, env, "serve")
	}
	code, out = cmdOut("OUTBOXD_MAX_ATTEMPTS=-3")
	if code != 2 || !strings.Contains(out, "delivery.max_attempts") {
		t.Errorf("env: exit %d, %q", code, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "outboxd.db")); err == nil {
		t.Error("a refused configuration created the database")
	}
}

func runEnv(t *testing.T, dir string, env []string, args ...string) (int, string) {
	t.Helper()
	t.Setenv("OUTBOXD_PLACEHOLDER", "") // marks the test as not parallel
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	return run(t, dir, args...)
}

func TestVersionAndUsage(t *testing.T) {
	code, out := run(t, t.TempDir(), "version")
	if code != 0 || !strings.HasPrefix(out, "outboxd ") || !strings.Contains(out, "go1.") {
		t.Errorf("version: %d %q", code, out)
	}
	code, out = run(t, t.TempDir(), "frobnicate")
	if code != 2 || !strings.Contains(out, `unknown command "frobnicate"`) {
		t.Errorf("unknown command: %d %q", code, out)
	}
	code, out = run(t, t.TempDir(), "inspect", "--db", "missing.db")
	if code != 1 || !strings.Contains(out, "no database at missing.db") {
		t.Errorf("inspect of a missing file: %d %q", code, out)
	}
}

// A second signal during a graceful shutdown ends the process at once; what
// was acknowledged is still delivered after a restart.
func TestSecondSignalExitsAtOnce(t *testing.T) {
	dir := t.TempDir()
	release := make(chan struct{})
	var inFlight atomic.Int64
	rc := newReceiver(t, holdUntil(release, &inFlight))
	args := []string{"--endpoint", rc.endpoint("slow"), "--initial-per-endpoint", "10", "--shutdown-grace", "1m", "--interval", "50ms"}
	p := start(t, dir, args...)
	acked := enqueueBatches(t, p, "twice", "slow", 10, 10)
	testkit.WaitFor(t, 10*time.Second, "deliveries in flight", func() bool { return inFlight.Load() >= 10 })
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 10*time.Second, "the graceful shutdown to begin", func() bool {
		return strings.Contains(p.log.String(), `"msg":"shutting down"`)
	})

	took := p.signal(syscall.SIGINT, 5*time.Second)
	if code := p.exitCode(); code == 0 || !strings.Contains(p.log.String(), "second signal") {
		t.Errorf("second signal: exit code %d after %s, log:\n%s", code, took, p.log)
	}
	t.Logf("second signal: exited in %s (grace 1m)", took.Round(time.Millisecond))
	close(release)
	p2 := start(t, dir, args...)
	testkit.WaitFor(t, 30*time.Second, "every acknowledged event delivered after restart", func() bool {
		return len(rc.missing(acked)) == 0
	})

	p2.signal(syscall.SIGTERM, 10*time.Second)
}
