package main

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/outboxd/outbox/examples/internal/console"
	"github.com/outboxd/outbox/httpsink"
	"github.com/outboxd/outbox/outbox"
)

// demoTargets are the internal services of the demo, on one local server
// (one path per target), each with a behaviour worth watching:
//
//	ci       answers 200
//	billing  answers 500 to the first attempt of each event (retried)
//	crm      answers 404 three times per event ("customer not created yet": parked)
//	audit    answers 422 to disputes (dead letter) until it is fixed; 200 otherwise
//
// Every target checks the relay's own Standard Webhooks signature on what it
// receives, with its secret.
type demoTargets struct {
	out  *console.Console
	ln   net.Listener
	srv  *http.Server
	done chan struct{}

	keys      map[string][]byte             // target -> signing key of the relay's deliveries
	verifiers map[string]*httpsink.Verifier // target -> its check of the relay's signature
	sources   map[string]string             // source -> secret as configured
	acmeKey   []byte                        // the key of the acme source's whsec_ secret

	mu        sync.Mutex
	attempts  map[string]int            // target/event ID -> attempts seen
	fixed     bool                      // audit accepts disputes too
	delivered map[string]map[string]int // target -> event ID -> 2xx answers
}

var demoBehaviour = map[string]string{
	"ci":      "answers 200",
	"billing": "fails the first attempt of each event with 500",
	"crm":     "answers 404 three times per event (not created yet)",
	"audit":   "refuses disputes with 422 (until fixed), answers 200 otherwise",
}

// demoTopics are what each demo target subscribes to: every webhook goes
// to audit and to the one service its topic concerns.
var demoTopics = map[string][]string{
	"ci":      {"github.push"},
	"billing": {"stripe.*"},
	"crm":     {"acme.customer.*"},
	"audit":   {"*"},
}

func startDemoTargets(out *console.Console) (*demoTargets, error) {
	d := &demoTargets{
		out:       out,
		done:      make(chan struct{}),
		keys:      map[string][]byte{},
		verifiers: map[string]*httpsink.Verifier{},
		attempts:  map[string]int{},
		delivered: map[string]map[string]int{},
	}
	for name := range demoBehaviour {
		d.keys[name] = randomBytes(24)
		v, err := httpsink.NewVerifier([]string{"whsec_" + base64.StdEncoding.EncodeToString(d.keys[name])}, DefaultTolerance)
		if err != nil {
			return nil, err
		}
		d.verifiers[name] = v
		d.delivered[name] = map[string]int{}
	}
	d.acmeKey = randomBytes(24)
	d.sources = map[string]string{
		"github": "gh-" + hex.EncodeToString(randomBytes(16)),
		"stripe": "whsec_" + hex.EncodeToString(randomBytes(16)),
		"acme":   "whsec_" + base64.StdEncoding.EncodeToString(d.acmeKey),
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	d.ln = ln
	mux := http.NewServeMux()
	mux.HandleFunc("POST /{target}", d.serve)
	d.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		defer close(d.done)
		_ = d.srv.Serve(ln)
	}()
	for _, name := range slices.Sorted(maps.Keys(demoBehaviour)) {
		out.Printf("demo target %-8s at http://%s/%s %s", name, ln.Addr(), name, demoBehaviour[name])
	}
	return d, nil
}

func (d *demoTargets) close() {
	_ = d.srv.Close()
	<-d.done
}

// config is the relay configuration of the demo: three providers, four
// targets subscribed by topic (demoTopics).
func (d *demoTargets) config() *Config {
	c := &Config{Listen: "127.0.0.1:0", Admin: &Admin{Listen: "127.0.0.1:0"}, Targets: map[string]*Target{}, Sources: map[string]*Source{
		"github": {Scheme: SchemeGitHub, Secrets: []string{d.sources["github"]}},
		"stripe": {Scheme: SchemeStripe, Secrets: []string{d.sources["stripe"]}},
		"acme":   {Scheme: SchemeStandardWebhooks, Secrets: []string{d.sources["acme"]}},
	}}
	for name, key := range d.keys {
		c.Targets[name] = &Target{
			URL:          fmt.Sprintf("http://%s/%s", d.ln.Addr(), name),
			Topics:       demoTopics[name],
			Secrets:      []string{"whsec_" + base64.StdEncoding.EncodeToString(key)},
			AllowPrivate: true, // the demo targets are on loopback
		}
	}
	if err := c.prepare(func(string) string { return "" }); err != nil {
		panic("demo configuration: " + err.Error()) // a bug in this file
	}
	return c
}

// serve is the handler of every demo target.
func (d *demoTargets) serve(w http.ResponseWriter, r *http.Request) {
	target := r.PathValue("target")
	v, ok := d.verifiers[target]
	if !ok {
		http.NotFound(w, r)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	if err := v.Verify(r.Header, body, time.Now()); err != nil {
		d.out.Printf("  %s: the relay's signature does not verify: %v", target, err)
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	id := r.Header.Get("webhook-id")

	d.mu.Lock()
	defer d.mu.Unlock()
	d.attempts[target+"/"+id]++
	n := d.attempts[target+"/"+id]
	status := http.StatusOK
	switch {
	case target == "billing" && n == 1:
		status = http.StatusInternalServerError
	case target == "crm" && n <= 3:
		status = http.StatusNotFound
	case target == "audit" && !d.fixed && bytes.Contains(body, []byte(`"charge.dispute.created"`)):
		status = http.StatusUnprocessableEntity
	}
	if status == http.StatusOK {
		d.delivered[target][id]++
	}
	w.WriteHeader(status)
}

// run sends the demo traffic to the relay at base, waits until every stored
// event was delivered or dead-lettered and prints a summary; then it replays
// the dead letter through the admin API at adminBase and prints the outcome.
func (d *demoTargets) run(ctx context.Context, base, adminBase string, box *outbox.Outbox) error {
	if err := d.sendWebhooks(ctx, base); err != nil {
		return err
	}
	if err := d.out.WaitIdle(ctx, box, 2*time.Minute, nil); err != nil {
		return err
	}
	dead, err := d.summary(ctx, box)
	if err != nil || len(dead) == 0 {
		return err
	}
	if err := d.replayDeadLetters(ctx, adminBase, dead); err != nil {
		return err
	}
	if err := d.out.WaitIdle(ctx, box, 2*time.Minute, nil); err != nil {
		return err
	}
	_, err = d.summary(ctx, box)
	return err
}

// demoWebhook is one request of the demo's providers, and the relay's
// answer it expects.
type demoWebhook struct {
	what   string
	req    func() (*http.Request, error)
	status int
}

// webhooks are the demo's requests to the relay at base, in order: genuine
// ones, a forged one, a stale one and redeliveries.
func (d *demoTargets) webhooks(base string) []demoWebhook {
	gh := newID()
	return []demoWebhook{
		{"github sends a push event", func() (*http.Request, error) {
			return d.github(base, gh, "push", `{"ref":"refs/heads/main","after":"9fceb02"}`, false)
		}, http.StatusAccepted},
		{"stripe sends invoice.paid", func() (*http.Request, error) {
			return d.stripe(base, `{"id":"evt_1001","object":"event","type":"invoice.paid","data":{"object":{"id":"in_77","amount_paid":4200}}}`, time.Now())
		}, http.StatusAccepted},
		{"acme (Standard Webhooks) sends customer.created", func() (*http.Request, error) {
			return d.acme(base, "msg_2001", `{"type":"customer.created","data":{"customer":"cus_9"}}`, time.Now())
		}, http.StatusAccepted},
		{"someone forges a github delivery (body changed after signing)", func() (*http.Request, error) {
			return d.github(base, newID(), "push", `{"ref":"refs/heads/main","after":"deadbeef"}`, true)
		}, http.StatusUnauthorized},
		{"someone replays a stripe event signed 10 minutes ago", func() (*http.Request, error) {
			return d.stripe(base, `{"id":"evt_1002","object":"event","type":"invoice.paid","data":{}}`, time.Now().Add(-10*time.Minute))
		}, http.StatusUnauthorized},
		{"github redelivers the push event (same delivery ID)", func() (*http.Request, error) {
			return d.github(base, gh, "push", `{"ref":"refs/heads/main","after":"9fceb02"}`, false)
		}, http.StatusOK},
		{"stripe sends charge.dispute.created", func() (*http.Request, error) {
			return d.stripe(base, `{"id":"evt_1003","object":"event","type":"charge.dispute.created","data":{"object":{"id":"dp_5"}}}`, time.Now())
		}, http.StatusAccepted},
		{"acme retries customer.created (same webhook-id, signed again)", func() (*http.Request, error) {
			return d.acme(base, "msg_2001", `{"type":"customer.created","data":{"customer":"cus_9"}}`, time.Now())
		}, http.StatusOK},
	}
}

// sendWebhooks sends the demo's webhooks to the relay at base, one after
// the other, and checks each answer.
func (d *demoTargets) sendWebhooks(ctx context.Context, base string) error {
	for _, s := range d.webhooks(base) {
		d.out.Printf("▶ %s", s.what)
		req, err := s.req()
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req.WithContext(ctx))
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != s.status {
			return fmt.Errorf("%s: relay answered %d, want %d", s.what, resp.StatusCode, s.status)
		}
	}
	return nil
}

// replayDeadLetters fixes the dead letters' target and replays them
// through the admin API at adminBase.
func (d *demoTargets) replayDeadLetters(ctx context.Context, adminBase string, dead []outbox.Event) error {
	d.mu.Lock()
	d.fixed = true
	d.mu.Unlock()
	for _, ev := range dead {
		d.out.Printf("▶ audit ships a fix; an operator replays the dead letter: POST %s/v1/events/%s/replay", adminBase, ev.ID)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, adminBase+"/v1/events/"+url.PathEscape(ev.ID)+"/replay", nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			return fmt.Errorf("replay %s: admin API answered %d", ev.ID, resp.StatusCode)
		}
	}
	return nil
}

// summary prints what each target got and the dead letters, and returns them.
func (d *demoTargets) summary(ctx context.Context, box *outbox.Outbox) ([]outbox.Event, error) {
	d.mu.Lock()
	var lines []string
	for _, t := range slices.Sorted(maps.Keys(d.delivered)) {
		n := 0
		for _, c := range d.delivered[t] {
			n += c
		}
		lines = append(lines, fmt.Sprintf("%s %d", t, n))
	}
	d.mu.Unlock()
	d.out.Printf("summary: delivered per target: %s", strings.Join(lines, ", "))
	dead, _, err := box.List(ctx, outbox.ListOptions{State: outbox.StateDead})
	if err != nil {
		return nil, err
	}
	for _, ev := range dead {
		d.out.Printf("summary: dead letter %s to %s: %s", ev.ID, ev.Endpoint, ev.DeadReason)
	}
	if len(dead) == 0 {
		d.out.Printf("summary: no dead letters")
	}
	return dead, nil
}

// The demo's providers. They sign the way the providers document it.

func (d *demoTargets) github(base, delivery, event, body string, forge bool) (*http.Request, error) {
	m := hmac.New(sha256.New, []byte(d.sources["github"]))
	m.Write([]byte(body))
	sig := "sha256=" + hex.EncodeToString(m.Sum(nil))
	if forge {
		body = strings.Replace(body, "}", `,"forced":true}`, 1)
	}
	req, err := http.NewRequest(http.MethodPost, base+"/hooks/github", strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", event)
	req.Header.Set("X-GitHub-Delivery", delivery)
	req.Header.Set("X-Hub-Signature-256", sig)
	return req, nil
}

func (d *demoTargets) stripe(base, body string, at time.Time) (*http.Request, error) {
	ts := strconv.FormatInt(at.Unix(), 10)
	m := hmac.New(sha256.New, []byte(d.sources["stripe"]))
	m.Write([]byte(ts + "." + body))
	req, err := http.NewRequest(http.MethodPost, base+"/hooks/stripe", strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json; charset=utf-8")
	req.Header.Set("Stripe-Signature", "t="+ts+",v1="+hex.EncodeToString(m.Sum(nil)))
	return req, nil
}

func (d *demoTargets) acme(base, id, body string, at time.Time) (*http.Request, error) {
	ts := strconv.FormatInt(at.Unix(), 10)
	m := hmac.New(sha256.New, d.acmeKey)
	m.Write([]byte(id + "." + ts + "." + body))
	req, err := http.NewRequest(http.MethodPost, base+"/hooks/acme", strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("webhook-id", id)
	req.Header.Set("webhook-timestamp", ts)
	req.Header.Set("webhook-signature", "v1,"+base64.StdEncoding.EncodeToString(m.Sum(nil)))
	return req, nil
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b) // never fails: crypto/rand crashes the program instead
	return b
}

// newID returns a GUID-like delivery ID, as GitHub's X-GitHub-Delivery.
func newID() string {
	b := randomBytes(16)
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
