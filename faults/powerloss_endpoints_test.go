//go:build fault && linux

package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"sync"
	"testing"
	"time"
)

// managedGen is the run number in the URL of managed endpoints: they keep
// their URL across runs, so their deliveries are not attributed to one.
const managedGen = 1_000_000

// endpointState is what the last acknowledged change made of a managed
// endpoint.
type endpointState struct {
	exists      bool
	maxInFlight int
}

// endpointChurn creates, changes and deletes managed endpoints through the
// API while events are sent to them, and keeps the last acknowledged state
// of each; a change whose answer was lost makes the endpoint's state
// unknown until the next acknowledged change.
type endpointChurn struct {
	addr string
	url  string
	rng  *rand.Rand

	mu        sync.Mutex // held across each change, so that a check sees none half done
	state     map[string]endpointState
	unsure    map[string]bool
	acked     map[string]bool
	seq       int
	changes   int
	checked   int
	mismatch  int
	deletions int
}

func newEndpointChurn(addr string, rcv *receiver, seed uint64) *endpointChurn {
	return &endpointChurn{addr: addr, url: rcv.url(managedGen), rng: rand.New(rand.NewPCG(seed, 99)),
		state: make(map[string]endpointState), unsure: make(map[string]bool), acked: make(map[string]bool)}
}

func (c *endpointChurn) run(ctx context.Context) {
	client := &http.Client{Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	tick := time.NewTicker(15 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		c.step(client)
	}
}

// step makes one change or sends one event, at random.
func (c *endpointChurn) step(client *http.Client) {
	c.mu.Lock()
	defer c.mu.Unlock()
	name := fmt.Sprintf("m-%d", c.rng.IntN(6))
	st := c.state[name]
	switch p := c.rng.IntN(10); {
	case c.unsure[name] || st.exists && p < 3:
		c.change(client, http.MethodPut, name, endpointState{exists: true, maxInFlight: 1 + c.rng.IntN(64)})
	case !st.exists:
		c.change(client, http.MethodPost, name, endpointState{exists: true, maxInFlight: 1 + c.rng.IntN(64)})
	case p < 4:
		c.change(client, http.MethodDelete, name, endpointState{})
	default:
		c.seq++
		id := fmt.Sprintf("pc-m-%07d", c.seq)
		resp, err := client.Post("http://"+c.addr+"/v1/events", "application/json",
			jsonBody(map[string]any{"id": id, "destination": name, "payload": map[string]string{"id": id}}))
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusAccepted {
				c.acked[id] = true
			}
		}
	}
}

// change sends one create, replace or delete of name and records its
// outcome.
func (c *endpointChurn) change(client *http.Client, method, name string, want endpointState) {
	var body any
	if want.exists {
		body = map[string]any{"url": c.url, "max_in_flight": want.maxInFlight}
	}
	req, err := http.NewRequest(method, "http://"+c.addr+"/v1/endpoints/"+name, jsonBody(body))
	if err != nil {
		panic(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		c.unsure[name] = true
		return
	}
	resp.Body.Close()
	switch {
	case resp.StatusCode < 300:
		c.state[name], c.unsure[name] = want, false
		c.changes++
		if method == http.MethodDelete {
			c.deletions++
		}
	case resp.StatusCode >= 500:
		c.unsure[name] = true
	case method == http.MethodPost && resp.StatusCode == http.StatusConflict,
		method != http.MethodPost && resp.StatusCode == http.StatusNotFound:
		// The state the test believed was not acknowledged after all (a
		// change whose answer was lost did happen, or did not).
		c.unsure[name] = true
		if resp.StatusCode == http.StatusNotFound {
			c.state[name], c.unsure[name] = endpointState{}, false
		}
	}
}

// checkAfterRestart compares every managed endpoint whose last change was
// acknowledged with what the restarted outboxd serves.
func (c *endpointChurn) checkAfterRestart(r *powerRun, gen int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for name, want := range c.state {
		if c.unsure[name] {
			continue
		}
		c.checked++
		resp, err := http.Get("http://" + c.addr + "/v1/endpoints/" + name)
		if err != nil {
			r.violate("run %d: GET /v1/endpoints/%s: %v", gen+1, name, err)
			continue
		}
		var got struct {
			URL         string `json:"url"`
			MaxInFlight int    `json:"max_in_flight"`
			Managed     bool   `json:"managed"`
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		err = json.Unmarshal(body, &got)
		switch {
		case want.exists && resp.StatusCode != http.StatusOK:
			c.mismatch++
			r.violate("run %d: managed endpoint %s, created or changed (acknowledged) before the cut, answers %d", gen+1, name, resp.StatusCode)
		case !want.exists && resp.StatusCode != http.StatusNotFound && (got.Managed || got.URL != ""):
			// A deleted endpoint may still show the state its last
			// deliveries left (status, breaker), but not a definition.
			c.mismatch++
			r.violate("run %d: managed endpoint %s, deleted (acknowledged) before the cut, is back (%d %.300s)", gen+1, name, resp.StatusCode, body)
		case want.exists && (err != nil || !got.Managed || got.MaxInFlight != want.maxInFlight):
			c.mismatch++
			r.violate("run %d: managed endpoint %s has max_in_flight %d after the cut, the last acknowledged change set %d (%v)", gen+1, name, got.MaxInFlight, want.maxInFlight, err)
		}
	}
}

// ackedEvents returns a copy of the events acknowledged for managed
// endpoints.
func (c *endpointChurn) ackedEvents() map[string]bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]bool, len(c.acked))
	for id := range c.acked {
		out[id] = true
	}
	return out
}

func (c *endpointChurn) summary() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return fmt.Sprintf("%d acknowledged endpoint changes (%d deletes), %d endpoint states checked after restarts, %d wrong",
		c.changes, c.deletions, c.checked, c.mismatch)
}

// TestPowerLossEndpointChanges: TestPowerLoss with managed endpoints
// created, replaced and deleted through the API around the cuts (each an
// Update of the database file), and events sent to them. Besides the
// invariants of TestPowerLoss: every acknowledged endpoint change is in
// force after the cut, no deleted endpoint comes back, and every event
// acknowledged for a managed endpoint is delivered or dead (deleting an
// endpoint makes its events dead letters).
func TestPowerLossEndpointChanges(t *testing.T) {
	r := newPowerRun(t, "")
	r.churn = newEndpointChurn(r.addr, r.rcv, r.seed)
	summary := r.run(*cutsFlag)
	report(t, "**Power loss, runtime endpoint changes** (`-cuts %d`): %s; %s.", *cutsFlag, summary, r.churn.summary())
	for _, v := range r.violations {
		t.Errorf("VIOLATION: %s", v)
	}
}
