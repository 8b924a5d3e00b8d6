package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/outboxd/outbox/examples/internal/runexample"
	"github.com/outboxd/outbox/internal/testkit"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.Cleanup(func(int) { testkit.RemoveBinaries() }))
}

// receiver is the downstream service of the test.
type receiver struct {
	mu     sync.Mutex
	tries  map[string]int
	orders map[string][]string // order ID -> event types accepted, in arrival order
	lobby  Room
	errs   []string
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	id := r.Header.Get("webhook-id")
	rc.tries[id]++
	switch r.URL.Path {
	case "/rooms":
		var rm Room
		if err := json.Unmarshal(body, &rm); err != nil || rm.Name != "lobby" {
			rc.errs = append(rc.errs, fmt.Sprintf("bad room snapshot %s: %v", body, err))
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		if rm.Revision > rc.lobby.Revision {
			rc.lobby = rm
		}
	case "/orders":
		var ev struct {
			Type  string `json:"type"`
			Order Order  `json:"order"`
		}
		if err := json.Unmarshal(body, &ev); err != nil {
			rc.errs = append(rc.errs, fmt.Sprintf("bad order event %s: %v", body, err))
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		// The first event of every order fails once: the later ones must
		// wait for it.
		if ev.Type == "order.created" && rc.tries[id] == 1 {
			w.WriteHeader(http.StatusInternalServerError) // retried by the outbox, not inline
			return
		}
		if !slices.Contains(rc.orders[ev.Order.ID], ev.Type) {
			rc.orders[ev.Order.ID] = append(rc.orders[ev.Order.ID], ev.Type)
		}
	default:
		w.WriteHeader(http.StatusNotFound)
		return
	}
	w.WriteHeader(http.StatusOK)
}

func TestServiceAsAUserRunsIt(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := testkit.BuildBinary(t, ".")
	rc := &receiver{tries: map[string]int{}, orders: map[string][]string{}}
	recv := httptest.NewServer(rc)
	defer recv.Close()

	p := runexample.Start(t, bin, nil, "--listen", "127.0.0.1:0", "--dir", t.TempDir(), "--receiver", recv.URL, "--allow-private",
		"--interval", "50ms", "--backoff", "50ms", "--park-interval", "100ms")
	var base string
	testkit.WaitFor(t, 20*time.Second, "the listening line", func() bool {
		out := p.Output()
		if i := strings.Index(out, "listening on "); i >= 0 {
			base = strings.Fields(out[i+len("listening on "):])[0]
			return true
		}
		return false
	})

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
	defer client.CloseIdleConnections()
	post := func(path, body string) error {
		resp, err := client.Post(base+path, "application/json", strings.NewReader(body))
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode/100 != 2 {
			return fmt.Errorf("POST %s: %d %s", path, resp.StatusCode, b)
		}
		return nil
	}
	concurrently := func(n int, fn func(i int) error) {
		t.Helper()
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() { errs[i] = fn(i) })
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
	}

	// Orders: each goes created -> paid -> shipped; the receiver fails every
	// order.created once, yet sees each order's events in order.
	concurrently(5, func(i int) error {
		id := fmt.Sprintf("o-%d", i)
		for _, s := range [][2]string{{"/orders", fmt.Sprintf(`{"id":%q,"customer":"c%d","total_cents":%d}`, id, i, 100*i+1)},
			{"/orders/" + id + "/pay", ""}, {"/orders/" + id + "/ship", ""}, {"/orders/" + id + "/ship", ""}} {
			if err := post(s[0], s[1]); err != nil {
				return err
			}
		}
		return nil
	})

	// The room: 40 members first, then 200 requests at once: 30 of them
	// leave while 170 others join.
	concurrently(40, func(i int) error { return post("/rooms/lobby/join", fmt.Sprintf(`{"user":"m%03d"}`, i)) })
	concurrently(200, func(i int) error {
		if i < 30 {
			return post("/rooms/lobby/leave", fmt.Sprintf(`{"user":"m%03d"}`, i))
		}
		return post("/rooms/lobby/join", fmt.Sprintf(`{"user":"m%03d"}`, i+10))
	})
	var want []string
	for i := 30; i < 210; i++ {
		want = append(want, fmt.Sprintf("m%03d", i))
	}

	// The service's own state.
	resp, err := client.Get(base + "/rooms/lobby")
	if err != nil {
		t.Fatal(err)
	}
	var svcRoom Room
	err = json.NewDecoder(resp.Body).Decode(&svcRoom)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(svcRoom.Members, want) || svcRoom.Revision != 240 {
		t.Fatalf("service's lobby: revision %d, %d members %v; want revision 240 and the %d members m030..m209",
			svcRoom.Revision, len(svcRoom.Members), svcRoom.Members, len(want))
	}

	// The receiver ends with exactly that membership.
	testkit.WaitFor(t, 30*time.Second, "the receiver to get the final membership", func() bool {
		rc.mu.Lock()
		defer rc.mu.Unlock()
		return rc.lobby.Revision == 240
	})

	testkit.WaitFor(t, 30*time.Second, "every order's events", func() bool {
		rc.mu.Lock()
		defer rc.mu.Unlock()
		for i := range 5 {
			if len(rc.orders[fmt.Sprintf("o-%d", i)]) < 3 {
				return false
			}
		}
		return true
	})

	p.Interrupt(t)
	if !strings.Contains(p.Output(), "stopped cleanly") {
		t.Fatalf("no clean stop in the output:\n%s", p.Output())
	}

	rc.mu.Lock()
	defer rc.mu.Unlock()
	if len(rc.errs) > 0 {
		t.Fatalf("receiver: %v", rc.errs)
	}
	if !slices.Equal(rc.lobby.Members, want) {
		t.Errorf("receiver's lobby has %d members %v; want exactly the %d members m030..m209", len(rc.lobby.Members), rc.lobby.Members, len(want))
	}
	for i := range 5 {
		id := fmt.Sprintf("o-%d", i)
		if got := rc.orders[id]; !slices.Equal(got, []string{"order.created", "order.paid", "order.shipped"}) {
			t.Errorf("order %s reached the receiver as %v, want created, paid, shipped in that order", id, got)
		}
	}
}

func TestDemoRunsToTheEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	runexample.Demo(t, []string{"--demo", "--demo-exit"},
		"order o-2 reached the receiver as order.created → order.paid → order.shipped",
		"will retry", "parked", "dead letter order:o-3:created",
		"exactly the expected 180 members", "stopped cleanly",
	)
}
