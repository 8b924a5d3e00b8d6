package kafka

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	kafkago "github.com/segmentio/kafka-go"

	"github.com/outboxd/outbox/kafka/internal/changelog"
	"github.com/outboxd/outbox/outbox"
)

// RestoreStats summarises a restore.
type RestoreStats struct {
	// Partitions is the number of partitions of the changelog topic.
	Partitions int
	// Records is the number of changelog topic records read.
	Records int64
	// Pending, Dead and Tombstones are the counts in the new database.
	Pending, Dead, Tombstones int
	// Duration is how long the restore took.
	Duration time.Duration
}

// restoreBatch is the number of entries applied per Outbox.Restore call.
const restoreBatch = 1000

// restoreFetchBytes bounds a restore's fetch responses: the largest batch
// a shipper writes (its writer's BatchBytes is capped there), so that every
// batch fits in one. Larger fetches gain nothing, and cost an in-process
// broker (kfake, in the benchmarks) copying: 32 MiB fetches restored at
// 0.6 times the rate of 8 MiB ones.
const restoreFetchBytes = DefaultChangelogMaxBytes

// Restore rebuilds an outbox from cfg.ChangelogTopic into a new database file
// at dbPath: it reads every partition from its beginning up to the end
// offsets it finds when it starts, and applies the records in order, so the
// last record of each event ID wins (records fenced off by a later owner of
// their partition, in a Group's changelog, are skipped), a tombstone deletes (the event stays
// deleted: its tombstone is kept in the new store too), a dead letter comes
// back dead and everything else pending. It refuses a dbPath that already
// holds data (ErrNotEmpty) and stops at the first record it cannot decode
// (ErrBadChangelogRecord).
//
// progress, when not nil, is called with how far the restore has come every
// 100ms while it reads, and once more when the reading ends (with Done ==
// Total when it read everything). The calls come from one goroutine at a
// time, and none after Restore has returned.
func Restore(ctx context.Context, cfg Config, dbPath string, progress func(RestoreProgress)) (RestoreStats, error) {
	begin := time.Now()
	var stats RestoreStats
	if cfg.ChangelogTopic == "" {
		return stats, &ConfigError{Field: "ChangelogTopic", Reason: "required for a restore"}
	}
	if err := cfg.Validate(); err != nil {
		return stats, err
	}
	cfg = cfg.WithDefaults()
	if fi, err := os.Stat(dbPath); err == nil && fi.Size() > 0 {
		return stats, fmt.Errorf("%w: %s exists", ErrNotEmpty, dbPath)
	}
	cn, err := cfg.conns()
	if err != nil {
		return stats, err
	}
	defer cn.close()

	parts, err := changelogOffsets(ctx, cfg, cn)
	if err != nil {
		return stats, err
	}
	stats.Partitions = len(parts)

	st, err := outbox.Open(dbPath, outbox.Config{Sink: noSink{}})
	if err != nil {
		return stats, err
	}
	if st.Changelog().LastLSN() > 0 {
		_ = st.Stop(context.Background())
		return stats, fmt.Errorf("%w: %s holds data", ErrNotEmpty, dbPath)
	}

	var total int64
	for _, p := range parts {
		total += p.Last - p.First
	}
	pr := startProgress(progress, cfg.ChangelogTopic, total)
	n, rerr := restoreFrom(ctx, cfg, cn, st, parts, pr)
	stats.Records = n
	pr.stop()
	s := st.Stats()
	cerr := st.Stop(context.Background())
	stats.Pending, stats.Dead, stats.Tombstones = s.Pending, s.Dead, s.Tombstones
	stats.Duration = time.Since(begin)
	if err := errors.Join(rerr, cerr); err != nil {
		return stats, err
	}
	return stats, nil
}

// noSink is the Sink of the outbox a restore writes to, which is never
// started: nothing is delivered.
type noSink struct{}

func (noSink) Deliver(context.Context, *outbox.Delivery) outbox.Result {
	return outbox.Result{Action: outbox.ActionRetry, Err: errors.New("kafka: restore delivers nothing")}
}

// changelogOffsets returns the partitions of the changelog topic with their
// first offset and their end offset now.
func changelogOffsets(ctx context.Context, cfg Config, cn *conns) ([]changelog.Range, error) {
	cl := &kafkago.Client{Addr: kafkago.TCP(cfg.brokers()...), Transport: cn.transport, Timeout: cfg.DialTimeout}
	return changelog.Offsets(ctx, cl, cfg.ChangelogTopic)
}

// restoreFrom reads the partitions concurrently and applies their entries in
// batches. Entries of one event ID are all in one partition (the shipper
// partitions by ID), in LSN order.
func restoreFrom(ctx context.Context, cfg Config, cn *conns, st *outbox.Outbox, parts []changelog.Range, pr *restoreProgress) (int64, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	entries := make(chan outbox.ChangelogEntry, restoreBatch)
	var readers sync.WaitGroup
	for _, p := range parts {
		if p.Last <= p.First {
			continue
		}
		readers.Add(1)
		go func() {
			defer readers.Done()
			if err := readPartition(ctx, cfg, cn, p, entries, pr); err != nil {
				cancel(err)
			}
		}()
	}
	go func() {
		readers.Wait()
		close(entries)
	}()

	var n int64
	batch := make([]outbox.ChangelogEntry, 0, restoreBatch)
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		if err := st.Restore(ctx, batch); err != nil {
			return fmt.Errorf("kafka: restore: apply: %w", err)
		}
		n += int64(len(batch))
		batch = batch[:0]
		return nil
	}
	var applyErr error
	batchStart := time.Now()
	for e := range entries {
		if applyErr != nil {
			continue // drain so the readers can stop
		}
		if len(batch) == 0 {
			batchStart = time.Now()
		}
		batch = append(batch, e)
		// A full batch, or a pause in the stream after a while: one
		// transaction per batch, not per record.
		if len(batch) == cap(batch) || (len(entries) == 0 && time.Since(batchStart) > 50*time.Millisecond) {
			if err := flush(); err != nil {
				applyErr = err
				cancel(err)
			}
		}
	}
	if applyErr == nil {
		applyErr = flush()
	}
	if cause := context.Cause(ctx); applyErr == nil && cause != nil && !errors.Is(cause, context.Canceled) {
		return n, cause
	}
	if applyErr == nil && ctx.Err() != nil {
		return n, context.Cause(ctx)
	}
	return n, applyErr
}

// readPartition reads one partition from p.First up to p.Last and sends the
// decoded entries. It finishes early when the reader's position passes the
// end (the last records were compacted away).
func readPartition(ctx context.Context, cfg Config, cn *conns, p changelog.Range, out chan<- outbox.ChangelogEntry, pr *restoreProgress) error {
	// Progress counts offsets, so that it reaches the end offsets exactly
	// however many records compaction removed.
	pos := p.First
	advance := func(to int64) {
		if to > pos {
			pr.add(to - pos)
			pos = to
		}
	}
	var maxEpoch int64
	err := changelog.ReadRange(ctx, cfg.reading(cn), p, func(msg *kafkago.Message) error {
		epoch, fence, err := changelog.RecordEpoch(msg.Headers)
		if err != nil {
			return fmt.Errorf("kafka: restore: %s/%d@%d: %w", cfg.ChangelogTopic, p.ID, msg.Offset, err)
		}
		if epoch < maxEpoch || fence {
			// Written by an owner fenced off by then, or a fence.
			maxEpoch = max(maxEpoch, epoch)
			advance(msg.Offset + 1)
			return nil
		}
		maxEpoch = epoch
		e, err := changelog.DecodeRecord(msg.Key, msg.Value, msg.Headers, msg.Time)
		if err != nil {
			return fmt.Errorf("kafka: restore: %s/%d@%d: %w", cfg.ChangelogTopic, p.ID, msg.Offset, err)
		}
		// The records of one ID are all in this partition, in the order
		// they were written; their LSNs may come from the stores of
		// several owners (a group's changelog), their offsets do not.
		e.LSN = uint64(msg.Offset) + 1
		select {
		case out <- e:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
		advance(msg.Offset + 1)
		return nil
	})
	if err == nil {
		advance(p.Last)
	}
	return err
}

// RestoreProgress is how far a restore has read its changelog topic. It
// counts offsets, not records, so that Done reaches Total exactly however
// many records compaction removed.
type RestoreProgress struct {
	// Topic is the changelog topic.
	Topic string
	// Done is the number of offsets read so far, of Total: the offsets
	// between the first and the end offset of every partition when the
	// restore started.
	Done, Total int64
	// Elapsed is the time since the reading started.
	Elapsed time.Duration
}

// progressEvery is how often Restore reports its progress.
const progressEvery = 100 * time.Millisecond

// restoreProgress counts the offsets read and reports them to a callback
// from its own goroutine.
type restoreProgress struct {
	report func(RestoreProgress)
	topic  string
	total  int64
	start  time.Time
	done   atomic.Int64

	stopc chan struct{}
	wg    sync.WaitGroup
}

func startProgress(report func(RestoreProgress), topic string, total int64) *restoreProgress {
	p := &restoreProgress{report: report, topic: topic, total: total, start: time.Now(), stopc: make(chan struct{})}
	if report == nil {
		return p
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		t := time.NewTicker(progressEvery)
		defer t.Stop()
		for {
			select {
			case <-p.stopc:
				p.send()
				return
			case <-t.C:
				p.send()
			}
		}
	}()
	return p
}

func (p *restoreProgress) add(n int64) { p.done.Add(n) }

func (p *restoreProgress) send() {
	p.report(RestoreProgress{Topic: p.topic, Done: p.done.Load(), Total: p.total, Elapsed: time.Since(p.start)})
}

// stop sends the last report and joins the reporting goroutine.
func (p *restoreProgress) stop() {
	close(p.stopc)
	p.wg.Wait()
}
