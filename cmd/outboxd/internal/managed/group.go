package managed

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/outboxd/outbox/httpsink"
	"github.com/outboxd/outbox/outbox"
	"github.com/outboxd/outbox/outbox/httpapi"
)

// maxAttempts bounds how often one API call writes its change again after
// a concurrent change went first.
const maxAttempts = 8

// GroupConfig is what a Registry shared by a Kafka group works on.
type GroupConfig struct {
	// Sink delivers to the endpoints. Required.
	Sink *httpsink.Sink
	// Limits are the partition stores' Config.RateLimits. Required.
	Limits *outbox.RateLimits
	// Static are the endpoints of the settings, Subscriptions their
	// subscriptions (the partition stores' Config.Subscriptions).
	Static        []Static
	Subscriptions []outbox.Subscription
	// Key is the AES-256 key of the secrets in the topic (LoadKey). nil:
	// none, and endpoints cannot be created.
	Key []byte
	// Logger gets the changes applied and the records refused. Default:
	// discard.
	Logger *slog.Logger
	// Now is the clock of creation times and rotation ends. Default
	// time.Now.
	Now func() time.Time
}

// Log is where a group's registry writes its changes: a table that every
// member reads in order (kafka.Table). Put returns once the record is
// applied here, through Registry.ApplyRecord.
type Log interface {
	Put(ctx context.Context, key, value []byte) (int64, error)
}

// group is a Registry's state in group mode, guarded by Registry.mu.
type group struct {
	log    Log
	sealer *sealer
	// revs is the revision in force of each name a record was seen for.
	revs map[string]uint64
	// unsealed are the endpoints whose secrets did not open, and why: in
	// the registry, not in force.
	unsealed map[string]error
	// deleted are the names deleted: their deliveries are dead-lettered in
	// the stores prepared later too.
	deleted map[string]struct{}
	// stores are this instance's partition stores, by partition.
	stores map[int]*outbox.Outbox
	// dangling are the names whose last record did not apply: restated
	// at Attach, so that compaction keeps one that did.
	dangling map[string]struct{}

	wmu sync.Mutex
	// waiting are the API calls waiting for their change, by origin.
	waiting map[string]chan outcome
}

// outcome is what became of a change: whether it applied, and how many
// deliveries a deletion dead-lettered here.
type outcome struct {
	applied bool
	dead    int
}

// NewGroup returns the registry of a member of a Kafka group, whose
// managed endpoints are the records of the group's table. Give its
// ApplyRecord to the table as the handler of RecordPrefix before the table
// is opened, then Attach the table; and give its Prepare to the group, so
// that every partition store has the subscriptions before it delivers.
func NewGroup(cfg GroupConfig) (*Registry, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	s, err := newSealer(cfg.Key)
	if err != nil {
		return nil, err
	}
	r := newRegistry(Config{Sink: cfg.Sink, Limits: cfg.Limits, Static: cfg.Static, Logger: cfg.Logger, Now: cfg.Now})
	r.staticSubs = cfg.Subscriptions
	r.grp = &group{sealer: s, revs: map[string]uint64{}, unsealed: map[string]error{}, deleted: map[string]struct{}{},
		stores: map[int]*outbox.Outbox{}, dangling: map[string]struct{}{}, waiting: map[string]chan outcome{}}
	return r, nil
}

// Attach makes the registry write its changes to log, once the table has
// applied the records it held at its opening, and restates the endpoints
// whose last record is a change that did not apply (its writer stopped
// before it restated them). It fails, naming the key's setting, when an
// endpoint in force has secrets that do not open: no key is configured,
// or another key encrypted them.
func (r *Registry) Attach(ctx context.Context, log Log) error {
	if err := r.attach(log); err != nil {
		return err
	}
	r.restateDangling(ctx)
	return nil
}

func (r *Registry) attach(log Log) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, name := range r.managed {
		if err, bad := r.grp.unsealed[name]; bad {
			return fmt.Errorf("%s: %w: the endpoint %q managed through the API is stored in the group's topic with an encrypted secret: %v",
				KeySetting, ErrKey, name, err)
		}
	}
	r.grp.log = log
	return nil
}

// restateDangling restates the names whose last record did not apply.
func (r *Registry) restateDangling(ctx context.Context) {
	r.mu.Lock()
	names := slices.Sorted(maps.Keys(r.grp.dangling))
	r.mu.Unlock()
	for _, name := range names {
		r.restate(ctx, name)
	}
}

// Prepare puts the subscriptions in force in partition p's store o, and
// dead-letters the deliveries of the endpoints deleted; the registry then
// applies every change to o as well. Give it to kafka.StoreConfig.Prepare.
func (r *Registry) Prepare(p int, o *outbox.Outbox) error {
	ctx := context.Background()
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := o.SetSubscriptions(ctx, r.subscriptionsLocked()); err != nil {
		// One subscription the store refuses must not keep the partition
		// from delivering: put them in one by one, logging the refused.
		if err := o.SetSubscriptions(ctx, r.staticSubs); err != nil {
			return err
		}
		for _, name := range r.managed {
			if e := r.eps[name]; r.grp.unsealed[name] == nil {
				if err := r.subscribe(ctx, o, e); err != nil {
					r.cfg.Logger.Error("a partition store refuses a managed endpoint's subscription", "partition", p, "endpoint", name, "err", err)
				}
			}
		}
	}
	for name := range r.grp.deleted {
		if _, err := o.DeadLetterEndpoint(ctx, name, deletedReason(name)); err != nil {
			return err
		}
	}
	r.grp.stores[p] = o
	return nil
}

// ApplyRecord applies one record of the table whose key begins with
// RecordPrefix, at offset: a change that applies is put in force (sink,
// rate limits, and the subscriptions of every partition store; a deletion
// dead-letters the endpoint's deliveries in them), one that does not is
// ignored, as on every member. The error is for a record that does not
// decode.
func (r *Registry) ApplyRecord(offset int64, key, value []byte) error {
	c, err := decodeChange(key, value, r.grp.sealer)
	if err != nil {
		return err
	}
	r.mu.Lock()
	out := r.applyLocked(c, offset)
	r.mu.Unlock()
	if c.origin != "" {
		r.grp.notify(c.origin, out)
	}
	return nil
}

// notify tells the API call waiting for origin, if any, what became of
// its change. r.mu must not be held.
func (g *group) notify(origin string, out outcome) {
	g.wmu.Lock()
	ch := g.waiting[origin]
	delete(g.waiting, origin)
	g.wmu.Unlock()
	if ch != nil {
		ch <- out
	}
}

// applyLocked applies c. r.mu must be held.
func (r *Registry) applyLocked(c *change, offset int64) outcome {
	g := r.grp
	cur, seen := g.revs[c.name]
	// The first record of a name is taken as it is: compaction may have
	// removed the ones before it, and keeps a name's last record, which
	// is one that applied (restatements see to it).
	if seen && c.prev != cur {
		g.dangling[c.name] = struct{}{}
		r.cfg.Logger.Info("a concurrent change to a managed endpoint went first; this one is ignored",
			"endpoint", c.name, "offset", offset, "revision", c.prev, "in_force", cur)
		return outcome{}
	}
	g.revs[c.name] = c.rev
	delete(g.dangling, c.name)
	if seen && c.restate && r.sameLocked(c) {
		return outcome{applied: true}
	}
	if e, ok := r.eps[c.name]; ok && !e.managed {
		r.cfg.Logger.Warn("an endpoint managed through the API is defined in this instance's settings: the settings' definition is used",
			"endpoint", c.name)
		return outcome{applied: true}
	}
	if c.op == opDelete {
		return outcome{applied: true, dead: r.removeLocked(c.name)}
	}
	r.putInForceLocked(c)
	return outcome{applied: true}
}

// sameLocked reports whether c says what is in force already.
func (r *Registry) sameLocked(c *change) bool {
	e, ok := r.eps[c.name]
	if c.op == opDelete || !ok {
		return c.op == opDelete && !ok
	}
	_, unsealed := r.grp.unsealed[c.name]
	return unsealed == (c.sealErr != nil) && string(encode(e)) == string(encode(c.ep))
}

// putInForceLocked puts c's definition in force. r.mu must be held.
func (r *Registry) putInForceLocked(c *change) {
	ctx := context.Background()
	e, old := c.ep, r.eps[c.name]
	r.putLocked(e)
	delete(r.grp.deleted, e.name)
	if c.sealErr != nil {
		r.grp.unsealed[e.name] = c.sealErr
		r.cfg.Logger.Error("the secrets of a managed endpoint do not open: it is not delivered to; give every instance the same "+KeySetting,
			"endpoint", e.name, "err", c.sealErr)
		r.cfg.Sink.RemoveEndpoint(e.name)
		r.cfg.Limits.Remove(e.name)
		r.eachStore(func(o *outbox.Outbox) error { return o.RemoveSubscriptions(ctx, e.name) })
		return
	}
	_, wasUnsealed := r.grp.unsealed[e.name]
	delete(r.grp.unsealed, e.name)
	if err := r.apply(e); err != nil {
		r.cfg.Logger.Error("a managed endpoint's definition is refused by this instance's settings", "endpoint", e.name, "err", err)
	}
	if !wasUnsealed && sameSubscription(old, e) {
		return
	}
	r.eachStore(func(o *outbox.Outbox) error { return r.subscribe(ctx, o, e) })
	if old == nil {
		// A new endpoint starts afresh, whatever state a deleted one of
		// its name left.
		r.eachStore(func(o *outbox.Outbox) error { return ignoreNotFound(o.EnableEndpoint(ctx, e.name)) })
	}
}

// removeLocked takes a deleted endpoint out of force, dead-letters its
// deliveries in every partition store and returns how many. r.mu must be
// held.
func (r *Registry) removeLocked(name string) int {
	ctx := context.Background()
	r.deleteLocked(name)
	delete(r.grp.unsealed, name)
	r.grp.deleted[name] = struct{}{}
	r.eachStore(func(o *outbox.Outbox) error { return o.RemoveSubscriptions(ctx, name) })
	r.cfg.Sink.RemoveEndpoint(name)
	dead := 0
	r.eachStore(func(o *outbox.Outbox) error {
		n, err := o.DeadLetterEndpoint(ctx, name, deletedReason(name))
		dead += n
		return err
	})
	r.cfg.Limits.Remove(name)
	return dead
}

// eachStore calls fn with every partition store; a store closed since
// (its partition revoked) is passed over, other errors are logged.
func (r *Registry) eachStore(fn func(o *outbox.Outbox) error) {
	for p, o := range r.grp.stores {
		if err := fn(o); err != nil && !errors.Is(err, outbox.ErrClosed) {
			r.cfg.Logger.Error("applying a managed endpoint's change to a partition store", "partition", p, "err", err)
		}
	}
}

// subscribe puts e's subscription in force in o, or takes away the one
// its name had when e subscribes to nothing.
func (r *Registry) subscribe(ctx context.Context, o *outbox.Outbox, e *endpoint) error {
	if s, ok := e.subscription(); ok {
		return o.PutSubscription(ctx, s)
	}
	return o.RemoveSubscriptions(ctx, e.name)
}

// deletedReason is the reason of the dead letters of a deleted endpoint.
func deletedReason(name string) string { return fmt.Sprintf("endpoint %q deleted", name) }

func ignoreNotFound(err error) error {
	if errors.Is(err, outbox.ErrNotFound) {
		return nil
	}
	return err
}

// errNoKeyToCreate refuses a managed endpoint without a key.
var errNoKeyToCreate = fmt.Errorf("endpoints managed through the API in Kafka group mode need a key to encrypt their secrets in the group's topic: set %s on every instance: %w",
	KeySetting, httpapi.ErrEndpointsFixed)

// propose writes c and returns what became of it.
func (r *Registry) propose(ctx context.Context, c *change) (outcome, error) {
	g := r.grp
	c.origin = newOrigin()
	ch := make(chan outcome, 1)
	g.wmu.Lock()
	g.waiting[c.origin] = ch
	g.wmu.Unlock()
	defer func() {
		g.wmu.Lock()
		delete(g.waiting, c.origin)
		g.wmu.Unlock()
	}()
	if _, err := g.log.Put(ctx, recordKey(c.name), encodeChange(c, g.sealer)); err != nil {
		return outcome{}, err
	}
	select {
	case out := <-ch:
		return out, nil
	default:
		return outcome{}, fmt.Errorf("the change of endpoint %q was written but not applied", c.name)
	}
}

// write writes the change build makes of what is in force (called with
// r.mu held; its error is the call's answer), again when a concurrent
// change went first, as one machine would have made them one after the
// other. It returns once the change applied here.
func (r *Registry) write(ctx context.Context, name string, build func() (*change, error)) (*change, outcome, error) {
	lost := false
	for range maxAttempts {
		r.mu.Lock()
		if r.grp.log == nil {
			r.mu.Unlock()
			return nil, outcome{}, errors.New("the endpoints are not loaded yet")
		}
		c, err := build()
		if err == nil {
			c.prev = r.grp.revs[name]
			c.rev = c.prev + 1
		}
		r.mu.Unlock()
		if err != nil {
			if lost {
				r.restate(ctx, name)
			}
			return nil, outcome{}, err
		}
		out, err := r.propose(ctx, c)
		if err != nil || out.applied {
			return c, out, err
		}
		lost = true
	}
	r.restate(ctx, name)
	return nil, outcome{}, fmt.Errorf("endpoint %q was changed by other calls %d times while this one was written: %w",
		name, maxAttempts, httpapi.ErrEndpointExists)
}

// restate writes again what is in force for name, after a change that
// did not apply, so that the last record of its key is one that did.
func (r *Registry) restate(ctx context.Context, name string) {
	ctx = context.WithoutCancel(ctx)
	for range maxAttempts {
		r.mu.Lock()
		c := &change{name: name, op: opDelete, restate: true, rev: r.grp.revs[name], prev: r.grp.revs[name]}
		if e, ok := r.eps[name]; ok {
			c.op, c.ep = opPut, e
		}
		_, unsealed := r.grp.unsealed[name]
		r.mu.Unlock()
		if unsealed || r.grp.sealer == nil && c.op == opPut {
			return // its secrets are not known here: another instance restates it
		}
		out, err := r.propose(ctx, c)
		if err != nil {
			r.cfg.Logger.Warn("restating a managed endpoint after a concurrent change", "endpoint", name, "err", err)
			return
		}
		if out.applied {
			return
		}
	}
}

// newOrigin returns a random identifier of one write.
func newOrigin() string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (it panics if the system's source does)
	return hex.EncodeToString(b[:])
}
