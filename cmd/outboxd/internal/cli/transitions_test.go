package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/outboxd/outbox/httpsink"
	"github.com/outboxd/outbox/kafka"
	"github.com/outboxd/outbox/outbox"
)

// Each transition is written under the key of every part of the
// endpoint's state it changes: a hold under its own part, a lift under
// every part it lifts.
func TestStateKeys(t *testing.T) {
	at := time.Date(2026, 12, 6, 7, 0, 0, 0, time.UTC)
	for kind, want := range map[outbox.TransitionKind][]string{
		outbox.TransitionDisabled:  {"state/a/b/disable"},
		outbox.TransitionThrottled: {"state/a/b/throttle"},
		outbox.TransitionOpened:    {"state/a/b/breaker"},
		outbox.TransitionClosed:    {"state/a/b/breaker"},
		outbox.TransitionRetried:   {"state/a/b/throttle", "state/a/b/breaker"},
		outbox.TransitionEnabled:   {"state/a/b/disable", "state/a/b/throttle", "state/a/b/breaker"},
	} {
		var got []string
		for _, k := range stateKeys(outbox.EndpointTransition{Endpoint: "a/b", Kind: kind, At: at}) {
			got = append(got, string(k))
		}
		if !slices.Equal(got, want) {
			t.Errorf("keys of %s: %q; want %q", kind, got, want)
		}
	}
}

// record is one record of the endpoints topic, as the table reads it.
type record struct {
	key, value []byte
}

// records returns the records that publishing ts writes, in order.
func records(t *testing.T, ts []outbox.EndpointTransition) []record {
	t.Helper()
	var out []record
	for _, tr := range ts {
		v, err := json.Marshal(tr)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range stateKeys(tr) {
			out = append(out, record{k, v})
		}
	}
	return out
}

// afterCompaction returns what compaction leaves of recs: the last record of each
// key, in offset order.
func afterCompaction(recs []record) []record {
	last := map[string]int{}
	for i, r := range recs {
		last[string(r.key)] = i
	}
	var out []record
	for i, r := range recs {
		if last[string(r.key)] == i {
			out = append(out, r)
		}
	}
	return out
}

// replayed opens a store sharing an endpoint state with "rcv", applies
// recs to it through the topic's handler, and returns the state of "rcv".
func replayed(t *testing.T, recs []record) outbox.EndpointState {
	t.Helper()
	sink, err := httpsink.New(httpsink.Config{Endpoints: []httpsink.Endpoint{{Name: "rcv", URL: "http://127.0.0.1:1/hook", AllowPrivate: true}}})
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	shared := outbox.NewSharedEndpoints(outbox.SharedEndpointsConfig{})
	o, err := outbox.Open(filepath.Join(t.TempDir(), "o.db"), outbox.Config{Sink: sink, NoSync: true, SharedEndpoints: shared})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = o.Stop(t.Context()) }()
	apply := applyState(shared)
	for i, r := range recs {
		if err := apply(kafka.TableRecord{Offset: int64(i), Key: r.key, Value: r.value}); err != nil {
			t.Fatalf("record %d (%s): %v", i, r.key, err)
		}
	}
	eps, err := o.Endpoints(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, ep := range eps {
		if ep.Name == "rcv" {
			return ep
		}
	}
	t.Fatal("no state of rcv")
	return outbox.EndpointState{}
}

// holds is what an endpoint state holds: disabled, throttled until,
// breaker open until. Not why it is disabled: of two disables without an
// enable between them (two instances seeing a 410 at once) the history
// keeps the first reason and a compacted topic the last.
func holds(ep outbox.EndpointState) string {
	return fmt.Sprintf("disabled=%t throttled=%s breaker=%s until %s", ep.Disabled,
		ep.ThrottledUntil.UTC().Format(time.RFC3339), ep.Breaker, ep.BreakerUntil.UTC().Format(time.RFC3339))
}

// An instance restarted after the endpoints topic was compacted replays
// only the last record of each key, in offset order: the endpoint is held
// as the whole history held it, for every sequence of transitions.
func TestStateReplayAfterCompaction(t *testing.T) {
	kinds := []outbox.TransitionKind{outbox.TransitionDisabled, outbox.TransitionThrottled, outbox.TransitionOpened,
		outbox.TransitionClosed, outbox.TransitionEnabled, outbox.TransitionRetried}
	rng := rand.New(rand.NewPCG(30, 2))
	start := time.Now().Truncate(time.Second).Add(-time.Hour)
	for i := range 300 {
		ts := make([]outbox.EndpointTransition, 1+rng.IntN(8))
		for j := range ts {
			tr := outbox.EndpointTransition{Endpoint: "rcv", Kind: kinds[rng.IntN(len(kinds))], At: start.Add(time.Duration(j) * time.Second)}
			switch tr.Kind {
			case outbox.TransitionThrottled, outbox.TransitionOpened:
				tr.Until = tr.At.Add(2 * time.Hour)
			case outbox.TransitionDisabled:
				tr.Reason = fmt.Sprintf("410 at %d", j)
			}
			ts[j] = tr
		}
		recs := records(t, ts)
		full, compacted := holds(replayed(t, recs)), holds(replayed(t, afterCompaction(recs)))
		if full != compacted {
			var seq []string
			for _, tr := range ts {
				seq = append(seq, string(tr.Kind))
			}
			t.Fatalf("sequence %d (%s): after compaction %s; want %s", i, strings.Join(seq, ", "), compacted, full)
		}
	}
}

// A record under the "state/" prefix that is not a transition, or not one
// written under its own key, is refused (the table skips, logs and counts
// it) and changes nothing.
func TestApplyStateRefusesBadRecords(t *testing.T) {
	at := time.Now().UTC()
	opened, err := json.Marshal(outbox.EndpointTransition{Endpoint: "rcv", Kind: outbox.TransitionOpened, Until: at.Add(time.Hour), At: at})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name       string
		key, value string
	}{
		{"not JSON", "state/rcv/breaker", "{"},
		{"tombstone", "state/rcv/breaker", ""},
		{"another version", "state/rcv/breaker", strings.Replace(string(opened), `"v":1`, `"v":2`, 1)},
		{"another part's key", "state/rcv/disable", string(opened)},
		{"another endpoint's key", "state/other/breaker", string(opened)},
		{"unknown part", "state/rcv/mood", string(opened)},
	} {
		var value []byte
		if c.value != "" {
			value = []byte(c.value)
		}
		recs := []record{{[]byte(c.key), value}}
		shared := outbox.NewSharedEndpoints(outbox.SharedEndpointsConfig{})
		err := applyState(shared)(kafka.TableRecord{Key: recs[0].key, Value: recs[0].value})
		if err == nil {
			t.Errorf("%s: applied; want an error", c.name)
		}
	}
	if err := applyState(outbox.NewSharedEndpoints(outbox.SharedEndpointsConfig{}))(kafka.TableRecord{Key: []byte("state/rcv/breaker"), Value: opened}); err != nil {
		t.Errorf("a good record: %v", err)
	}
	var te *outbox.TransitionError
	if _, err := decodeTransition([]byte("state/rcv/breaker"), []byte(`{"v":1}`)); !errors.As(err, &te) {
		t.Errorf("a transition without fields: %v; want a *outbox.TransitionError", err)
	}
}

// The publisher never blocks the engine: with the topic not written (not
// started), the queue fills and the transitions beyond it are dropped and
// counted; stopping a publisher never started returns at once.
func TestPublisherDropsWhenFull(t *testing.T) {
	p := newPublisher(slog.New(slog.DiscardHandler))
	tr := outbox.EndpointTransition{Endpoint: "rcv", Kind: outbox.TransitionClosed, At: time.Now()}
	for range transitionQueue + 5 {
		p.enqueue(tr)
	}
	if got := p.dropped.Load(); got != 5 {
		t.Errorf("dropped %d; want 5", got)
	}
	p.stop(t.Context())
}

// FuzzDecodeTransition: any record of the endpoints topic decodes to a
// transition written under one of its own keys, or fails; it never panics.
func FuzzDecodeTransition(f *testing.F) {
	f.Add([]byte("state/rcv/breaker"), []byte(`{"v":1,"endpoint":"rcv","kind":"opened","until":"2026-12-06T07:00:05Z","at":"2026-12-06T07:00:00Z"}`))
	f.Add([]byte("state/rcv/disable"), []byte(`{"v":1,"endpoint":"rcv","kind":"enabled","at":"2026-12-06T07:00:00Z"}`))
	f.Add([]byte("state/a/b/disable"), []byte(`{"v":1,"endpoint":"a/b","kind":"disabled","reason":"410","at":"2026-12-06T07:00:00Z"}`))
	f.Add([]byte("state/rcv/throttle"), []byte(`{"v":2}`))
	f.Add([]byte("state/"), []byte(nil))
	f.Fuzz(func(t *testing.T, key, value []byte) {
		tr, err := decodeTransition(key, value)
		if err != nil {
			return
		}
		if !slices.ContainsFunc(stateKeys(tr), func(k []byte) bool { return string(k) == string(key) }) {
			t.Fatalf("decoded %+v under key %q, not one of its own", tr, key)
		}
		if _, err := json.Marshal(tr); err != nil {
			t.Fatalf("decoded %+v does not encode: %v", tr, err)
		}
	})
}
