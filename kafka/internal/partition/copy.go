package partition

import (
	"context"
	"sync"
	"time"

	"github.com/outboxd/outbox/outbox"
)

// ReadFunc reads a copy of a partition's store that this instance holds
// but does not serve: o is valid only during the call and must not be
// written to nor kept, and offset is the changelog offset the copy holds
// every record below. A ReadFunc must not block: the copy's holder waits
// for it before it closes the store.
type ReadFunc func(o *outbox.Outbox, offset int64)

// readable is a store others may read while its holder applies to it or
// ships it: the holder publishes it, and retires it before it closes it.
// A read holds the read lock for its duration, so retire waits for the
// reads under way and no read starts on a retired store.
type readable struct {
	mu     sync.RWMutex
	o      *outbox.Outbox
	offset func() int64
}

// publish makes o readable, at the changelog offset offset returns.
func (r *readable) publish(o *outbox.Outbox, offset func() int64) {
	r.mu.Lock()
	r.o, r.offset = o, offset
	r.mu.Unlock()
}

// retire ends the reads of the published store, waiting for those under
// way. It is idempotent.
func (r *readable) retire() {
	r.mu.Lock()
	r.o, r.offset = nil, nil
	r.mu.Unlock()
}

// read calls fn with the published store, and reports whether there was
// one.
func (r *readable) read(fn ReadFunc) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.o == nil {
		return false
	}
	fn(r.o, r.offset())
	return true
}

// ReadCheckpointed calls fn with partition p's store as its checkpoint
// left it, when the store is closed here and its checkpoint is usable, and
// reports whether it did. The store is opened read-only, under the file's
// shared lock, for the call only; when a task or standby of this instance
// holds the file, the lock is not waited for and nothing is read. A task
// or standby that opens the file meanwhile waits for the read (its
// LockTimeout). The checkpoint is read again once the file is locked, and
// must still vouch for the store: its last LSN is the store's.
func (g *Env) ReadCheckpointed(p int, fn ReadFunc) bool {
	f := g.Files
	cp, err := readCheckpoint(f.Checkpoint(p))
	if err != nil || !f.matches(cp, p) {
		return false
	}
	cfg := g.StoreConfig(p)
	cfg.ReadOnly, cfg.Sink, cfg.Hooks = true, nil, outbox.Hooks{}
	cfg.LockTimeout = time.Nanosecond // one try: a held lock means the store is in use
	o, err := outbox.Open(f.Store(p), cfg)
	if err != nil {
		return false
	}
	defer o.Stop(context.Background())
	cp, err = readCheckpoint(f.Checkpoint(p))
	if err != nil || !f.matches(cp, p) || cp.LastLSN != o.Changelog().LastLSN() {
		return false
	}
	fn(o, cp.Offset)
	return true
}

// matches reports whether cp is a checkpoint of partition p of these
// topics.
func (f Files) matches(cp *checkpoint, p int) bool {
	return cp != nil && cp.Topic == f.Topic && cp.ChangelogTopic == f.ChangelogTopic && cp.Partition == p
}
