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
	"testing"
	"time"

	"github.com/outboxd/outbox/httpsink"
	"github.com/outboxd/outbox/internal/testkit"
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
type fakeClock struct{ *testkit.Clock }

func newFakeClock(t time.Time) fakeClock { return fakeClock{testkit.NewClock(t)} }

func (c fakeClock) NewTimer(d time.Duration) outbox.Timer { return c.Clock.NewTimer(d) }

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

// startWithHTTPSink opens and starts an outbox delivering through an
// httpsink with endpoints eps (closed at the test's end); edit (nil: none)
// may change the configuration first.
func startWithHTTPSink(t *testing.T, eps []httpsink.Endpoint, edit func(*outbox.Config)) *outbox.Outbox {
	t.Helper()
	sink, err := httpsink.New(httpsink.Config{Endpoints: eps})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sink.Close() })
	cfg := testConfig(sink)
	if edit != nil {
		edit(&cfg)
	}
	o, _ := open(t, cfg)
	if err := o.Start(); err != nil {
		t.Fatal(err)
	}
	return o
}
