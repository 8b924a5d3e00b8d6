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

// CopyWait bounds how long one read of an instance's copies waits, in
// all, for the copies in passing here: a store its holder is about to
// publish (the holder is opening its file, or stopping and reopening it
// to hand it over), and a checkpointed file whose holder is still closing
// it. A read that would otherwise find no copy at such a moment waits for
// it instead; the wait ends early when the holder publishes its store,
// gives up (Close included) or closes the file.
const CopyWait = time.Second

// readable is a store others may read while its holder applies to it or
// ships it: the holder publishes it, and retires it before it closes it.
// A read holds the read lock for its duration, so retire waits for the
// reads under way and no read starts on a retired store. While the holder
// is about to publish a store (expect), a read waits for it.
type readable struct {
	mu     sync.RWMutex
	o      *outbox.Outbox
	offset func() int64
	coming chan struct{} // closed when the expected store is published, or none will be
}

// expect says that a store is about to be published: reads wait for
// publish or retire, up to their deadline. The holder calls it before it
// takes the file's lock, so that a read that finds the file locked finds
// the store coming.
func (r *readable) expect() {
	r.mu.Lock()
	if r.coming == nil {
		r.coming = make(chan struct{})
	}
	r.mu.Unlock()
}

// publish makes o readable, at the changelog offset offset returns.
func (r *readable) publish(o *outbox.Outbox, offset func() int64) {
	r.mu.Lock()
	r.o, r.offset = o, offset
	r.arrivedLocked()
	r.mu.Unlock()
}

// retire ends the reads of the published store, waiting for those under
// way, and the waits for an expected one. It is idempotent.
func (r *readable) retire() {
	r.mu.Lock()
	r.o, r.offset = nil, nil
	r.arrivedLocked()
	r.mu.Unlock()
}

// arrivedLocked ends the waits for an expected store. r.mu must be held.
func (r *readable) arrivedLocked() {
	if r.coming != nil {
		close(r.coming)
		r.coming = nil
	}
}

// read calls fn with the published store, and reports whether there was
// one. While a store is expected, it waits for it until deadline.
func (r *readable) read(deadline time.Time, fn ReadFunc) bool {
	for {
		read, coming := r.readPublished(fn)
		if read {
			return true
		}
		if coming == nil || !waitUntil(coming, deadline) {
			return false
		}
	}
}

// readPublished calls fn with the published store and reports whether
// there was one; if not, it returns the channel to wait on for an
// expected one (nil when none is).
func (r *readable) readPublished(fn ReadFunc) (bool, <-chan struct{}) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.o == nil {
		return false, r.coming
	}
	fn(r.o, r.offset())
	return true, nil
}

// waitUntil waits for ch to be closed until deadline, and reports whether
// it was.
func waitUntil(ch <-chan struct{}, deadline time.Time) bool {
	d := time.Until(deadline)
	if d <= 0 {
		return false
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ch:
		return true
	case <-t.C:
		return false
	}
}

// ReadCheckpointed calls fn with partition p's store as its checkpoint
// left it, when its checkpoint is usable and the store is closed here, and
// reports whether it did. The store is opened read-only, under the file's
// shared lock, for the call only. A checkpoint is written just before its
// store is closed, so while the file is still held the open is tried again
// until deadline, as long as the checkpoint stays; a holder that opens
// the file meanwhile waits for the read (its LockTimeout). The checkpoint
// is read again once the file is locked, and must still vouch for the
// store: its last LSN is the store's.
func (g *Env) ReadCheckpointed(p int, deadline time.Time, fn ReadFunc) bool {
	o := g.openCheckpointed(p, deadline)
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

// lockTry is how long ReadCheckpointed waits between two tries to open a
// checkpointed store's file that its holder still has open.
const lockTry = 5 * time.Millisecond

// openCheckpointed opens partition p's store read-only while it has a
// checkpoint, trying again until deadline while another holds the file;
// nil when it cannot.
func (g *Env) openCheckpointed(p int, deadline time.Time) *outbox.Outbox {
	cfg := g.StoreConfig(p)
	cfg.ReadOnly, cfg.Sink, cfg.Hooks = true, nil, outbox.Hooks{}
	cfg.LockTimeout = time.Nanosecond // one try each time
	for {
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
