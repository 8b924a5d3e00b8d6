//go:build linux

package httpapi_test

import (
	"bytes"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outboxd/outbox/httpsink"
	"github.com/outboxd/outbox/internal/testkit"
	"github.com/outboxd/outbox/outbox"
	"github.com/outboxd/outbox/outbox/httpapi"
)

// faultyDisk is an outbox whose database file descriptor the test can point
// at another file, so that the store's real writes fail the way a full or
// broken disk makes them fail, without filling a disk.
type faultyDisk struct {
	*env
	dir  string
	logs *testkit.Buffer
	fd   int // the database file's descriptor
}

func newFaultyDisk(t *testing.T) *faultyDisk {
	t.Helper()
	dir := t.TempDir()
	var mu sync.Mutex
	var db *os.File
	sink, err := httpsink.New(httpsink.Config{Endpoints: []httpsink.Endpoint{{Name: "orders", URL: "http://127.0.0.1:9/hook", AllowPrivate: true}}})
	if err != nil {
		t.Fatal(err)
	}
	o, err := outbox.Open(filepath.Join(dir, "outbox.db"), outbox.Config{
		Sink:     sink,
		Interval: time.Hour, // no delivery writes during the test
		OpenFile: func(name string, flag int, perm os.FileMode) (*os.File, error) {
			f, err := os.OpenFile(name, flag, perm)
			mu.Lock()
			db = f
			mu.Unlock()
			return f, err
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	logs := &testkit.Buffer{}
	e := serve(t, o, sink, httpapi.Config{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	mu.Lock()
	defer mu.Unlock()
	if db == nil {
		t.Fatal("the store did not open its file through Options.OpenFile")
	}
	return &faultyDisk{env: e, dir: dir, logs: logs, fd: int(db.Fd())}
}

// A full disk answers 503 with Retry-After, which clients and load balancers
// retry, without the database path; nothing was stored, and once there is
// space the same request succeeds.
func TestFullDiskAnswers503WithRetryAfter(t *testing.T) {
	d := newFaultyDisk(t)
	if code, m := d.post(t, "/v1/events", map[string]any{"id": "before", "destination": "orders"}); code != http.StatusAccepted {
		t.Fatalf("enqueue on a healthy disk: %d %v", code, m)
	}

	// Writes to /dev/full fail with ENOSPC, as on a full filesystem.
	restore := testkit.RedirectFD(t, d.fd, "/dev/full", os.O_WRONLY)
	req, err := http.NewRequest(http.MethodPost, d.api.URL+"/v1/events",
		strings.NewReader(`{"id": "during", "destination": "orders", "payload": {"n": 1}}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := d.api.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var body bytes.Buffer
	_, _ = body.ReadFrom(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("enqueue on a full disk: %d %s, want 503", resp.StatusCode, body.String())
	}
	if ra := resp.Header.Get("Retry-After"); ra != "5" {
		t.Errorf("Retry-After %q, want 5", ra)
	}
	if !strings.Contains(body.String(), "out of disk space") || !strings.Contains(body.String(), "retry later") {
		t.Errorf("answer %s does not say the disk is full and to retry", body.String())
	}
	if strings.Contains(body.String(), d.dir) || strings.Contains(body.String(), "outbox.db") {
		t.Errorf("answer %s shows the database path", body.String())
	}
	if logs := d.logs.String(); !strings.Contains(logs, "no space left on device") || !strings.Contains(logs, "outbox.db") {
		t.Errorf("the server log does not keep the detail:\n%s", logs)
	}

	restore()
	if code, m := d.get(t, "/v1/events/during"); code != http.StatusNotFound {
		t.Errorf("the refused event: %d %v, want 404 (nothing stored)", code, m)
	}
	if code, m := d.post(t, "/v1/events", map[string]any{"id": "during", "destination": "orders", "payload": map[string]any{"n": 1}}); code != http.StatusAccepted {
		t.Errorf("the same request once there is space: %d %v, want 202", code, m)
	}
	if code, m := d.get(t, "/v1/events/before"); code != http.StatusOK {
		t.Errorf("the event acknowledged before the disk filled: %d %v", code, m)
	}
}

// Any other storage failure is a 500 whose answer names no file; the
// detail goes to the server's log.
func TestStorageFailureAnswers500WithoutPaths(t *testing.T) {
	d := newFaultyDisk(t)
	// Writes through a read-only descriptor fail with EBADF, an I/O error
	// that names the database file.
	restore := testkit.RedirectFD(t, d.fd, filepath.Join(d.dir, "outbox.db"), os.O_RDONLY)
	code, m := d.post(t, "/v1/events", map[string]any{"id": "x", "destination": "orders"})
	restore()
	if code != http.StatusInternalServerError {
		t.Fatalf("enqueue with a failing disk: %d %v, want 500", code, m)
	}
	msg, _ := m["error"].(string)
	if msg == "" || strings.Contains(msg, d.dir) || strings.Contains(msg, "outbox.db") || strings.Contains(msg, "/") {
		t.Errorf("error %q: want a message naming no file", msg)
	}
	if logs := d.logs.String(); !strings.Contains(logs, "outbox.db") {
		t.Errorf("the server log does not keep the detail:\n%s", logs)
	}
}
