package partition

import "sync"

// Handover coordinates the end of a generation: every task ships its
// store's changelog, then the group commits the offsets a last time, and
// only then do the tasks close their stores, with a checkpoint when the
// commit succeeded.
type Handover struct {
	shipped     sync.WaitGroup
	final       chan struct{}
	committedOK bool
}

// NewHandover returns the hand-over of a generation of n tasks.
func NewHandover(n int) *Handover {
	h := &Handover{final: make(chan struct{})}
	h.shipped.Add(n)
	return h
}

// Commit waits until every task has shipped its store, makes the last
// commit of the generation with commit (which reports whether it
// succeeded), and lets the tasks close their stores.
func (h *Handover) Commit(commit func() bool) {
	h.shipped.Wait()
	h.committedOK = commit()
	close(h.final)
}
