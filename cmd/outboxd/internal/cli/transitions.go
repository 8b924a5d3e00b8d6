package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"sync/atomic"

	"github.com/outboxd/outbox/kafka"
	"github.com/outboxd/outbox/outbox"
)

// statePrefix starts the keys of the endpoint transitions in the group's
// endpoints topic.
const statePrefix = "state/"

// The parts of an endpoint's state, each the last segment of a key: a key
// holds the last transition that changed its part.
const (
	stateDisable  = "disable"  // disabled, enabled
	stateThrottle = "throttle" // throttled, retried, enabled
	stateBreaker  = "breaker"  // opened, closed, retried, enabled
)

// transitionQueue is how many transitions wait for the endpoints topic at
// most; more are dropped (see publisher).
const transitionQueue = 1024

// stateParts returns the parts of an endpoint's state that a transition of
// kind changes: a hold one part, a lift every part it lifts.
func stateParts(kind outbox.TransitionKind) []string {
	switch kind {
	case outbox.TransitionDisabled:
		return []string{stateDisable}
	case outbox.TransitionThrottled:
		return []string{stateThrottle}
	case outbox.TransitionOpened, outbox.TransitionClosed:
		return []string{stateBreaker}
	case outbox.TransitionRetried:
		return []string{stateThrottle, stateBreaker}
	case outbox.TransitionEnabled:
		return []string{stateDisable, stateThrottle, stateBreaker}
	}
	return nil
}

// stateKeys returns the keys under which t is written to the endpoints
// topic, "state/<endpoint>/<part>", one per part it changes. Compaction
// keeps the last record of each key, so each part's key holds the last
// transition that changed that part; a lift is written under every part
// it lifts, so that one record of a later hold (another part's) cannot
// outlive it and the state replayed from a compacted topic, in offset
// order, is the state every record made.
func stateKeys(t outbox.EndpointTransition) [][]byte {
	parts := stateParts(t.Kind)
	keys := make([][]byte, len(parts))
	for i, p := range parts {
		keys[i] = []byte(statePrefix + t.Endpoint + "/" + p)
	}
	return keys
}

// decodeTransition decodes a record of the endpoints topic under key: the
// transition, checked, and written under one of its own keys.
func decodeTransition(key, value []byte) (outbox.EndpointTransition, error) {
	var t outbox.EndpointTransition
	if value == nil {
		return t, fmt.Errorf("a tombstone is not an endpoint transition")
	}
	if err := json.Unmarshal(value, &t); err != nil {
		return t, err
	}
	if !slices.ContainsFunc(stateKeys(t), func(k []byte) bool { return string(k) == string(key) }) {
		return t, fmt.Errorf("a %s transition of endpoint %q is not written under key %.100q", t.Kind, t.Endpoint, key)
	}
	return t, nil
}

// applyState is the endpoints topic's handler of "state/" records: it
// applies another instance's transition (or this one's, harmlessly) to
// the instance's shared endpoint state. It runs on the table's reader; the
// engine never waits for that reader (publisher.enqueue does not block),
// so Apply taking the engine's locks cannot deadlock.
func applyState(shared *outbox.SharedEndpoints) kafka.TableHandler {
	return func(r kafka.TableRecord) error {
		t, err := decodeTransition(r.Key, r.Value)
		if err != nil {
			return err
		}
		return shared.Apply(t)
	}
}

// publisher writes the transitions of the instance's shared endpoint
// state to the group's endpoints topic, from a goroutine of its own: the
// engine hands them over under its locks, so enqueue never blocks. The
// queue is bounded (transitionQueue): when the topic is so slow that it
// fills, a transition is dropped with a warning and counted. A dropped
// transition holds this instance only; the others learn of the endpoint's
// state from their own deliveries, or from a later transition.
type publisher struct {
	log     *slog.Logger
	queue   chan outbox.EndpointTransition
	dropped atomic.Uint64 // the queue was full
	failed  atomic.Uint64 // the topic refused them, or the instance stopped first
	cancel  context.CancelFunc
	quit    chan struct{} // closed by stop: drain the queue and return
	done    chan struct{} // closed when run returns; nil until start
}

func newPublisher(log *slog.Logger) *publisher {
	return &publisher{log: log, queue: make(chan outbox.EndpointTransition, transitionQueue), quit: make(chan struct{})}
}

// enqueue hands t over to be written, or drops it when the queue is full.
func (p *publisher) enqueue(t outbox.EndpointTransition) {
	select {
	case p.queue <- t:
	default:
		// Logged on the first drop and then at every power of two, so a
		// stalled topic does not flood the log.
		if n := p.dropped.Add(1); n&(n-1) == 0 {
			p.log.Warn("endpoint transitions queue full: transition not published to the group",
				"endpoint", t.Endpoint, "kind", string(t.Kind), "dropped", n)
		}
	}
}

// start writes the queued transitions, and those to come, to t until stop.
func (p *publisher) start(t *kafka.Table) {
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel, p.done = cancel, make(chan struct{})
	go p.run(ctx, t)
}

func (p *publisher) run(ctx context.Context, t *kafka.Table) {
	defer close(p.done)
	for {
		select {
		case tr := <-p.queue:
			p.put(ctx, t, tr)
		case <-p.quit:
			p.drain(ctx, t)
			return
		}
	}
}

// drain writes what is queued, until ctx ends: the rest is counted and
// logged once.
func (p *publisher) drain(ctx context.Context, t *kafka.Table) {
	for {
		select {
		case tr := <-p.queue:
			if ctx.Err() != nil {
				n := 1 + len(p.queue)
				p.failed.Add(uint64(n))
				p.log.Warn("stopping: endpoint transitions not published to the group", "transitions", n, "err", ctx.Err())
				return
			}
			p.put(ctx, t, tr)
		default:
			return
		}
	}
}

// put writes tr under each of its keys.
func (p *publisher) put(ctx context.Context, t *kafka.Table, tr outbox.EndpointTransition) {
	v, err := json.Marshal(tr)
	if err == nil {
		for _, k := range stateKeys(tr) {
			if _, err = t.Put(ctx, k, v); err != nil {
				break
			}
		}
	}
	if err != nil {
		p.failed.Add(1)
		p.log.Warn("endpoint transition not published to the group", "endpoint", tr.Endpoint, "kind", string(tr.Kind), "err", err)
	}
}

// stop writes what is queued until ctx ends, then gives up on the rest
// (counted as failed) and returns once the goroutine has.
func (p *publisher) stop(ctx context.Context) {
	if p.done == nil {
		return
	}
	close(p.quit)
	select {
	case <-p.done:
	case <-ctx.Done():
		p.cancel()
		<-p.done
	}
	p.cancel()
}
