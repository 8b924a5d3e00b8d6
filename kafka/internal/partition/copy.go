package partition

import (
	"context"
	"errors"
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
// left it, when its checkpoint is usable and the store is closed here, and
// reports whether it did. The store is opened read-only, under the file's
// shared lock, for the call only. A checkpoint is written just before its
// store is closed, so while the file is still held the open is tried again
// for up to lockWait, as long as the checkpoint stays; a holder that opens
// the file meanwhile waits for the read (its LockTimeout). The checkpoint
// is read again once the file is locked, and must still vouch for the
// store: its last LSN is the store's.
func (g *Env) ReadCheckpointed(p int, fn ReadFunc) bool {
	o := g.openCheckpointed(p)
	if o == nil {
		return false
	}
	defer o.Stop(context.Background())
	cp, err := readCheckpoint(g.Files.Checkpoint(p))
	if err != nil || !g.Files.matches(cp, p) || cp.LastLSN != o.Changelog().LastLSN() {
		return false
	}
	fn(o, cp.Offset)
	return true
}

// lockWait bounds how long ReadCheckpointed waits for the holder of a
// checkpointed store's file to close it, in tries lockTry apart.
const (
	lockWait = 100 * time.Millisecond
	lockTry  = 5 * time.Millisecond
)

// openCheckpointed opens partition p's store read-only while it has a
// checkpoint, trying again while another holds the file; nil when it
// cannot.
func (g *Env) openCheckpointed(p int) *outbox.Outbox {
	cfg := g.StoreConfig(p)
	cfg.ReadOnly, cfg.Sink, cfg.Hooks = true, nil, outbox.Hooks{}
	cfg.LockTimeout = time.Nanosecond // one try each time
	for deadline := time.Now().Add(lockWait); ; {
		cp, err := readCheckpoint(g.Files.Checkpoint(p))
		if err != nil || !g.Files.matches(cp, p) {
			return nil
		}
		o, err := outbox.Open(g.Files.Store(p), cfg)
		switch {
		case err == nil:
			return o
		case !errors.Is(err, outbox.ErrLocked) || time.Now().After(deadline):
			return nil
		}
		time.Sleep(lockTry)
	}
}

// matches reports whether cp is a checkpoint of partition p of these
// topics.
func (f Files) matches(cp *checkpoint, p int) bool {
	return cp != nil && cp.Topic == f.Topic && cp.ChangelogTopic == f.ChangelogTopic && cp.Partition == p
}
