package console_test

import (
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outboxd/outbox/outbox/console"
)

// partitionList is a PartitionSource holding a fixed list.
type partitionList []console.Partition

func (p partitionList) Partitions() []console.Partition { return p }

// The partitions page is there only with a PartitionSource, and shows its
// partitions escaped.
func TestPartitionsPage(t *testing.T) {
	c := client(t)
	off := newEnv(t, console.Config{}, nil)
	if resp, _ := do(t, c, http.MethodGet, off.base+"/partitions", nil); resp.StatusCode != http.StatusNotFound {
		t.Errorf("without partitions: GET /partitions: %d, want 404", resp.StatusCode)
	}
	if _, body := do(t, c, http.MethodGet, off.base+"/", nil); strings.Contains(body, "/partitions") {
		t.Error("without partitions the navigation links to them")
	}
	on := newEnv(t, console.Config{Partitions: partitionList{
		{Partition: 0, Owner: "member-a", State: "active", Restore: "checkpoint, 12 records", Committed: 41, Pending: 3},
		{Partition: 7, Owner: "member-a", State: "failed", Error: "<b>broker</b> down", Lag: 900, Committed: -1},
	}}, nil)
	resp, body := do(t, c, http.MethodGet, on.base+"/partitions", nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /partitions: %d", resp.StatusCode)
	}
	for _, want := range []string{"member-a", "checkpoint, 12 records", "failed: &lt;b&gt;broker&lt;/b&gt; down", ">900<"} {
		if !strings.Contains(body, want) {
			t.Errorf("the partitions page lacks %q:\n%s", want, body)
		}
	}
}

// clock is a settable time source for sessions.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

func (c *clock) Advance(d time.Duration) { c.mu.Lock(); c.now = c.now.Add(d); c.mu.Unlock() }

// A session ends at its expiry: pages send to the login form again and its
// CSRF token is refused.
func TestSessionExpires(t *testing.T) {
	clk := &clock{now: time.Date(2026, 5, 1, 8, 0, 0, 0, time.UTC)}
	e := newEnv(t, console.Config{Token: token, SessionTTL: time.Hour, Now: clk.Now}, nil)
	c := client(t)
	csrf := login(t, e, c, token)
	clk.Advance(59 * time.Minute)
	if resp, _ := do(t, c, http.MethodGet, e.base+"/", nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("before the expiry: %d, want 200", resp.StatusCode)
	}
	clk.Advance(time.Minute)
	if resp, _ := do(t, c, http.MethodGet, e.base+"/", nil); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("at the expiry: %d, want 303 to the login", resp.StatusCode)
	}
	resp, _ := do(t, c, http.MethodPost, e.base+"/action", url.Values{"csrf": {csrf}, "do": {"enable"}, "name": {"hooks"}})
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("an action after the expiry: %d, want 403", resp.StatusCode)
	}
}
