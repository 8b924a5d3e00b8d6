package partition

import (
	"context"
	"fmt"
	"os"
	"time"

	kafkago "github.com/segmentio/kafka-go"

	"github.com/outboxd/outbox/kafka/internal/changelog"
	"github.com/outboxd/outbox/kafka/internal/retry"
	"github.com/outboxd/outbox/outbox"
)

// restoreLoop restores the store, retrying with backoff while it fails,
// until it succeeds or gctx ends (nil). It returns the store, restored but
// not started, and the changelog offset it was restored up to.
func (t *Task) restoreLoop(gctx context.Context) (*outbox.Outbox, int64) {
	b := t.g.backoff()
	for {
		o, end, err := t.restore(gctx)
		if err == nil {
			return o, end
		}
		if gctx.Err() != nil {
			return nil, 0
		}
		t.g.Counts.RestoreFailures.Add(1)
		t.update(func(s *Status) { s.State, s.Error = Failed, err.Error() })
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
func (t *Task) restore(gctx context.Context) (*outbox.Outbox, int64, error) {
	g := t.g
	path, tmp := g.Files.Store(t.p), g.Files.Store(t.p)+".restoring"
	ctx, cancel := context.WithTimeout(gctx, g.Config.DialTimeout)
	pr, err := g.changelogRange(ctx, t.p)
	cancel()
	if err != nil {
		return nil, 0, err
	}
	// A kept store is readable as soon as it is open: reads wait for it
	// meanwhile, as they cannot read its file any more.
	t.copy.expect()
	o, mode, from, maxEpoch, err := t.open(pr, tmp)
	if err != nil {
		t.copy.retire()
		return nil, 0, err
	}
	if mode == ModeCheckpoint {
		t.copy.publish(o, func() int64 { return from })
	} else {
		t.copy.retire() // nothing to read until it is rebuilt
	}

	begin := time.Now()
	t.mu.Lock()
	t.begun = begin
	t.st.State, t.st.Error = Restoring, ""
	t.st.Restore = RestoreStatus{Mode: mode, From: from, To: pr.Last, Remaining: max(pr.Last-from, 0)}
	t.mu.Unlock()

	applied, fenced, maxEpoch, err := t.apply(gctx, o, changelog.Range{ID: t.p, First: from, Last: pr.Last}, maxEpoch)
	if err == nil && mode == ModeRebuild {
		o, err = t.install(o, tmp, path)
	}
	if err == nil {
		// What the restore wrote is in the changelog already.
		err = o.Changelog().MarkShipped(gctx, o.Changelog().LastLSN())
	}
	if err != nil {
		t.copy.retire()
		if o != nil {
			_ = o.Stop(context.Background())
		}
		_ = removeDurably(tmp, path)
		return nil, 0, err
	}
	t.shippedLSN.Store(o.Changelog().LastLSN())
	t.restoredTo = pr.Last
	t.copy.publish(o, func() int64 { return pr.Last })
	epoch := max(int64(t.gen.ID), maxEpoch+1)
	t.restored(mode, applied, fenced, from, pr.Last, epoch, begin)
	return o, pr.Last, nil
}

// open opens the store to restore: the kept one when its checkpoint is
// usable for pr (caught up from the checkpoint's offset and epoch), else a
// new one at tmp, rebuilt from the partition's first offset.
func (t *Task) open(pr changelog.Range, tmp string) (o *outbox.Outbox, mode string, from, maxEpoch int64, err error) {
	mode, from = ModeRebuild, pr.First
	o, cp, why, err := keptStore(t.g, t.p, pr)
	if why != "" {
		t.log.Info("kafka: rebuilding the partition store", "reason", why)
	}
	if err != nil {
		return nil, "", 0, 0, err
	}
	if cp != nil {
		mode, from, maxEpoch = ModeCheckpoint, cp.Offset, cp.Epoch
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
func (t *Task) install(o *outbox.Outbox, tmp, path string) (*outbox.Outbox, error) {
	if err := o.Stop(context.Background()); err != nil {
		return nil, err
	}
	if err := os.Rename(tmp, path); err != nil {
		return nil, err
	}
	if err := syncDir(t.g.Files.Dir); err != nil {
		return nil, err
	}
	return outbox.Open(path, t.storeConfig())
}

// restored records and logs a finished restore.
func (t *Task) restored(mode string, applied, fenced, from, to, epoch int64, begin time.Time) {
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
	if mode == ModeCheckpoint {
		t.g.Counts.RestoresCheckpoint.Add(1)
	} else {
		t.g.Counts.RestoresRebuild.Add(1)
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
func keptStore(g *Env, p int, pr changelog.Range) (o *outbox.Outbox, cp *checkpoint, why string, err error) {
	path, cpPath := g.Files.Store(p), g.Files.Checkpoint(p)
	if cp, why = usableCheckpoint(g, p, cpPath, pr); cp != nil {
		o, err = outbox.Open(path, g.StoreConfig(p))
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
func usableCheckpoint(g *Env, p int, path string, pr changelog.Range) (*checkpoint, string) {
	cp, err := readCheckpoint(path)
	switch {
	case err != nil:
		return nil, err.Error()
	case cp == nil:
		if _, err := os.Stat(g.Files.Store(p)); err == nil {
			return nil, "the local store has no checkpoint (it was not closed cleanly)"
		}
		return nil, ""
	case cp.Topic != g.Config.Topic || cp.ChangelogTopic != g.Config.ChangelogTopic || cp.Partition != p:
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
// overlap, and a batch holds up to ApplyBatch entries or
// applyBytes, so that a commit's fsyncs are shared by many records.
func (t *Task) apply(ctx context.Context, o *outbox.Outbox, pr changelog.Range, maxEpoch int64) (applied, fenced, epoch int64, err error) {
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
	err = changelog.ReadRange(ctx, t.g.Reading, pr, func(m *kafkago.Message) error {
		if time.Since(lastLog) >= restoreLogEvery {
			lastLog = time.Now()
			t.log.Info("kafka: restoring the partition store", "records", read,
				"records_per_second", int64(float64(read)/time.Since(begin).Seconds()),
				"remaining", max(pr.Last-m.Offset, 0), "fenced", fenced)
		}
		en, ok, e, skipped, err := t.g.fencedEntry(m, t.p, maxEpoch)
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
		t.update(func(s *Status) {
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
func (t *Task) applyBatches(ctx context.Context, cancel context.CancelCauseFunc, o *outbox.Outbox, batches <-chan []outbox.ChangelogEntry) (int64, error) {
	var applied int64
	var err error
	for b := range batches {
		if err != nil {
			continue // drain: the reader stops at the cancellation
		}
		if err = o.Restore(ctx, b); err != nil {
			err = fmt.Errorf("kafka: restore %s/%d: apply: %w", t.g.Config.ChangelogTopic, t.p, err)
			cancel(err)
			continue
		}
		applied += int64(len(b))
	}
	return applied, err
}

// applyBatcher gathers a restore's entries into batches of up to
// ApplyBatch entries or applyBytes and hands them to the applier.
type applyBatcher struct {
	ctx   context.Context
	out   chan<- []outbox.ChangelogEntry
	batch []outbox.ChangelogEntry
	size  int
}

func (b *applyBatcher) reset() {
	b.batch, b.size = make([]outbox.ChangelogEntry, 0, ApplyBatch), 0
}

// add adds an entry whose record is size bytes, sending the batch when it
// is full.
func (b *applyBatcher) add(en outbox.ChangelogEntry, size int) error {
	b.batch = append(b.batch, en)
	b.size += size
	if len(b.batch) == cap(b.batch) || b.size >= applyBytes {
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

// ApplyBatch and applyBytes bound a batch of a partition store's
// restore (one Outbox.Restore call): in entries, and in the bytes of their
// records' keys and values.
const (
	ApplyBatch = 4000
	applyBytes = 8 << 20
)

// changelogRange returns the first and end offsets of changelog partition p.
func (g *Env) changelogRange(ctx context.Context, p int) (changelog.Range, error) {
	parts, err := changelog.Offsets(ctx, g.Client, g.Config.ChangelogTopic)
	if err != nil {
		return changelog.Range{}, err
	}
	for _, pr := range parts {
		if pr.ID == p {
			return pr, nil
		}
	}
	return changelog.Range{}, g.TopicError(g.Config.ChangelogTopic, p, fmt.Sprintf(
		"missing: the changelog topic has %d partitions and the ingest topic %s has more; give the changelog topic the ingest topic's partition count",
		len(parts), g.Config.Topic), nil)
}
