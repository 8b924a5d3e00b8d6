package cli

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outboxd/outbox/internal/testkit"
	"github.com/outboxd/outbox/kafka"
)

// fakeStatic answers StaticMismatch as the test sets it, counting calls.
type fakeStatic struct {
	mu     sync.Mutex
	differ []string
	err    error
	calls  atomic.Int64
}

func (f *fakeStatic) set(differ []string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.differ, f.err = differ, err
}

func (f *fakeStatic) StaticMismatch(context.Context) ([]string, error) {
	f.calls.Add(1)
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.differ, f.err
}

// TestReadyzStaticEndpoints: in group mode /readyz names the static
// endpoints the members define differently, from what the watch last
// learned: a probe never asks the group itself, and an answer the group
// cannot give (a rebalance) leaves the last one standing.
func TestReadyzStaticEndpoints(t *testing.T) {
	g := &fakeGroup{}
	g.set(kafka.GroupHealth{Joined: true, Generation: 2})
	st := &fakeStatic{}
	st.set([]string{"orders", "refunds"}, nil)
	s := newReadyServer(t, g)
	s.static = watchStatic(st, slog.New(slog.DiscardHandler))
	t.Cleanup(func() { s.static.close() })
	c := serveRoutes(t, s)

	want := "static endpoints defined differently by the members of the group: orders, refunds (give every instance the same definitions)"
	testkit.WaitFor(t, 10*time.Second, "the mismatch reported", func() bool {
		code, a := c.get("")
		return code == http.StatusServiceUnavailable && names(a) == "static-endpoints=failed" && a.Checks[0].Reason == want
	})
	if code, _ := c.get("?exclude=static-endpoints"); code != http.StatusOK {
		t.Errorf("/readyz?exclude=static-endpoints = %d, want 200", code)
	}

	st.set(nil, errors.New("kafka: group g is PreparingRebalance"))
	asked := st.calls.Load()
	testkit.WaitFor(t, 10*time.Second, "the watch asking during a rebalance", func() bool { return st.calls.Load() > asked })
	if code, a := c.get(""); code != http.StatusServiceUnavailable || a.Checks[0].Reason != want {
		t.Errorf("/readyz while the group cannot answer = %d %+v, want the last mismatch", code, a)
	}

	st.set(nil, nil)
	testkit.WaitFor(t, 10*time.Second, "ready once the members agree", func() bool {
		code, a := c.get("?verbose")
		return code == http.StatusOK && names(a) == "store=ok punctuator=ok shutdown=ok kafka=ok restores=ok static-endpoints=ok"
	})

	// Probes read what the watch learned: with the watch stopped they
	// still answer, and ask the group nothing.
	s.static.close()
	calls := st.calls.Load()
	for range 20 {
		if code, _ := c.get(""); code != http.StatusOK {
			t.Fatalf("/readyz after the watch stopped = %d, want its last answer, 200", code)
		}
	}
	if extra := st.calls.Load() - calls; extra != 0 {
		t.Errorf("20 probes asked the group %d times; want none", extra)
	}
}
