package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
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

// task is one partition owned for one generation: it restores the
// partition's store, writes its fence, ingests the partition into it while
// the store delivers and its changelog is shipped, and hands it over when
// the generation ends.
type task struct {
	g   *Group
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
	st     PartitionStatus
	store  *outbox.Outbox // while active
	ship   *ship.Shipper  // while active
	begun  time.Time      // restore start
	epochs int64          // highest epoch applied or written
}

func newTask(g *Group, gen *kafkago.Generation, pa kafkago.PartitionAssignment) *task {
	t := &task{
		g: g, gen: gen, pa: pa, p: pa.ID, tr: offsets.New(pa.Offset),
		log: g.log.With("partition", pa.ID, "generation", gen.ID),
	}
	t.st = PartitionStatus{Partition: pa.ID, State: PartitionRestoring, Generation: gen.ID, Committed: -1}
	return t
}

// status returns the partition's status now.
func (t *task) status() PartitionStatus {
	t.mu.Lock()
	st := t.st
	o := t.store
	if st.State == PartitionRestoring && !t.begun.IsZero() {
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
	if off, ok := t.g.in.committedOffsets()[t.p]; ok {
		st.Committed = off
	}
	return st
}

func (t *task) update(fn func(*PartitionStatus)) {
	t.mu.Lock()
	fn(&t.st)
	t.mu.Unlock()
}

// activeStore returns the store while the partition is active.
func (t *task) activeStore() *outbox.Outbox {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.st.State != PartitionActive {
		return nil
	}
	return t.store
}

// lag is the shipping lag of the active store.
func (t *task) lag() (uint64, time.Duration) {
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
func (t *task) storeConfig() outbox.Config {
	return t.g.partitionConfig(t.p)
}

// run is the task's life in its generation. It returns only once gctx has
// ended and the hand-over is done: kafka-go ends the whole generation as
// soon as one of its functions returns.
func (t *task) run(gctx context.Context, hand *handover) {
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
	if err := o.Start(); err != nil {
		t.log.Error("kafka: starting the partition store", "err", err)
		hand.shipped.Done()
		<-hand.final
		_ = o.Stop(context.Background())
		return
	}
	sh := t.shipper(o)
	t.mu.Lock()
	t.store, t.ship = o, sh
	t.st.State = PartitionActive
	t.mu.Unlock()

	shipCtx, stopShip := context.WithCancel(context.Background())
	var shipping sync.WaitGroup
	shipping.Add(1)
	go func() {
		defer shipping.Done()
		t.shipLoop(shipCtx, sh)
	}()

	cl := o.Changelog()
	t.g.in.consume(gctx, t.pa, t.tr, partStore{o: o, lsn: cl.LastLSN}, func() {})

	// The generation ended: hand the partition over.
	t.update(func(s *PartitionStatus) { s.State = PartitionHandingOver })
	stopShip()
	shipping.Wait()
	t.handOver(o, hand)
}

// epoch returns the epoch this owner writes.
func (t *task) epoch() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.st.Epoch
}

// handOver stops the store (deliveries finish within two thirds of the
// hand-over budget),
// ships the rest of its changelog, lets the committer commit the offsets,
// and closes the store with a checkpoint when all of that succeeded.
func (t *task) handOver(o *outbox.Outbox, hand *handover) {
	begin := time.Now()
	budget := t.g.handoverBudget()
	deadline := begin.Add(budget * 2 / 3)
	stopCtx, cancel := context.WithDeadline(t.g.work, deadline)
	defer cancel()
	if err := o.Stop(stopCtx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		t.log.Warn("kafka: stopping the partition store", "err", err)
	}
	t.mu.Lock()
	t.store, t.ship = nil, nil
	t.mu.Unlock()
	// Open it again, not started, to ship what the last deliveries wrote.
	o2, err := outbox.Open(t.g.storePath(t.p), t.storeConfig())
	if err != nil {
		t.log.Error("kafka: reopening the partition store to ship its changelog", "err", err)
		hand.shipped.Done()
		<-hand.final
		return
	}
	shipCtx, cancelShip := context.WithDeadline(t.g.work, begin.Add(budget))
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

// closeWithCheckpoint closes the store and, when keep is true, writes its
// checkpoint at the changelog partition's end offset (end, or read now when
// end is negative), so that the next ownership catches up from there. It
// reports whether it wrote the checkpoint.
func (t *task) closeWithCheckpoint(o *outbox.Outbox, end int64, keep bool) bool {
	last := o.Changelog().LastLSN()
	if err := o.Stop(context.Background()); err != nil {
		t.log.Warn("kafka: closing the partition store", "err", err)
		return false
	}
	if !keep {
		return false
	}
	if end < 0 {
		ctx, cancel := context.WithTimeout(t.g.work, t.g.cfg.DialTimeout)
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
	cp := checkpoint{Topic: t.g.cfg.Topic, ChangelogTopic: t.g.cfg.ChangelogTopic, Partition: t.p,
		Offset: end, Epoch: t.epoch(), LastLSN: last}
	if err := writeCheckpoint(t.g.checkpointPath(t.p), cp); err != nil {
		t.log.Warn("kafka: writing the partition checkpoint", "err", err)
		return false
	}
	return true
}

// shipper returns the shipper of o's changelog to the partition's
// changelog partition, through the group's writer with this owner's stamp,
// from what this ownership has shipped.
func (t *task) shipper(o *outbox.Outbox) *ship.Shipper {
	return ship.New(ship.Params{
		Config: t.g.cfg.shipping(), Store: o.Changelog(), Log: t.log, Counts: &t.g.met.shipping, Writer: t.g.w,
		Stamp:   &changelog.Stamp{Partition: t.p, Epoch: t.epoch(), Generation: t.gen.ID},
		Written: &t.written,
	}, t.shippedLSN.Load())
}

// shipLoop ships the active store's changelog until ctx ends.
func (t *task) shipLoop(ctx context.Context, sh *ship.Shipper) {
	b := newBackoff(t.g.cfg)
	failing := false
	for ctx.Err() == nil {
		n, err := sh.ShipOnce(t.g.work)
		t.shippedLSN.Store(sh.Shipped())
		switch {
		case errors.Is(err, outbox.ErrClosed):
			return
		case err != nil:
			t.g.met.shipping.Errors.Add(1)
			if !failing {
				t.log.Warn("kafka: changelog shipping failed; retrying (offsets are committed only up to what is shipped)",
					"topic", t.g.cfg.ChangelogTopic, "err", err)
				failing = true
			}
			if !retry.Sleep(ctx, b.NextBackOff()) {
				return
			}
		default:
			if failing {
				t.log.Info("kafka: changelog shipping resumed", "topic", t.g.cfg.ChangelogTopic)
				failing = false
			}
			b.Reset()
			if n == 0 && !retry.Sleep(ctx, t.g.cfg.ShipInterval) {
				return
			}
		}
	}
}

// fence writes the owner's fence record, retrying until it is acknowledged
// or gctx ends.
func (t *task) fence(gctx context.Context) bool {
	b := newBackoff(t.g.cfg)
	st := changelog.Stamp{Partition: t.p, Epoch: t.epoch(), Generation: t.gen.ID}
	for {
		ctx, cancel := context.WithTimeout(gctx, max(t.g.cfg.DialTimeout, 5*time.Second))
		err := t.g.w.WriteMessages(ctx, changelog.FenceMessage(st))
		cancel()
		if err == nil {
			t.written.Add(1)
			return true
		}
		t.log.Warn("kafka: writing the fence record failed; retrying", "topic", t.g.cfg.ChangelogTopic, "err", err)
		if !retry.Sleep(gctx, b.NextBackOff()) {
			return false
		}
	}
}

// restoreLoop restores the store, retrying with backoff while it fails,
// until it succeeds or gctx ends (nil). It returns the store, restored but
// not started, and the changelog offset it was restored up to.
func (t *task) restoreLoop(gctx context.Context) (*outbox.Outbox, int64) {
	b := newBackoff(t.g.cfg)
	for {
		o, end, err := t.restore(gctx)
		if err == nil {
			return o, end
		}
		if gctx.Err() != nil {
			return nil, 0
		}
		t.g.restoreFailures.Add(1)
		t.update(func(s *PartitionStatus) { s.State, s.Error = PartitionFailed, err.Error() })
		t.log.Error("kafka: restoring the partition store failed; nothing of it is delivered, retrying", "err", err)
		if !retry.Sleep(gctx, b.NextBackOff()) {
			return nil, 0
		}
	}
}

// restore opens the partition's local store and catches it up from its
// checkpoint, or rebuilds it from the whole changelog partition into a new
// file that replaces the old one only once complete. On failure no store is
// left that a later attempt would trust.
func (t *task) restore(gctx context.Context) (*outbox.Outbox, int64, error) {
	g := t.g
	path, tmp := g.storePath(t.p), g.storePath(t.p)+".restoring"
	ctx, cancel := context.WithTimeout(gctx, g.cfg.DialTimeout)
	pr, err := g.changelogRange(ctx, t.p)
	cancel()
	if err != nil {
		return nil, 0, err
	}
	o, mode, from, maxEpoch, err := t.open(pr, tmp)
	if err != nil {
		return nil, 0, err
	}

	begin := time.Now()
	t.mu.Lock()
	t.begun = begin
	t.st.State, t.st.Error = PartitionRestoring, ""
	t.st.Restore = RestoreStatus{Mode: mode, From: from, To: pr.Last, Remaining: max(pr.Last-from, 0)}
	t.mu.Unlock()

	applied, fenced, maxEpoch, err := t.apply(gctx, o, changelog.Range{ID: t.p, First: from, Last: pr.Last}, maxEpoch)
	if err == nil && mode == RestoreRebuild {
		o, err = t.install(o, tmp, path)
	}
	if err == nil {
		// What the restore wrote is in the changelog already.
		err = o.Changelog().MarkShipped(gctx, o.Changelog().LastLSN())
	}
	if err != nil {
		if o != nil {
			_ = o.Stop(context.Background())
		}
		_ = removeDurably(tmp, path)
		return nil, 0, err
	}
	t.shippedLSN.Store(o.Changelog().LastLSN())
	t.restoredTo = pr.Last
	epoch := max(int64(t.gen.ID), maxEpoch+1)
	t.restored(mode, applied, fenced, from, pr.Last, epoch, begin)
	return o, pr.Last, nil
}

// open opens the store to restore: the kept one when its checkpoint is
// usable for pr (caught up from the checkpoint's offset and epoch), else a
// new one at tmp, rebuilt from the partition's first offset.
func (t *task) open(pr changelog.Range, tmp string) (o *outbox.Outbox, mode string, from, maxEpoch int64, err error) {
	mode, from = RestoreRebuild, pr.First
	o, cp, why, err := keptStore(t.g, t.p, pr)
	if why != "" {
		t.log.Info("kafka: rebuilding the partition store", "reason", why)
	}
	if err != nil {
		return nil, "", 0, 0, err
	}
	if cp != nil {
		mode, from, maxEpoch = RestoreCheckpoint, cp.Offset, cp.Epoch
	}
	if o == nil {
		if err := removeDurably(tmp); err != nil {
			return nil, "", 0, 0, err
		}
		if o, err = outbox.Open(tmp, t.storeConfig()); err != nil {
			return nil, "", 0, 0, fmt.Errorf("creating the partition store %s: %w", tmp, err)
		}
	}
	return o, mode, from, maxEpoch, nil
}

// install closes the rebuilt store o, moves it from tmp to path durably
// and opens it there. On failure it returns no store.
func (t *task) install(o *outbox.Outbox, tmp, path string) (*outbox.Outbox, error) {
	if err := o.Stop(context.Background()); err != nil {
		return nil, err
	}
	if err := os.Rename(tmp, path); err != nil {
		return nil, err
	}
	if err := syncDir(t.g.sc.Dir); err != nil {
		return nil, err
	}
	return outbox.Open(path, t.storeConfig())
}

// restored records and logs a finished restore.
func (t *task) restored(mode string, applied, fenced, from, to, epoch int64, begin time.Time) {
	took := time.Since(begin)
	rate := 0.0
	if took > 0 {
		rate = float64(applied) / took.Seconds()
	}
	t.mu.Lock()
	t.st.Epoch = epoch
	t.st.Restore.Records, t.st.Restore.Remaining, t.st.Restore.Fenced = applied, 0, fenced
	t.st.Restore.Duration, t.st.Restore.Rate, t.st.Restore.Done = took, rate, true
	t.mu.Unlock()
	if mode == RestoreCheckpoint {
		t.g.restoresCheckpoint.Add(1)
	} else {
		t.g.restoresRebuild.Add(1)
	}
	t.log.Info("kafka: partition restored", "mode", mode, "records", applied, "records_per_second", int64(rate),
		"fenced", fenced, "from", from, "to", to, "epoch", epoch, "took", took.Round(time.Millisecond))
}

// keptStore opens the kept local store of g's partition p when its
// checkpoint is usable for the changelog range pr and the store still
// matches it, and returns the store with that checkpoint; otherwise no
// store, and why not ("" when there is neither checkpoint nor store). Either
// way it then removes the checkpoint durably: from here on the store
// changes, and a crash must not leave a checkpoint that vouches for it.
// When that fails it stops the store and returns the error.
func keptStore(g *Group, p int, pr changelog.Range) (o *outbox.Outbox, cp *checkpoint, why string, err error) {
	path, cpPath := g.storePath(p), g.checkpointPath(p)
	if cp, why = usableCheckpoint(g, p, cpPath, pr); cp != nil {
		o, err = outbox.Open(path, g.partitionConfig(p))
		switch {
		case err != nil:
			why = "the local store does not open: " + err.Error()
		case o.Changelog().LastLSN() != cp.LastLSN:
			why = fmt.Sprintf("the local store changed after its checkpoint (LSN %d, checkpoint %d)", o.Changelog().LastLSN(), cp.LastLSN)
			_ = o.Stop(context.Background())
			o = nil
		}
		if o == nil {
			cp = nil
		}
	}
	if err := removeDurably(cpPath); err != nil {
		if o != nil {
			_ = o.Stop(context.Background())
		}
		return nil, nil, why, fmt.Errorf("removing checkpoint %s: %w", cpPath, err)
	}
	return o, cp, why, nil
}

// usableCheckpoint reads the checkpoint of g's partition p at path and says
// why it cannot be used ("" when there is none at all).
func usableCheckpoint(g *Group, p int, path string, pr changelog.Range) (*checkpoint, string) {
	cp, err := readCheckpoint(path)
	switch {
	case err != nil:
		return nil, err.Error()
	case cp == nil:
		if _, err := os.Stat(g.storePath(p)); err == nil {
			return nil, "the local store has no checkpoint (it was not closed cleanly)"
		}
		return nil, ""
	case cp.Topic != g.cfg.Topic || cp.ChangelogTopic != g.cfg.ChangelogTopic || cp.Partition != p:
		return nil, fmt.Sprintf("the checkpoint is of %s/%s partition %d", cp.Topic, cp.ChangelogTopic, cp.Partition)
	case cp.Offset < pr.First:
		return nil, fmt.Sprintf("the changelog partition starts at offset %d, past the checkpoint %d", pr.First, cp.Offset)
	case cp.Offset > pr.Last:
		return nil, fmt.Sprintf("the checkpoint %d is past the changelog partition's end %d (was the topic recreated?)", cp.Offset, pr.Last)
	}
	return cp, ""
}

// apply reads the changelog partition over pr and applies it to o in
// batches, skipping fenced records: a record whose epoch is below the
// highest one seen so far was written by an owner that had lost the
// partition. Entries are ordered by offset (their LSNs come from the
// stores of several owners).
//
// One goroutine applies the batches, in order, while the next one is read
// and decoded: a batch's commit (two fsyncs) and the reading of the next
// overlap, and a batch holds up to taskApplyBatch entries or
// taskApplyBytes, so that a commit's fsyncs are shared by many records.
func (t *task) apply(ctx context.Context, o *outbox.Outbox, pr changelog.Range, maxEpoch int64) (applied, fenced, epoch int64, err error) {
	topic := t.g.cfg.ChangelogTopic
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	batches := make(chan []outbox.ChangelogEntry, 1)
	applyDone := make(chan error, 1)
	go func() {
		var err error
		applied, err = t.applyBatches(ctx, cancel, o, batches)
		applyDone <- err
	}()

	b := &applyBatcher{ctx: ctx, out: batches}
	b.reset()
	var read int64 // entries decoded and handed to the applier
	begin, lastLog := time.Now(), time.Now()
	err = changelog.ReadRange(ctx, t.g.cfg.reading(t.g.conns), pr, func(m *kafkago.Message) error {
		if time.Since(lastLog) >= restoreLogEvery {
			lastLog = time.Now()
			t.log.Info("kafka: restoring the partition store", "records", read,
				"records_per_second", int64(float64(read)/time.Since(begin).Seconds()),
				"remaining", max(pr.Last-m.Offset, 0), "fenced", fenced)
		}
		en, ok, e, skipped, err := fencedEntry(m, topic, t.p, maxEpoch)
		maxEpoch = e
		if err != nil {
			return err
		}
		if skipped {
			fenced++
		}
		if ok {
			read++
			if err := b.add(en, len(m.Key)+len(m.Value)); err != nil {
				return err
			}
		}
		t.update(func(s *PartitionStatus) {
			s.Restore.Records = read
			s.Restore.Fenced = fenced
			s.Restore.Remaining = max(pr.Last-m.Offset-1, 0)
		})
		return nil
	})
	if err == nil {
		err = b.send()
	}
	close(batches)
	// The applier's error comes first: the reader's is then only the
	// cancellation it caused.
	if aerr := <-applyDone; aerr != nil {
		err = aerr
	}
	return applied, fenced, maxEpoch, err
}

// applyBatches applies the batches to o in order, and returns how many
// entries it applied. After a failure it cancels ctx with the error and
// drains batches (the reader stops at the cancellation).
func (t *task) applyBatches(ctx context.Context, cancel context.CancelCauseFunc, o *outbox.Outbox, batches <-chan []outbox.ChangelogEntry) (int64, error) {
	var applied int64
	var err error
	for b := range batches {
		if err != nil {
			continue // drain: the reader stops at the cancellation
		}
		if err = o.Restore(ctx, b); err != nil {
			err = fmt.Errorf("kafka: restore %s/%d: apply: %w", t.g.cfg.ChangelogTopic, t.p, err)
			cancel(err)
			continue
		}
		applied += int64(len(b))
	}
	return applied, err
}

// applyBatcher gathers a restore's entries into batches of up to
// taskApplyBatch entries or taskApplyBytes and hands them to the applier.
type applyBatcher struct {
	ctx   context.Context
	out   chan<- []outbox.ChangelogEntry
	batch []outbox.ChangelogEntry
	size  int
}

func (b *applyBatcher) reset() {
	b.batch, b.size = make([]outbox.ChangelogEntry, 0, taskApplyBatch), 0
}

// add adds an entry whose record is size bytes, sending the batch when it
// is full.
func (b *applyBatcher) add(en outbox.ChangelogEntry, size int) error {
	b.batch = append(b.batch, en)
	b.size += size
	if len(b.batch) == cap(b.batch) || b.size >= taskApplyBytes {
		return b.send()
	}
	return nil
}

// send hands the batch, if any, to the applier, unless ctx ends first.
func (b *applyBatcher) send() error {
	if len(b.batch) == 0 {
		return nil
	}
	select {
	case b.out <- b.batch:
	case <-b.ctx.Done():
		return context.Cause(b.ctx)
	}
	b.reset()
	return nil
}

// restoreLogEvery is how often a restore under way logs its progress.
const restoreLogEvery = 5 * time.Second

// taskApplyBatch and taskApplyBytes bound a batch of a partition store's
// restore (one Outbox.Restore call): in entries, and in the bytes of their
// records' keys and values.
const (
	taskApplyBatch = 4000
	taskApplyBytes = 8 << 20
)

// changelogRange returns the first and end offsets of changelog partition p.
func (g *Group) changelogRange(ctx context.Context, p int) (changelog.Range, error) {
	parts, err := changelogOffsets(ctx, g.cfg, g.conns)
	if err != nil {
		return changelog.Range{}, err
	}
	for _, pr := range parts {
		if pr.ID == p {
			return pr, nil
		}
	}
	return changelog.Range{}, &TopicError{Topic: g.cfg.ChangelogTopic, Partition: p, Reason: fmt.Sprintf(
		"missing: the changelog topic has %d partitions and the ingest topic %s has more; give the changelog topic the ingest topic's partition count",
		len(parts), g.cfg.Topic)}
}
