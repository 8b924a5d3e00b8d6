package cluster_test

import (
	"context"
	"net/http"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/outboxd/outbox/outbox"
	"github.com/outboxd/outbox/outbox/cluster"
	"github.com/outboxd/outbox/outbox/httpapi"
)

// staleCopy is a copy of a partition's store that a member holds but does
// not serve, at a changelog offset.
type staleCopy struct {
	api    http.Handler
	offset int64
}

// staleHandler answers reads from m's copy, marked stale, as outboxd
// answers from a Kafka group's stale copies.
func staleHandler(m *member) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := m.copy.Load()
		if c == nil {
			http.Error(w, `{"error":"not found"}`, http.StatusNotFound)
			return
		}
		c.api.ServeHTTP(staleWriter{ResponseWriter: w, offset: c.offset}, r)
	})
}

// staleWriter marks a 200 stale.
type staleWriter struct {
	http.ResponseWriter
	offset int64
}

func (w staleWriter) WriteHeader(status int) {
	if status == http.StatusOK {
		w.Header().Set(cluster.StaleHeader, "true")
		w.Header().Set(cluster.StaleOffsetHeader, strconv.FormatInt(w.offset, 10))
	}
	w.ResponseWriter.WriteHeader(status)
}

// giveCopy gives m a copy, at offset, holding the event id.
func giveCopy(t *testing.T, m *member, offset int64, id string) {
	t.Helper()
	o, err := outbox.Open(filepath.Join(t.TempDir(), "copy.db"), outbox.Config{Sink: deadSink{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = o.Stop(context.Background()) })
	if _, err := o.Enqueue(context.Background(), outbox.Event{ID: id, Key: "k", Destination: "orders", Payload: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	m.copy.Store(&staleCopy{api: httpapi.New(o, httpapi.Config{Token: token}), offset: offset})
}

// While partitions move, a read of an event no member serves is answered
// from the freshest stale copy, marked with its offset, rather than 503;
// writes still wait for the owner; a member that serves the event answers
// fresh; and while nothing moves a copy answers nothing.
func TestStaleCopiesAnswerReadsOnlyWhilePartitionsMove(t *testing.T) {
	g := newGroup(t, 3, 5*time.Second)
	a, b, c := g.members[0], g.members[1], g.members[2]
	giveCopy(t, b, 5, "ev-1")
	giveCopy(t, c, 9, "ev-1")

	if r := do(t, a, "GET", "/v1/events/ev-1"); r.status != 404 {
		t.Errorf("while nothing moves: %d %s, want 404 (copies are not asked)", r.status, r.body)
	}
	a.moving.Store(true)
	for _, path := range []string{"/v1/events/ev-1", "/v1/events/ev-1/attempts"} {
		r := do(t, a, "GET", path)
		if r.status != 200 || r.header.Get(cluster.StaleHeader) != "true" || r.header.Get(cluster.StaleOffsetHeader) != "9" ||
			r.header.Get(cluster.ServedByHeader) != c.srv.URL || r.json["id"] != "ev-1" {
			t.Errorf("GET %s while partitions move: %d %v %s, want c's copy at offset 9", path, r.status, r.header, r.body)
		}
	}
	for _, w := range [][2]string{{"DELETE", "/v1/events/ev-1"}, {"POST", "/v1/events/ev-1/replay"}} {
		if r := do(t, a, w[0], w[1]); r.status != 503 {
			t.Errorf("%s %s while partitions move: %d %s, want 503: writes wait for the owner", w[0], w[1], r.status, r.body)
		}
	}
	giveCopy(t, a, 12, "ev-1")
	if r := do(t, a, "GET", "/v1/events/ev-1"); r.status != 200 || r.header.Get(cluster.StaleOffsetHeader) != "12" ||
		r.header.Get(cluster.ServedByHeader) != "" {
		t.Errorf("with a fresher copy of its own: %d %v, want a's copy at offset 12", r.status, r.header)
	}
	if r := do(t, a, "GET", "/v1/events/elsewhere"); r.status != 503 {
		t.Errorf("an event no copy holds while partitions move: %d %s, want 503", r.status, r.body)
	}

	enqueue(t, b, "ev-1", "k")
	if r := do(t, a, "GET", "/v1/events/ev-1"); r.status != 200 || r.header.Get(cluster.StaleHeader) != "" ||
		r.header.Get(cluster.ServedByHeader) != b.srv.URL {
		t.Errorf("with b serving the event: %d %v, want b's fresh answer", r.status, r.header)
	}
	if got := a.h.Counts(); got.Stale != 3 || got.Moving != 3 {
		t.Errorf("a's counts %+v, want 3 stale answers and 3 answered 503", got)
	}

	// A forwarded request is answered from a copy only when it accepts it.
	if r := do(t, c, "GET", "/v1/events/ev-1", cluster.ForwardedHeader, a.srv.URL); r.status != 404 {
		t.Errorf("forwarded read without %s: %d, want c's own 404", cluster.AcceptStaleHeader, r.status)
	}
	if r := do(t, c, "GET", "/v1/events/ev-1", cluster.ForwardedHeader, a.srv.URL, cluster.AcceptStaleHeader, "true"); r.status != 200 ||
		r.header.Get(cluster.StaleHeader) != "true" {
		t.Errorf("forwarded read accepting a stale answer: %d %v, want c's copy", r.status, r.header)
	}
}

// A member whose partition starts serving while it answers a read (its
// own stores did not hold the event, then the partition's restore ended
// and nothing moves any more) answers the event, not a 404: the
// partitions were on the move when the read began, so it is read again.
func TestAPartitionThatStartsServingDuringARead(t *testing.T) {
	g := newGroup(t, 2, 5*time.Second)
	a := g.members[0]
	enqueue(t, a, "ev-1", "k")
	a.moving.Store(true)
	restored := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.moving.Store(false) // the restore ends as the read is under way
		http.Error(w, `{"error":"not found"}`, http.StatusNotFound)
	})
	a.notYet.Store(&restored)
	if r := do(t, a, "GET", "/v1/events/ev-1"); r.status != 200 || r.header.Get(cluster.StaleHeader) != "" || r.json["id"] != "ev-1" {
		t.Errorf("a read as the partition starts serving: %d %s, want the event from the member's own store", r.status, r.body)
	}
}
