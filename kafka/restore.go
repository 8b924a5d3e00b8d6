package kafka

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/schollz/progressbar/v3"
	kafkago "github.com/segmentio/kafka-go"
	"golang.org/x/term"

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

// restoreIdle is how long a partition may deliver nothing before the reader
// checks whether the rest of it was compacted away.
const restoreIdle = time.Second

// Restore rebuilds an outbox from cfg.ChangelogTopic into a new database file
// at dbPath: it reads every partition from its beginning up to the end
// offsets it finds when it starts, and applies the records in order, so the
// last record of each event ID wins, a tombstone deletes (the event stays
// deleted: its tombstone is kept in the new store too), a dead letter comes
// back dead and everything else pending. It refuses a dbPath that already
// holds data (ErrNotEmpty) and stops at the first record it cannot decode
// (ErrBadChangelogRecord).
//
// Progress goes to progress (nil: none): a progress bar with records/s and
// the records left when progress is a terminal, a plain line every two
// seconds otherwise.
func Restore(ctx context.Context, cfg Config, dbPath string, progress io.Writer) (RestoreStats, error) {
	begin := time.Now()
	var stats RestoreStats
	if cfg.ChangelogTopic == "" {
		return stats, &ConfigError{Setting: "kafka.changelog_topic", Reason: "required for a restore"}
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
		total += p.last - p.first
	}
	pr := newRestoreProgress(progress, cfg.ChangelogTopic, total)
	n, rerr := restoreFrom(ctx, cfg, cn, st, parts, pr)
	stats.Records = n
	pr.finish(rerr == nil)
	s := st.Stats()
	cerr := st.Stop(context.Background())
	stats.Pending, stats.Dead, stats.Tombstones = s.Pending, s.Dead, s.Tombstones
	stats.Duration = time.Since(begin)
	if err := errors.Join(rerr, cerr); err != nil {
		return stats, err
	}
	pr.printf("restore: done: %d records from %d partitions of %s: %d pending, %d dead, %d tombstones in %s\n",
		stats.Records, stats.Partitions, cfg.ChangelogTopic, stats.Pending, stats.Dead, stats.Tombstones,
		stats.Duration.Round(time.Millisecond))
	return stats, nil
}

// noSink is the Sink of the outbox a restore writes to, which is never
// started: nothing is delivered.
type noSink struct{}

func (noSink) Deliver(context.Context, *outbox.Delivery) outbox.Result {
	return outbox.Result{Action: outbox.ActionRetry, Err: errors.New("kafka: restore delivers nothing")}
}

type partRange struct {
	id          int
	first, last int64 // [first, last)
}

// changelogOffsets returns the partitions of the changelog topic with their
// first offset and their end offset now.
func changelogOffsets(ctx context.Context, cfg Config, cn *conns) ([]partRange, error) {
	cl := &kafkago.Client{Addr: kafkago.TCP(cfg.brokers()...), Transport: cn.transport, Timeout: cfg.DialTimeout}
	topic := cfg.ChangelogTopic
	md, err := cl.Metadata(ctx, &kafkago.MetadataRequest{Topics: []string{topic}})
	if err != nil {
		return nil, fmt.Errorf("kafka: restore: metadata: %w", err)
	}
	var ids []int
	for _, t := range md.Topics {
		if t.Name != topic {
			continue
		}
		if t.Error != nil {
			return nil, fmt.Errorf("kafka: restore: changelog topic %s: %w", topic, t.Error)
		}
		for _, p := range t.Partitions {
			ids = append(ids, p.ID)
		}
	}
	if len(ids) == 0 {
		return nil, fmt.Errorf("kafka: restore: changelog topic %s has no partitions", topic)
	}
	sort.Ints(ids)
	reqs := make([]kafkago.OffsetRequest, 0, 2*len(ids))
	for _, id := range ids {
		reqs = append(reqs, kafkago.FirstOffsetOf(id), kafkago.LastOffsetOf(id))
	}
	lo, err := cl.ListOffsets(ctx, &kafkago.ListOffsetsRequest{Topics: map[string][]kafkago.OffsetRequest{topic: reqs}})
	if err != nil {
		return nil, fmt.Errorf("kafka: restore: list offsets: %w", err)
	}
	byID := make(map[int]kafkago.PartitionOffsets)
	for _, po := range lo.Topics[topic] {
		if po.Error != nil {
			return nil, fmt.Errorf("kafka: restore: offsets of %s/%d: %w", topic, po.Partition, po.Error)
		}
		byID[po.Partition] = po
	}
	out := make([]partRange, 0, len(ids))
	for _, id := range ids {
		po, ok := byID[id]
		if !ok {
			return nil, fmt.Errorf("kafka: restore: no offsets for %s/%d", topic, id)
		}
		out = append(out, partRange{id: id, first: po.FirstOffset, last: po.LastOffset})
	}
	return out, nil
}

// restoreFrom reads the partitions concurrently and applies their entries in
// batches. Entries of one event ID are all in one partition (the shipper
// partitions by ID), in LSN order.
func restoreFrom(ctx context.Context, cfg Config, cn *conns, st *outbox.Outbox, parts []partRange, pr *restoreProgress) (int64, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	entries := make(chan outbox.ChangelogEntry, restoreBatch)
	var readers sync.WaitGroup
	for _, p := range parts {
		if p.last <= p.first {
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

// readPartition reads one partition from p.first up to p.last and sends the
// decoded entries. It finishes early when the reader's position passes the
// end (the last records were compacted away).
func readPartition(ctx context.Context, cfg Config, cn *conns, p partRange, out chan<- outbox.ChangelogEntry, pr *restoreProgress) (err error) {
	r := kafkago.NewReader(kafkago.ReaderConfig{
		Brokers:        cfg.brokers(),
		Topic:          cfg.ChangelogTopic,
		Partition:      p.id,
		Dialer:         cn.dialer,
		MinBytes:       1,
		MaxBytes:       32 << 20,
		MaxWait:        250 * time.Millisecond,
		QueueCapacity:  restoreBatch,
		ReadBackoffMin: cfg.RetryBackoff,
		ReadBackoffMax: cfg.RetryBackoffMax,
	})
	defer r.Close()
	if err = r.SetOffset(p.first); err != nil {
		return err
	}
	// Progress counts offsets, so that it reaches the end offsets exactly
	// however many records compaction removed.
	pos := p.first
	advance := func(to int64) {
		if to > pos {
			pr.add(to - pos)
			pos = to
		}
	}
	defer func() {
		if err == nil {
			advance(p.last)
		}
	}()
	idle := 0
	for {
		fctx, cancel := context.WithTimeout(ctx, restoreIdle)
		msg, err := r.FetchMessage(fctx)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return context.Cause(ctx)
			}
			if !errors.Is(err, context.DeadlineExceeded) {
				return fmt.Errorf("kafka: restore: read %s/%d: %w", cfg.ChangelogTopic, p.id, err)
			}
			if r.Offset() >= p.last {
				return nil
			}
			idle++
			if time.Duration(idle)*restoreIdle >= max(30*time.Second, 3*cfg.RetryBackoffMax) {
				return fmt.Errorf("kafka: restore: %s/%d delivers nothing at offset %d, before its end offset %d",
					cfg.ChangelogTopic, p.id, r.Offset(), p.last)
			}
			continue
		}
		idle = 0
		if msg.Offset >= p.last {
			return nil
		}
		e, err := decodeChangelogRecord(msg.Key, msg.Value, msg.Headers, msg.Time)
		if err != nil {
			return fmt.Errorf("kafka: restore: %s/%d@%d: %w", cfg.ChangelogTopic, p.id, msg.Offset, err)
		}
		select {
		case out <- e:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
		advance(msg.Offset + 1)
		if msg.Offset >= p.last-1 {
			return nil
		}
	}
}

// restoreProgress reports a restore's progress: a bar on a terminal, plain
// lines otherwise, nothing for a nil writer.
type restoreProgress struct {
	w     io.Writer
	topic string
	total int64
	start time.Time
	done  atomic.Int64

	bar    *progressbar.ProgressBar
	stop   chan struct{}
	ticker sync.WaitGroup
	mu     sync.Mutex // serialises writes to w
}

func newRestoreProgress(w io.Writer, topic string, total int64) *restoreProgress {
	p := &restoreProgress{w: w, topic: topic, total: total, start: time.Now(), stop: make(chan struct{})}
	if w == nil {
		return p
	}
	if isTerminal(w) {
		p.bar = progressbar.NewOptions64(total,
			progressbar.OptionSetWriter(w),
			progressbar.OptionSetDescription("restoring "+topic),
			progressbar.OptionShowCount(),
			progressbar.OptionShowIts(),
			progressbar.OptionSetItsString("records"),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionShowElapsedTimeOnFinish(),
			progressbar.OptionFullWidth(),
		)
		return p
	}
	p.ticker.Add(1)
	go func() {
		defer p.ticker.Done()
		t := time.NewTicker(2 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-p.stop:
				return
			case <-t.C:
				p.line()
			}
		}
	}()
	return p
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(interface{ Fd() uintptr })
	return ok && term.IsTerminal(int(f.Fd()))
}

func (p *restoreProgress) add(n int64) {
	done := p.done.Add(n)
	if p.bar != nil {
		p.mu.Lock()
		p.bar.Describe(fmt.Sprintf("restoring %s, lag %d", p.topic, max(p.total-done, 0)))
		_ = p.bar.Add64(n)
		p.mu.Unlock()
	}
}

func (p *restoreProgress) line() {
	done := p.done.Load()
	secs := time.Since(p.start).Seconds()
	rate := 0.0
	if secs > 0 {
		rate = float64(done) / secs
	}
	pct := 100.0
	if p.total > 0 {
		pct = 100 * float64(done) / float64(p.total)
	}
	p.printf("restore: %d/%d offsets (%.1f%%), %.0f records/s, lag %d\n", done, p.total, pct, rate, max(p.total-done, 0))
}

func (p *restoreProgress) printf(format string, args ...any) {
	if p.w == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, format, args...)
}

func (p *restoreProgress) finish(ok bool) {
	close(p.stop)
	p.ticker.Wait()
	if p.w == nil {
		return
	}
	if p.bar != nil {
		p.mu.Lock()
		if ok {
			_ = p.bar.Finish()
		}
		fmt.Fprintln(p.w)
		p.mu.Unlock()
		return
	}
	p.line()
}
