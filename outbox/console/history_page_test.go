package console_test

import (
	"fmt"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/outboxd/outbox/internal/testkit"
	"github.com/outboxd/outbox/outbox"
	"github.com/outboxd/outbox/outbox/console"
)

// archivedIDRE reads the event IDs listed on the history page.
var archivedIDRE = regexp.MustCompile(`class="id" href="[^"]+">([^<]+)</a>`)

// deliverAll enqueues evs into e's outbox and waits until the archive
// keeps want deliveries.
func deliverAll(t *testing.T, e *env, want int, evs ...outbox.Event) {
	t.Helper()
	if _, err := e.o.Enqueue(t.Context(), evs...); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 30*time.Second, fmt.Sprintf("%d deliveries archived", want), func() bool {
		return e.o.Stats().Archived == want
	})
}

// historyIDs follows the history page's next links from u and returns the
// IDs listed over all its pages.
func historyIDs(t *testing.T, e *env, c *http.Client, u string) []string {
	t.Helper()
	var got []string
	for pages := 0; u != ""; pages++ {
		if pages > 10 {
			t.Fatal("too many pages")
		}
		resp, body := do(t, c, http.MethodGet, u, nil)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d:\n%s", u, resp.StatusCode, body)
		}
		for _, m := range archivedIDRE.FindAllStringSubmatch(body, -1) {
			got = append(got, html.UnescapeString(m[1]))
		}
		u = ""
		if m := nextRE.FindStringSubmatch(body); m != nil {
			u = e.srv.URL + html.UnescapeString(m[1])
		}
	}
	return got
}

// The history page pages through exactly the delivered events a topic
// pattern, endpoint and key prefix select, each once, the filter kept
// across pages by the cursor.
func TestHistoryPagesTheArchive(t *testing.T) {
	e := newEnvRetaining(t, console.Config{}, nil, []outbox.Subscription{
		{Endpoint: "hooks", Topics: []string{"order.*", "user.*"}}, {Endpoint: "crm", Topics: []string{"order.*"}},
	}, time.Hour)
	var evs, want []string
	var batch []outbox.Event
	for i := range 120 {
		id, topic, key := fmt.Sprintf("ev-%03d", i), "order.paid", "cust-1"
		switch i % 4 {
		case 1:
			topic = "user.created"
		case 2:
			key = "cust-2"
		}
		batch = append(batch, outbox.Event{ID: id, Topic: topic, Key: key, Payload: []byte(`{"n":1}`)})
		evs = append(evs, id)
		if topic == "order.paid" && key == "cust-1" {
			want = append(want, id)
		}
	}
	deliverAll(t, e, 120+90, batch...) // every event to hooks, the 90 orders to crm too
	c := client(t)
	q := url.Values{"topic": {"order.*"}, "endpoint": {"crm"}, "key": {"cust-1"}}
	got := historyIDs(t, e, c, e.base+"/history?"+q.Encode())
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("the history of order.* to crm for cust-1 lists %d events %v,\nwant the %d matching %v", len(got), got, len(want), want)
	}
	if got := historyIDs(t, e, c, e.base+"/history?endpoint=hooks"); len(got) != len(evs) {
		t.Errorf("the history of hooks lists %d deliveries, want %d", len(got), len(evs))
	}
	_, body := do(t, c, http.MethodGet, e.base+"/history?topic=user.created", nil)
	if !strings.Contains(body, "user.created") || !strings.Contains(body, "hooks") || strings.Contains(body, "order.paid") {
		t.Errorf("the history of user.created does not show only its deliveries with topic and endpoint:\n%s", body)
	}
}

// A delivered event whose ID, key, payload and headers hold markup and
// invalid UTF-8 is listed escaped; the search form echoes a hostile filter
// escaped too.
func TestHistoryEscapesArchivedEvents(t *testing.T) {
	e := newEnvRetaining(t, console.Config{}, nil, []outbox.Subscription{{Endpoint: "hooks", Topics: []string{"order.*"}}}, time.Hour)
	deliverAll(t, e, 1, outbox.Event{
		ID: "evil-<b>\"'", Key: "k" + hostile, Topic: "order.paid", Payload: []byte(hostile + "\xff\xfe"),
		Headers: map[string]string{"X-Evil": hostile + "\xff"},
	})
	c := client(t)
	q := url.Values{"key": {"k" + hostile}}
	resp, body := do(t, c, http.MethodGet, e.base+"/history?"+q.Encode(), nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /history: %d:\n%s", resp.StatusCode, body)
	}
	for _, raw := range []string{"<script>", "<img", "<svg", "<b>"} {
		if strings.Contains(body, raw) {
			t.Errorf("the page holds %q unescaped:\n%s", raw, body)
		}
	}
	if n := strings.Count(body, "&lt;script&gt;window.pwned=1"); n < 4 { // key, header, payload, and the filter's echo
		t.Errorf("the hostile text is shown escaped %d times, want key, header, payload and filter:\n%s", n, body)
	}
	if !strings.Contains(body, "evil-&lt;b&gt;") || !strings.Contains(body, "\uFFFD") {
		t.Errorf("the ID is not shown escaped, or invalid UTF-8 not as U+FFFD:\n%s", body)
	}
}

// Without retention the history page says so and how to turn it on; a
// filter that does not parse is refused naming the field.
func TestHistoryWithoutRetention(t *testing.T) {
	e := newEnv(t, console.Config{}, nil)
	c := client(t)
	resp, body := do(t, c, http.MethodGet, e.base+"/history?topic=order.*", nil)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "Retention is off") || !strings.Contains(body, "--retain") ||
		!strings.Contains(body, "outbox.Config.Retain") {
		t.Errorf("GET /history without retain: %d, want the page saying retention is off and how to turn it on:\n%s", resp.StatusCode, body)
	}
	if !strings.Contains(body, `href="/ui/history" aria-current="page"`) {
		t.Errorf("the navigation does not mark History:\n%s", body)
	}
	r := newEnvRetaining(t, console.Config{}, nil, nil, time.Hour)
	for q, field := range map[string]string{"topic=order.**": "topic:", "from=yesterday": "from:", "to=2026-13-01": "to:",
		"from=2026-02-02&to=2026-02-01": "to:", "after=garbage": "cursor"} {
		resp, body := do(t, c, http.MethodGet, r.base+"/history?"+q, nil)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, field) {
			t.Errorf("GET /history?%s: status %d, want 400 naming %q:\n%s", q, resp.StatusCode, field, body)
		}
	}
}
