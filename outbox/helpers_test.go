package outbox_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outboxd/outbox/outbox"
)

// sinkFunc adapts a function to outbox.Sink.
type sinkFunc func(ctx context.Context, d *outbox.Delivery) outbox.Result

func (f sinkFunc) Deliver(ctx context.Context, d *outbox.Delivery) outbox.Result { return f(ctx, d) }

// webSink is a minimal HTTP sink for the tests: it sends the payload to the
// destination URL with the event ID as Idempotency-Key and maps the answer
// with the default policy table. Its endpoint is the URL's host and first
// path segment, so one test server can play several endpoints.
type webSink struct {
	client *http.Client
}

func newWebSink() *webSink {
	return &webSink{client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 128}}}
}

func (s *webSink) close() { s.client.CloseIdleConnections() }

func (s *webSink) ResolveEndpoint(dest string) (string, error) {
	u, err := url.Parse(dest)
	if err != nil || !u.IsAbs() || u.Host == "" {
		return "", fmt.Errorf("not an absolute URL: %q", dest)
	}
	seg := strings.SplitN(strings.TrimPrefix(u.Path, "/"), "/", 2)[0]
	return u.Host + "/" + seg, nil
}

func (s *webSink) Deliver(ctx context.Context, d *outbox.Delivery) outbox.Result {
	req, err := http.NewRequestWithContext(ctx, d.Method, d.Destination, bytes.NewReader(d.Payload))
	if err != nil {
		return outbox.Result{Action: outbox.ActionDead, Err: err}
	}
	for k, v := range d.Headers {
		req.Header.Set(k, v)
	}
	req.Header.Set("Idempotency-Key", d.ID)
	resp, err := s.client.Do(req)
	if err != nil {
		return outbox.Result{Action: outbox.ActionRetry, Err: err}
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 256))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	res := outbox.Result{Status: resp.StatusCode, Body: string(body)}
	if v := resp.Header.Get("Retry-After"); v != "" {
		if ra, err := strconv.Atoi(v); err == nil && ra > 0 {
			res.RetryAfter = time.Duration(ra) * time.Second
		}
	}
	switch c := resp.StatusCode; {
	case c >= 200 && c < 300:
		res.Action = outbox.ActionSuccess
	case c == 404:
		res.Action = outbox.ActionPark
	case c == 429 || c == 502 || c == 504:
		res.Action = outbox.ActionThrottle
	case c == 410:
		res.Action = outbox.ActionDisable
	case c == 408 || c == 425 || c >= 500:
		res.Action = outbox.ActionRetry
	default:
		res.Action = outbox.ActionDead
	}
	return res
}

// testConfig is a fast configuration for tests that do not test durability.
func testConfig(sink outbox.Sink) outbox.Config {
	cfg := outbox.Config{
		Sink:           sink,
		Interval:       20 * time.Millisecond,
		BackoffInitial: time.Millisecond,
		BackoffMax:     10 * time.Millisecond,
		ParkInterval:   5 * time.Millisecond,
	}
	cfg.NoSync = true
	return cfg
}

// open opens an outbox in a temporary directory and stops it at the end of
// the test.
func open(t testing.TB, cfg outbox.Config) (*outbox.Outbox, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "outbox.db")
	o, err := outbox.Open(path, cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { stop(t, o) })
	return o, path
}

func stop(t testing.TB, o *outbox.Outbox) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := o.Stop(ctx); err != nil {
		t.Errorf("Stop: %v", err)
	}
}

// fakeClock is an outbox.Clock whose time moves only by Advance.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
}

func newFakeClock(t time.Time) *fakeClock { return &fakeClock{now: t} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) NewTimer(d time.Duration) outbox.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	ft := &fakeTimer{c: c, ch: make(chan time.Time, 1), at: c.now.Add(d), active: true}
	c.timers = append(c.timers, ft)
	c.fireLocked()
	return ft
}

// Advance moves the clock forward and fires the timers that became due.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	c.fireLocked()
}

func (c *fakeClock) fireLocked() {
	for _, ft := range c.timers {
		if ft.active && !ft.at.After(c.now) {
			ft.active = false
			select {
			case ft.ch <- c.now:
			default:
			}
		}
	}
}

type fakeTimer struct {
	c      *fakeClock
	ch     chan time.Time
	at     time.Time
	active bool
}

func (t *fakeTimer) C() <-chan time.Time { return t.ch }

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := t.active
	t.active = false
	return was
}

func (t *fakeTimer) Reset(d time.Duration) bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := t.active
	t.at = t.c.now.Add(d)
	t.active = true
	t.c.fireLocked()
	return was
}

var errTest = errors.New("test error")

// settle bounds the waits for background work: generous, because CI runs
// the whole repository under -race on two busy cores. Passing tests never
// wait for it.
const settle = 2 * time.Minute

// openStarted opens an outbox delivering through a webSink (see testConfig)
// and starts it; both are stopped at the end of the test.
func openStarted(t testing.TB) *outbox.Outbox {
	t.Helper()
	sink := newWebSink()
	t.Cleanup(sink.close)
	o, _ := open(t, testConfig(sink))
	if err := o.Start(); err != nil {
		t.Fatal(err)
	}
	return o
}
