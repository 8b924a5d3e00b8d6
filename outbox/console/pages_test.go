package console_test

import (
	"fmt"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/outboxd/outbox/internal/testkit"
	"github.com/outboxd/outbox/outbox"
	"github.com/outboxd/outbox/outbox/console"
)

var nextRE = regexp.MustCompile(`href="([^"]+)" rel="next"`)

// The events page pages with List's cursor: every event once, in order,
// with the filters kept across pages.
func TestEventsPagination(t *testing.T) {
	e := newEnv(t, console.Config{}, nil)
	var evs []outbox.Event
	for i := range 120 {
		key := "a"
		if i%2 == 1 {
			key = "b"
		}
		evs = append(evs, outbox.Event{ID: fmt.Sprintf("ev-%03d", i), Key: key, Destination: "hooks", Payload: []byte("{}"), DeliverAt: farAhead()})
	}
	if _, err := e.o.Enqueue(t.Context(), evs...); err != nil {
		t.Fatal(err)
	}
	c := client(t)
	u := e.base + "/events?key=b"
	var got []string
	idRE := regexp.MustCompile(`class="id" href="[^"]+">([^<]+)</a>`)
	for pages := 0; u != ""; pages++ {
		if pages > 5 {
			t.Fatal("too many pages")
		}
		resp, body := do(t, c, http.MethodGet, u, nil)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d", u, resp.StatusCode)
		}
		for _, m := range idRE.FindAllStringSubmatch(body, -1) {
			got = append(got, m[1])
		}
		u = ""
		if m := nextRE.FindStringSubmatch(body); m != nil {
			u = e.srv.URL + html.UnescapeString(m[1])
		}
	}
	if len(got) != 60 {
		t.Fatalf("got %d events over the pages, want 60", len(got))
	}
	for i, id := range got {
		if want := fmt.Sprintf("ev-%03d", 2*i+1); id != want {
			t.Fatalf("event %d is %s, want %s", i, id, want)
		}
	}
}

// A replay by filter, confirmed, runs in the background at the chosen pace
// and replays only the matching dead letters, which are then delivered.
func TestReplayDeadByFilter(t *testing.T) {
	e := newEnv(t, console.Config{}, nil)
	for i := range 6 {
		key := "keep"
		if i < 4 {
			key = "replay"
		}
		if _, err := e.o.EnqueueDead(t.Context(), outbox.Event{ID: fmt.Sprintf("d-%d", i), Key: key, Destination: "hooks", Payload: []byte("{}")}, "test"); err != nil {
			t.Fatal(err)
		}
	}
	c := client(t)
	_, page := do(t, c, http.MethodGet, e.base+"/dead", nil)
	f := url.Values{"csrf": {csrfOf(t, page)}, "do": {"replay-dead"}, "key": {"replay"}, "rate": {"1000"}}
	confirmAction(t, e, c, f, "key starting with replay")
	testkit.WaitFor(t, 30*time.Second, "the 4 replayed events to be delivered", func() bool {
		return len(e.rcv.Missing([]string{"d-0", "d-1", "d-2", "d-3"})) == 0
	})
	testkit.WaitFor(t, 30*time.Second, "the dead page to tell the replay finished", func() bool {
		_, body := do(t, c, http.MethodGet, e.base+"/dead", nil)
		return strings.Contains(body, "4 replayed")
	})
	if st := e.o.Stats(); st.Dead != 2 {
		t.Errorf("%d dead after the replay, want the 2 not matching", st.Dead)
	}
}
