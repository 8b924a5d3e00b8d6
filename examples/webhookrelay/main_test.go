package main

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/outboxd/outbox/examples/internal/runexample"
	"github.com/outboxd/outbox/internal/testkit"
	"github.com/outboxd/outbox/outbox"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.Cleanup(func(int) { testkit.RemoveBinaries() }))
}

// The providers, signed the way their documentation says, written here
// independently of the relay's verifiers.

// signStandard: https://www.standardwebhooks.com, "v1," + base64 of
// HMAC-SHA256(key, msg_id + "." + timestamp + "." + body), key = base64 part
// of whsec_.
func signStandard(secret, id string, ts int64, body string) http.Header {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		panic(err)
	}
	m := hmac.New(sha256.New, key)
	fmt.Fprintf(m, "%s.%d.%s", id, ts, body)
	h := http.Header{}
	h.Set("webhook-id", id)
	h.Set("webhook-timestamp", strconv.FormatInt(ts, 10))
	// Two signatures, as while a secret is rotated: only one has to match.
	h.Set("webhook-signature", "v1,c29tZXRoaW5nIGVsc2U= v1,"+base64.StdEncoding.EncodeToString(m.Sum(nil)))
	return h
}

// signGitHub: X-Hub-Signature-256 = "sha256=" + hex HMAC-SHA256(secret, body).
func signGitHub(secret, delivery, body string) http.Header {
	m := hmac.New(sha256.New, []byte(secret))
	io.WriteString(m, body)
	h := http.Header{}
	h.Set("X-GitHub-Delivery", delivery)
	h.Set("X-GitHub-Event", "issues")
	h.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(m.Sum(nil)))
	return h
}

// signStripe: Stripe-Signature = "t=<ts>,v1=<hex HMAC-SHA256(secret, ts.body)>",
// the whole whsec_ string being the key.
func signStripe(secret string, ts int64, body string) http.Header {
	m := hmac.New(sha256.New, []byte(secret))
	fmt.Fprintf(m, "%d.%s", ts, body)
	h := http.Header{}
	h.Set("Stripe-Signature", fmt.Sprintf("t=%d,v1=%s,v0=6ffbb59b2300aae63f272406069a9788598b792a944a07aba816edb039989a39", ts, hex.EncodeToString(m.Sum(nil))))
	return h
}

// target is an internal service receiving the relay's deliveries.
type target struct {
	name    string
	key     []byte // the relay signs its deliveries to us with this
	notYet  int    // answer 404 this many times per event first
	mu      sync.Mutex
	tries   map[string]int
	got     map[string]int // event ID -> 2xx answers
	payload map[string]string
	bad     []string
}

func newTarget(name string, notYet int) *target {
	return &target{name: name, key: []byte(name + "-relay-signing-key-32bytes"), notYet: notYet,
		tries: map[string]int{}, got: map[string]int{}, payload: map[string]string{}}
}

func (tg *target) secret() string { return "whsec_" + base64.StdEncoding.EncodeToString(tg.key) }

func (tg *target) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	id, ts := r.Header.Get("webhook-id"), r.Header.Get("webhook-timestamp")
	m := hmac.New(sha256.New, tg.key)
	fmt.Fprintf(m, "%s.%s.%s", id, ts, body)
	want := "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
	tg.mu.Lock()
	defer tg.mu.Unlock()
	if r.Header.Get("webhook-signature") != want {
		tg.bad = append(tg.bad, id)
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	tg.tries[id]++
	if tg.tries[id] <= tg.notYet {
		w.WriteHeader(http.StatusNotFound)
		return
	}
	tg.got[id]++
	tg.payload[id] = string(body)
	w.WriteHeader(http.StatusNoContent)
}

func (tg *target) snapshot() (got map[string]int, tries map[string]int, bad []string) {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	got, tries = map[string]int{}, map[string]int{}
	for k, v := range tg.got {
		got[k] = v
	}
	for k, v := range tg.tries {
		tries[k] = v
	}
	return got, tries, append([]string(nil), tg.bad...)
}

func TestRelayAsAUserRunsIt(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := testkit.BuildBinary(t, ".")
	dir := t.TempDir()

	fast, slow := newTarget("fast", 0), newTarget("slow", 3)
	srvFast, srvSlow := httptest.NewServer(fast), httptest.NewServer(slow)
	defer srvFast.Close()
	defer srvSlow.Close()

	const (
		ghSecret  = "It's a Secret to Everybody"
		stSecret  = "whsec_test_4eC39HqLyjWDarjtT1zdp7dc"
		swSecret  = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
		swSecret2 = "whsec_dGhlIG5ldyBrZXkgYWZ0ZXIgcm90YXRpb24="
	)
	db := filepath.Join(dir, "relay.db")
	cfg := fmt.Sprintf(`
listen: 127.0.0.1:0
db: %s
targets:
  fast: {url: %q, secrets: [%q], allow_private: true, topics: ["*"]}
  slow: {url: %q, secrets: [%q], allow_private: true, timeout: 5s, topics: ["gh.*", "st.invoice.*", "sw.*"]}
admin: {listen: "127.0.0.1:0", token_env: TEST_ADMIN_TOKEN}
sources:
  gh:
    scheme: github
    secret_env: TEST_GH_SECRET
  st:
    scheme: stripe
    secrets: [%q]
    tolerance: 5m
  sw:
    scheme: standard-webhooks
    secrets: [%q, %q]
`, db, srvFast.URL+"/in", fast.secret(), srvSlow.URL+"/in", slow.secret(), stSecret, swSecret2, swSecret)
	cfgPath := filepath.Join(dir, "relay.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}

	p := runexample.Start(t, bin, []string{"TEST_GH_SECRET=" + ghSecret, "TEST_ADMIN_TOKEN=s3cret-admin"},
		"--config", cfgPath, "--interval", "50ms", "--park-interval", "100ms", "--backoff", "50ms")
	var base, admin string
	testkit.WaitFor(t, 20*time.Second, "the listening lines", func() bool {
		out := p.Output()
		i, j := strings.Index(out, "listening on "), strings.Index(out, "admin API on ")
		if i < 0 || j < 0 {
			return false
		}
		base = strings.TrimSuffix(strings.Fields(out[i+len("listening on "):])[0], "/hooks/{source}")
		admin = strings.TrimSuffix(strings.Fields(out[j+len("admin API on "):])[0], "/v1/")
		return true
	})

	adminGet := func(path, token string) int {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, admin+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}

	post := func(source, body string, h http.Header) (int, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, base+"/hooks/"+source, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header = h
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	expect := func(what string, want, got int, body string) {
		t.Helper()
		if got != want {
			t.Fatalf("%s: status %d (%s), want %d", what, got, strings.TrimSpace(body), want)
		}
	}
	now := time.Now().Unix()

	// Genuine deliveries of each scheme are verified and stored: 2xx.
	ghBody := `{"action":"opened","issue":{"number":1347}}`
	code, body := post("gh", ghBody, signGitHub(ghSecret, "72d3162e-cc78-11e3-81ab-4c9367dc0958", ghBody))
	expect("github", http.StatusAccepted, code, body)
	stBody := `{"id":"evt_1NG8Du2eZvKYlo2CUI79vXWy","object":"event","type":"invoice.paid"}`
	code, body = post("st", stBody, signStripe(stSecret, now, stBody))
	expect("stripe", http.StatusAccepted, code, body)
	swBody := `{"type":"contact.created","data":{"id":"c_1"}}`
	code, body = post("sw", swBody, signStandard(swSecret, "msg_2KWPBgLlAfxdpx2AI54pPJ85f4W", now, swBody))
	expect("standard webhooks", http.StatusAccepted, code, body)

	// Forgeries get 401 and are not stored.
	forged := []struct {
		what, source, body string
		h                  http.Header
	}{
		{"github, wrong secret", "gh", `{"n":1}`, signGitHub("not the secret", "forged-gh-1", `{"n":1}`)},
		{"github, body changed", "gh", `{"n":2}`, signGitHub(ghSecret, "forged-gh-2", `{"n":1}`)},
		{"github, no signature", "gh", `{"n":3}`, http.Header{"X-Github-Delivery": {"forged-gh-3"}}},
		{"stripe, wrong secret", "st", `{"id":"evt_forged_1"}`, signStripe("whsec_other", now, `{"id":"evt_forged_1"}`)},
		{"stripe, signed 6 minutes ago", "st", `{"id":"evt_forged_2"}`, signStripe(stSecret, now-360, `{"id":"evt_forged_2"}`)},
		{"standard webhooks, wrong secret", "sw", `{}`, signStandard("whsec_b3RoZXIgc2VjcmV0IGtleSBoZXJl", "msg_forged_1", now, `{}`)},
		{"standard webhooks, signed 6 minutes ahead", "sw", `{}`, signStandard(swSecret, "msg_forged_2", now+360, `{}`)},
	}
	for _, f := range forged {
		code, body := post(f.source, f.body, f.h)
		expect(f.what, http.StatusUnauthorized, code, body)
	}
	// A signature for one ID does not authenticate another (the ID is signed).
	h := signStandard(swSecret, "msg_2KWPBgLlAfxdpx2AI54pPJ85f4W", now, swBody)
	h.Set("webhook-id", "msg_forged_3")
	code, body = post("sw", swBody, h)
	expect("standard webhooks, ID swapped", http.StatusUnauthorized, code, body)

	// A provider redelivering the same delivery ID (GitHub's "redeliver",
	// Stripe's retry, a Standard Webhooks retry signed again) is a duplicate.
	code, body = post("gh", ghBody, signGitHub(ghSecret, "72d3162e-cc78-11e3-81ab-4c9367dc0958", ghBody))
	expect("github redelivery", http.StatusOK, code, body)
	if !strings.Contains(body, "duplicate") {
		t.Fatalf("github redelivery answered %s, want it called a duplicate", body)
	}
	code, body = post("sw", swBody, signStandard(swSecret, "msg_2KWPBgLlAfxdpx2AI54pPJ85f4W", now+1, swBody))
	expect("standard webhooks retry", http.StatusOK, code, body)

	// Every target gets every event of its topics exactly once, under the
	// event's ID, the slow one after three 404s per event.
	ids := []string{
		"gh:72d3162e-cc78-11e3-81ab-4c9367dc0958",
		"st:evt_1NG8Du2eZvKYlo2CUI79vXWy",
		"sw:msg_2KWPBgLlAfxdpx2AI54pPJ85f4W",
	}
	testkit.WaitFor(t, 30*time.Second, "every target to get every event", func() bool {
		for _, tg := range []*target{fast, slow} {
			got, _, _ := tg.snapshot()
			for _, id := range ids {
				if got[id] == 0 {
					return false
				}
			}
		}
		return true
	})

	// The admin API wants its token, and knows nothing of the forgeries.
	if code := adminGet("/v1/stats", ""); code != http.StatusUnauthorized {
		t.Errorf("admin API without the token: %d, want 401", code)
	}
	if code := adminGet("/v1/events/gh:forged-gh-1", "s3cret-admin"); code != http.StatusNotFound {
		t.Errorf("admin API on a forged event: %d, want 404", code)
	}
	if code := adminGet("/v1/events/gh:72d3162e-cc78-11e3-81ab-4c9367dc0958", "s3cret-admin"); code != http.StatusOK {
		t.Errorf("admin API on a delivered event: %d, want 200", code)
	}

	// Stripe retries the event after it was delivered: still a duplicate.
	code, body = post("st", stBody, signStripe(stSecret, now+2, stBody))
	expect("stripe retry after delivery", http.StatusOK, code, body)

	p.Interrupt(t)
	if !strings.Contains(p.Output(), "stopped cleanly") {
		t.Fatalf("no clean stop in the output:\n%s", p.Output())
	}

	for _, tg := range []*target{fast, slow} {
		got, tries, bad := tg.snapshot()
		if len(bad) > 0 {
			t.Errorf("%s: deliveries with a bad relay signature: %v", tg.name, bad)
		}
		if len(got) != len(ids) {
			t.Errorf("%s got %v, want exactly the %d genuine events", tg.name, got, len(ids))
		}
		for _, id := range ids {
			if got[id] != 1 {
				t.Errorf("%s got %s %d times, want once", tg.name, id, got[id])
			}
			if tries[id] != tg.notYet+1 {
				t.Errorf("%s was asked %d times for %s, want %d", tg.name, tries[id], id, tg.notYet+1)
			}
		}
	}
	if got := slow.payload["st:evt_1NG8Du2eZvKYlo2CUI79vXWy"]; got != stBody {
		t.Errorf("slow got payload %q, want the provider's body verbatim", got)
	}

	// The outbox, inspected offline: the forgeries were never stored, the
	// genuine events are delivered, nothing is left pending.
	o, err := outbox.Open(db, outbox.Config{Sink: refuseSink{}, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Stop(context.Background())
	ctx := context.Background()
	for _, f := range []string{"gh:forged-gh-1", "gh:forged-gh-2", "gh:forged-gh-3", "st:evt_forged_1", "st:evt_forged_2",
		"sw:msg_forged_1", "sw:msg_forged_2", "sw:msg_forged_3"} {
		if ev, err := o.Get(ctx, f); !errors.Is(err, outbox.ErrNotFound) {
			t.Errorf("forged %s is in the store (state %v, err %v)", f, ev.State, err)
		}
	}
	for _, id := range ids {
		ev, err := o.Get(ctx, id)
		if err != nil || ev.State != outbox.StateDelivered || len(ev.DeliveryStates) != 2 {
			t.Errorf("%s: state %v, deliveries %+v, err %v; want delivered to both targets", id, ev.State, ev.DeliveryStates, err)
		}
	}
	if st := o.Stats(); st.Pending != 0 || st.Dead != 0 {
		t.Errorf("outbox stats %+v: want nothing pending or dead", st)
	}
}

// refuseSink is the Sink of an outbox opened for inspection, which delivers
// nothing.
type refuseSink struct{}

func (refuseSink) Deliver(context.Context, *outbox.Delivery) outbox.Result {
	return outbox.Result{Action: outbox.ActionRetry, Err: errors.New("inspection only")}
}

func TestDemoRunsToTheEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	runexample.Demo(t, []string{"--demo", "--demo-exit", "--db", filepath.Join(t.TempDir(), "demo.db")},
		"401 Unauthorized", "is a redelivery", "parked", "will retry", "dead letter",
		"stored as stripe.invoice.paid for [audit billing]",
		"delivered per target: audit 3, billing 2, ci 1, crm 1", "dead letter stripe:evt_1003 to audit: status 422",
		"replays the dead letter", "delivered per target: audit 4, billing 2, ci 1, crm 1", "no dead letters", "stopped cleanly",
	)
}
