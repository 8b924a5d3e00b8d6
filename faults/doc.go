// Package faults is the fault suite: it builds the real outboxd binary and
// proves, from the outside, that an acknowledged event is never lost.
//
// The scenarios are behind the "fault" build tag, so that go test ./... does
// not run them:
//
//   - crash loop: outboxd under load is SIGKILLed at random moments and
//     restarted, then drained. Every acknowledged event must arrive, an event
//     may arrive twice only if it was in flight at a kill (still pending in
//     the file the killed process left), and the file must pass bbolt's
//     consistency check after every kill. A companion test rolls the file
//     back to an earlier state between two runs, as a disk that lied about
//     fsync would, and requires the suite to report the loss.
//   - soak: a receiver answers a mix of 200, 404, 429, 500, timeouts and
//     connection resets; goroutines, heap and file size must stay bounded,
//     and pending must return to zero once the receiver heals.
//   - disk full: the database lives on a small tmpfs that fills up; enqueue
//     must fail with an error while the process stays up, nothing
//     acknowledged may be lost, and enqueue must work again once space is
//     freed; a disk that fills while deliveries are due must repeat none of
//     them, and /readyz must say why it is not ready.
//   - power loss: outboxd's data (its file; in Kafka mode its partition
//     stores, standby copies and checkpoints) lives on internal/powerfs,
//     a filesystem that drops every write not fsynced when the power is
//     cut. Under load, outboxd is SIGKILLed and the power cut, -cuts times:
//     alone, with managed endpoints changed around the cuts, and as a
//     two-instance Kafka group. Nothing acknowledged may be lost, no
//     deleted event or endpoint may come back, and every file must pass
//     bbolt's check; an outboxd built with the faultnosync tag (stores that
//     never fsync) must be reported losing events.
//   - network faults in group mode: three instances on a broker in the test
//     process, each instance's broker traffic through a proxy of its own
//     (testkit.KafkaFront) and the receiver behind one more: the broker
//     black-holed for twice the session timeout, one instance cut off
//     from the broker but not from the receiver (a zombie owner), 50
//     connection resets, latency with a bandwidth cap. Every record the
//     broker acknowledged must be delivered, and no changelog record of a
//     fenced owner may be one that a restore applies.
//   - the seeded campaign: one seed draws a schedule of faults (SIGKILL,
//     power cut, receiver answers, network faults) and the workload run
//     during each (single events, batches, keyed events in order, a
//     managed endpoint that moves, deletes, dead-letter replays). The
//     database lives on internal/powerfs; a power cut SIGKILLs outboxd and
//     drops what it had not synced, keeping a prefix or tearing a page as
//     the schedule drew, and the ledger holds it to the same account as a
//     SIGKILL. The seed and a hash of the schedule are printed first; the
//     same seed draws the same schedule. At the end: nothing acknowledged
//     lost, no deleted event back, per-key order, each webhook-id bound to
//     its own payload, bbolt's check (on a copy taken out of the mount).
//
// Short forms (the CI's .ci/faults):
//
//	go test -tags fault -count=1 ./faults/
//
// Long forms:
//
//	go test -tags fault -count=1 -timeout 30m ./faults/ -kills 100 -soak 10m -cuts 67 -faults 1000
//
// A campaign replays from its seed:
//
//	go test -tags fault -count=1 -run TestCampaign ./faults/ -seed S -faults N
package faults
