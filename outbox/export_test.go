package outbox

import "github.com/outboxd/outbox/store"

// WakeForTest runs the delivery punctuation now (benchmarks of its cost).
func (o *Outbox) WakeForTest() { o.wake() }

// StoreForTest returns the store under the outbox, for tests that look at
// (or hold) it directly.
func (o *Outbox) StoreForTest() *store.Store { return o.st }
