package outbox

// WakeForTest runs the delivery punctuation now (benchmarks of its cost).
func (o *Outbox) WakeForTest() { o.wake() }
