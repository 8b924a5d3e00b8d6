package cli

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/outboxd/outbox/cmd/outboxd/internal/config"
	"github.com/outboxd/outbox/outbox"
)

type nopSink struct{}

func (nopSink) Deliver(context.Context, *outbox.Delivery) outbox.Result {
	return outbox.Result{Action: outbox.ActionSuccess, Status: 200}
}

// TestReadyzReportsAHungCommit: while a store commit does not return (a disk
// that stopped answering), /readyz answers 503 naming the cause, and ready
// again once the commit finishes.
func TestReadyzReportsAHungCommit(t *testing.T) {
	defer func(d time.Duration) { commitStallLimit = d }(commitStallLimit)
	commitStallLimit = 20 * time.Millisecond

	o, err := outbox.Open(filepath.Join(t.TempDir(), "outboxd.db"), outbox.Config{Sink: nopSink{}})
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Start(); err != nil {
		t.Fatal(err)
	}
	defer o.Stop(context.Background())
	cfg := config.Default()
	s := &server{cfg: &cfg, log: slog.New(slog.DiscardHandler), o: o}
	srv := httptest.NewServer(s.routes(prometheus.NewRegistry()))
	defer srv.Close()
	readyz := func() (int, string) {
		t.Helper()
		resp, err := http.Get(srv.URL + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b strings.Builder
		_, _ = io.Copy(&b, resp.Body)
		return resp.StatusCode, b.String()
	}
	if code, body := readyz(); code != http.StatusOK {
		t.Fatalf("readyz = %d %s, want 200", code, body)
	}

	// Hold the committer inside a transaction, as an fsync that does not
	// return would: Upsert's fn runs inside the write transaction.
	started, release := make(chan struct{}), make(chan struct{})
	errHold := errors.New("hold")
	held := make(chan error, 1)
	go func() {
		_, err := o.Upsert(t.Context(), "hold", func(*outbox.Event) (outbox.Event, error) {
			close(started)
			<-release
			return outbox.Event{}, errHold
		})
		held <- err
	}()
	<-started
	for deadline := time.Now().Add(10 * time.Second); o.CommitStats().Running <= commitStallLimit; {
		if time.Now().After(deadline) {
			t.Fatal("the held commit never counted as running")
		}
		runtime.Gosched()
	}
	code, body := readyz()
	close(release)
	if err := <-held; !errors.Is(err, errHold) {
		t.Fatalf("Upsert = %v, want the hold error", err)
	}
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "store commit has been running") ||
		!strings.Contains(body, "outboxd.db") {
		t.Fatalf("readyz during the hung commit = %d %s, want 503 naming the commit and the file", code, body)
	}
	if code, body := readyz(); code != http.StatusOK {
		t.Fatalf("readyz after the commit finished = %d %s, want 200", code, body)
	}
}
