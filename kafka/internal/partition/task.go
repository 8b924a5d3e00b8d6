package partition

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	kafkago "github.com/segmentio/kafka-go"

	"github.com/outboxd/outbox/kafka/internal/changelog"
	"github.com/outboxd/outbox/kafka/internal/offsets"
	"github.com/outboxd/outbox/kafka/internal/retry"
	"github.com/outboxd/outbox/kafka/internal/ship"
	"github.com/outboxd/outbox/outbox"
)

// Task is one partition owned for one generation: it restores the
// partition's store, writes its fence, ingests the partition into it while
// the store delivers and its changelog is shipped, and hands it over when
// the generation ends.
type Task struct {
	g   *Env
	gen *kafkago.Generation
	pa  kafkago.PartitionAssignment
	p   int
	tr  *offsets.Tracker
	log *slog.Logger

	shippedLSN atomic.Uint64 // the store's changelog is shipped up to here
	// restoredTo is the changelog offset the restore read up to, and
	// written the records this ownership wrote after it: if the partition
	// then ends anywhere else, someone else wrote to it meanwhile.
	restoredTo int64
	written    atomic.Int64

	mu     sync.Mutex
	st     Status
	store  *outbox.Outbox // while active
	ship   *ship.Shipper  // while active
	copy   readable       // the store while restored or handed over, not served
	begun  time.Time      // restore start
	epochs int64          // highest epoch applied or written
}

// NewTask returns the task of partition pa, assigned in gen.
func NewTask(g *Env, gen *kafkago.Generation, pa kafkago.PartitionAssignment) *Task {
	t := &Task{
		g: g, gen: gen, pa: pa, p: pa.ID, tr: offsets.New(pa.Offset),
		log: g.Log.With("partition", pa.ID, "generation", gen.ID),
	}
	t.st = Status{Partition: pa.ID, State: Restoring, Generation: gen.ID, Committed: -1}
	return t
}

// Status returns the partition's status now.
func (t *Task) Status() Status {
	t.mu.Lock()
	st := t.st
	o := t.store
	if st.State == Restoring && !t.begun.IsZero() {
		st.Restore.Duration = time.Since(t.begun)
		if secs := st.Restore.Duration.Seconds(); secs > 0 {
			st.Restore.Rate = float64(st.Restore.Records) / secs
		}
	}
	t.mu.Unlock()
	if o != nil {
		s := o.Stats()
		st.Pending, st.Dead = s.Pending, s.Dead
	}
	if off, ok := t.g.Ingest.Committed()[t.p]; ok {
		st.Committed = off
	}
	return st
}

func (t *Task) update(fn func(*Status)) {
	t.mu.Lock()
	fn(&t.st)
	t.mu.Unlock()
}

// Partition returns the task's partition.
func (t *Task) Partition() int { return t.p }

// Shipped returns the LSN up to which the changelog of o, if o is this
// task's store, is shipped; holds is false when o is not its store, and
// more is false once this ownership ships nothing more (it ended).
func (t *Task) Shipped(o *outbox.Outbox) (lsn uint64, holds, more bool) {
	t.mu.Lock()
	holds = o != nil && t.store == o
	more = t.st.State == Active || t.st.State == HandingOver
	t.mu.Unlock()
	return t.shippedLSN.Load(), holds, more
}

// ToCommit returns the ingest offset that may be committed now: every
// record below it is durable in the store and its changelog entries are
// shipped. ok is false when there is nothing new to commit.
func (t *Task) ToCommit() (offset int64, ok bool) {
	return t.tr.ToCommit(t.shippedLSN.Load())
}

// CommittedAt records a successful commit of offset.
func (t *Task) CommittedAt(offset int64) { t.tr.CommittedAt(offset) }

// ActiveStore returns the store while the partition is active.
func (t *Task) ActiveStore() *outbox.Outbox {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.st.State != Active {
		return nil
	}
	return t.store
}

// Read calls fn with the partition's store while it is not served but
// holds what its changelog partition held up to an offset: from the
// checkpoint's offset while it is caught up from there, at the end of the
// changelog once restored until it serves, and while it is handed over.
// It reports whether it did. While the store is about to be readable (its
// kept file is being opened, or the store stops to be handed over), it
// waits for it until deadline.
func (t *Task) Read(deadline time.Time, fn ReadFunc) bool { return t.copy.read(deadline, fn) }

// Lag is the shipping lag of the active store.
func (t *Task) Lag() (uint64, time.Duration) {
	t.mu.Lock()
	sh := t.ship
	t.mu.Unlock()
	if sh == nil {
		return 0, 0
	}
	n, secs := sh.Lag()
	return n, time.Duration(secs * float64(time.Second))
}

// storeConfig is the configuration of the partition's store.
func (t *Task) storeConfig() outbox.Config {
	return t.g.StoreConfig(t.p)
}

// Run is the task's life in its generation. It returns only once gctx has
// ended and the hand-over is done: kafka-go ends the whole generation as
// soon as one of its functions returns.
func (t *Task) Run(gctx context.Context, hand *Handover) {
	o, end := t.restoreLoop(gctx)
	if o == nil {
		hand.shipped.Done()
		return
	}
	ok := t.fence(gctx)
	if !ok || gctx.Err() != nil {
		// Restored but never started: the store is the changelog up to end.
		hand.shipped.Done()
		<-hand.final
		t.closeWithCheckpoint(o, end, true)
		return
	}
	if err := t.start(o); err != nil {
		t.log.Error("kafka: starting the partition store", "err", err)
		hand.shipped.Done()
		<-hand.final
		t.copy.retire()
		_ = o.Stop(context.Background())
		return
	}
	sh := t.shipper(o)
	t.mu.Lock()
	t.store, t.ship = o, sh
	t.st.State = Active
	t.mu.Unlock()
	t.copy.retire() // served now

	shipCtx, stopShip := context.WithCancel(context.Background())
	var shipping sync.WaitGroup
	shipping.Add(1)
	go func() {
		defer shipping.Done()
		t.shipLoop(shipCtx, sh)
	}()

	t.g.Ingest.Consume(gctx, t.pa, t.tr, o)

	// The generation ended: hand the partition over. The store is
	// readable again once reopened for that; reads wait for it.
	t.copy.expect()
	t.update(func(s *Status) { s.State = HandingOver })
	stopShip()
	shipping.Wait()
	t.handOver(o, hand)
}

// start prepares the store (Env.BeforeStart) and starts it.
func (t *Task) start(o *outbox.Outbox) error {
	if t.g.BeforeStart != nil {
		if err := t.g.BeforeStart(t.p, o); err != nil {
			return err
		}
	}
	return o.Start()
}

// epoch returns the epoch this owner writes.
func (t *Task) epoch() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.st.Epoch
}

// handOver stops the store (deliveries finish within two thirds of the
// hand-over budget),
// ships the rest of its changelog, lets the committer commit the offsets,
// and closes the store with a checkpoint when all of that succeeded.
func (t *Task) handOver(o *outbox.Outbox, hand *Handover) {
	begin := time.Now()
	budget := t.g.Config.HandoverBudget
	deadline := begin.Add(budget * 2 / 3)
	stopCtx, cancel := context.WithDeadline(t.g.Work, deadline)
	defer cancel()
	if err := o.Stop(stopCtx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		t.log.Warn("kafka: stopping the partition store", "err", err)
	}
	t.mu.Lock()
	t.store, t.ship = nil, nil
	t.mu.Unlock()
	// Open it again, not started, to ship what the last deliveries wrote.
	o2, err := outbox.Open(t.g.Files.Store(t.p), t.storeConfig())
	if err != nil {
		t.log.Error("kafka: reopening the partition store to ship its changelog", "err", err)
		t.copy.retire()
		hand.shipped.Done()
		<-hand.final
		return
	}
	// It holds every record this ownership restored or wrote.
	t.copy.publish(o2, func() int64 { return t.restoredTo + t.written.Load() })
	shipCtx, cancelShip := context.WithDeadline(t.g.Work, begin.Add(budget))
	defer cancelShip()
	sh := t.shipper(o2)
	shipped := 0
	var shipErr error
	for {
		n, err := sh.ShipOnce(shipCtx)
		if err != nil {
			shipErr = err
			break
		}
		t.shippedLSN.Store(sh.Shipped())
		if n == 0 {
			break
		}
		shipped += n
	}
	hand.shipped.Done()
	<-hand.final // the committer's last commit
	if shipErr != nil {
		t.log.Warn("kafka: partition handed over without shipping all of its changelog; the next owner rebuilds it from what was shipped and reads the uncommitted records again",
			"err", shipErr)
	}
	kept := t.closeWithCheckpoint(o2, -1, shipErr == nil && hand.committedOK)
	t.log.Info("kafka: partition handed over", "shipped", shipped, "took", time.Since(begin).Round(time.Millisecond),
		"checkpoint", kept)
}

// closeWithCheckpoint closes the store, which nothing writes to any more,
// and, when keep is true, writes its checkpoint at the changelog
// partition's end offset (end, or read now when end is negative), so that
// the next ownership catches up from there. It reports whether it wrote the
// checkpoint. The checkpoint is written first, so that the store can be
// read (as a copy) until it is closed and from its file after; it is
// removed again when the close fails.
func (t *Task) closeWithCheckpoint(o *outbox.Outbox, end int64, keep bool) bool {
	kept := keep && t.keepCheckpoint(o.Changelog().LastLSN(), end)
	t.copy.retire()
	if err := o.Stop(context.Background()); err != nil {
		t.log.Warn("kafka: closing the partition store", "err", err)
		if kept {
			_ = removeDurably(t.g.Files.Checkpoint(t.p))
		}
		return false
	}
	return kept
}

// keepCheckpoint writes the checkpoint of the store, whose last LSN is
// last, at end (read now when negative), and reports whether it did.
func (t *Task) keepCheckpoint(last uint64, end int64) bool {
	if end < 0 {
		ctx, cancel := context.WithTimeout(t.g.Work, t.g.Config.DialTimeout)
		pr, err := t.g.changelogRange(ctx, t.p)
		cancel()
		if err != nil {
			t.log.Info("kafka: no checkpoint for the partition store; the next ownership rebuilds it", "err", err)
			return false
		}
		if want := t.restoredTo + t.written.Load(); pr.Last != want {
			// Another owner wrote to the partition during this ownership
			// (this instance was a zombie), or a write was repeated: the
			// store does not hold everything below the end.
			t.log.Info("kafka: no checkpoint for the partition store: its changelog partition holds records this ownership did not write; the next ownership rebuilds it",
				"end", pr.Last, "expected", want)
			return false
		}
		end = pr.Last
	}
	cp := checkpoint{Topic: t.g.Config.Topic, ChangelogTopic: t.g.Config.ChangelogTopic, Partition: t.p,
		Offset: end, Epoch: t.epoch(), LastLSN: last}
	if err := writeCheckpoint(t.g.Files.Checkpoint(t.p), cp); err != nil {
		t.log.Warn("kafka: writing the partition checkpoint", "err", err)
		return false
	}
	return true
}

// shipper returns the shipper of o's changelog to the partition's
// changelog partition, through the group's writer with this owner's stamp,
// from what this ownership has shipped.
func (t *Task) shipper(o *outbox.Outbox) *ship.Shipper {
	return ship.New(ship.Params{
		Config: t.g.Config.Ship, Store: o.Changelog(), Log: t.log, Counts: t.g.ShipCounts, Writer: t.g.Writer,
		Stamp:   &changelog.Stamp{Partition: t.p, Epoch: t.epoch(), Generation: t.gen.ID},
		Written: &t.written,
	}, t.shippedLSN.Load())
}

// shipLoop ships the active store's changelog until ctx ends.
func (t *Task) shipLoop(ctx context.Context, sh *ship.Shipper) {
	b := t.g.backoff()
	failing := false
	for ctx.Err() == nil {
		n, err := sh.ShipOnce(t.g.Work)
		t.shippedLSN.Store(sh.Shipped())
		switch {
		case errors.Is(err, outbox.ErrClosed):
			return
		case err != nil:
			t.g.ShipCounts.Errors.Add(1)
			if !failing {
				t.log.Warn("kafka: changelog shipping failed; retrying (offsets are committed only up to what is shipped)",
					"topic", t.g.Config.ChangelogTopic, "err", err)
				failing = true
			}
			if !retry.Sleep(ctx, b.NextBackOff()) {
				return
			}
		default:
			if failing {
				t.log.Info("kafka: changelog shipping resumed", "topic", t.g.Config.ChangelogTopic)
				failing = false
			}
			b.Reset()
			if n == 0 && !retry.Sleep(ctx, t.g.Config.Ship.Interval) {
				return
			}
		}
	}
}

// fence writes the owner's fence record, retrying until it is acknowledged
// or gctx ends.
func (t *Task) fence(gctx context.Context) bool {
	b := t.g.backoff()
	st := changelog.Stamp{Partition: t.p, Epoch: t.epoch(), Generation: t.gen.ID}
	for {
		ctx, cancel := context.WithTimeout(gctx, max(t.g.Config.DialTimeout, 5*time.Second))
		err := t.g.Writer.WriteMessages(ctx, changelog.FenceMessage(st))
		cancel()
		if err == nil {
			t.written.Add(1)
			return true
		}
		t.log.Warn("kafka: writing the fence record failed; retrying", "topic", t.g.Config.ChangelogTopic, "err", err)
		if !retry.Sleep(gctx, b.NextBackOff()) {
			return false
		}
	}
}
