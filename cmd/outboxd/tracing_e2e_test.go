package main

import (
	"bytes"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/outboxd/outbox/internal/testkit"
)

// With OTEL_EXPORTER_OTLP_ENDPOINT set, serve exports its spans over OTLP
// (http/protobuf) to that collector, flushing the last ones on exit; the
// receiver sees a traceparent in the trace of the request that posted the
// event. Without the variables nothing is exported (every other e2e test).
func TestTracesExportedOverOTLP(t *testing.T) {
	var mu sync.Mutex
	var exports [][]byte
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.URL.Path == "/v1/traces" && r.Header.Get("Content-Type") == "application/x-protobuf" {
			mu.Lock()
			exports = append(exports, body)
			mu.Unlock()
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer collector.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.URL)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "60000") // only the flush on exit exports

	const traceID = "0af7651916cd43dd8448eb211c80319c"
	rc := newReceiver(t, nil)
	dir := t.TempDir()
	p := start(t, dir, "--endpoint", rc.endpoint("orders"))
	req, err := http.NewRequest("POST", p.url("/v1/events"), strings.NewReader(`{"id":"traced","destination":"orders"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", "00-"+traceID+"-b7ad6b7169203331-01")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("POST: %d", resp.StatusCode)
	}
	testkit.WaitFor(t, 30*time.Second, "the delivery", func() bool { return rc.ackedCount("traced") == 1 })
	if tp := rc.lastHeader().Get("traceparent"); !strings.HasPrefix(tp, "00-"+traceID+"-") || strings.Contains(tp, "b7ad6b7169203331") {
		t.Errorf("receiver got traceparent %q, want one of trace %s from the attempt's span", tp, traceID)
	}
	p.signal(syscall.SIGTERM, 30*time.Second)
	if code := p.exitCode(); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	raw, _ := hex.DecodeString(traceID)
	mu.Lock()
	defer mu.Unlock()
	var found bool
	for _, b := range exports {
		found = found || bytes.Contains(b, raw)
	}
	if !found {
		t.Errorf("the collector got %d exports, none with the producer's trace", len(exports))
	}
}
