package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
	kafkago "github.com/segmentio/kafka-go"

	"github.com/outboxd/outbox/kafka/internal/offsets"
	"github.com/outboxd/outbox/outbox"
)

// enqueuer is what ingest needs of the outbox. Records go in through
// Ingest, not Enqueue: a record read again after its event was deleted by an
// operator is a duplicate, dropped and counted, never an error that would
// hold the partition's committed offset below it for good.
type enqueuer interface {
	Ingest(ctx context.Context, events ...outbox.Event) ([]string, error)
	EnqueueDead(ctx context.Context, ev outbox.Event, reason string) (string, error)
}

// ingest consumes Config.Topic in Config.Group and enqueues every record.
//
// Each generation of the group (kafka-go's ConsumerGroup) runs one consumer
// per assigned partition. A consumer fetches records, enqueues them in
// batches of up to BatchSize (whatever has arrived, so a quiet partition is
// not held back) and marks each batch durable in its partition's tracker. A
// batch whose enqueue fails goes to the partition's retry lane and is
// retried with backoff while later batches go on; the tracker keeps the
// committable offset below it until it succeeds. A committer commits the
// trackers' offsets every CommitInterval and, when the generation ends (a
// rebalance, a lost coordinator, Close), once more after every consumer has
// stopped fetching and finished its in-flight write.
type ingest struct {
	cfg   Config
	o     enqueuer
	log   *slog.Logger
	conns *conns
	m     mapper
	met   *metrics
	cg    *kafkago.ConsumerGroup

	// work bounds enqueues; cancelled only when Close runs out of time.
	work context.Context

	ready    atomic.Bool
	down     atomic.Bool           // logged the loss of the group once
	joinErr  atomic.Pointer[error] // why the last join failed; nil once joined
	assigned atomic.Int32

	// onGeneration runs each generation; runGeneration unless group mode
	// replaces it.
	onGeneration func(*kafkago.Generation)

	mu        sync.Mutex
	committed map[int]int64 // last committed offset per partition (any generation)
	current   []int         // partitions of the current generation
}

func newIngest(cfg Config, o enqueuer, log *slog.Logger, cn *conns, met *metrics, work context.Context, balancers ...kafkago.GroupBalancer) (*ingest, error) {
	start := kafkago.FirstOffset
	if cfg.StartOffset == "latest" {
		start = kafkago.LastOffset
	}
	in := &ingest{
		cfg: cfg, o: o, log: log, conns: cn, m: newMapper(cfg), met: met, work: work,
		committed: make(map[int]int64),
	}
	topics := []string{cfg.Topic}
	if cfg.StandbyReplicas > 0 {
		// Standby assignments come as the changelog topic's partitions,
		// which kafka-go hands over only for subscribed topics.
		topics = append(topics, cfg.ChangelogTopic)
	}
	cg, err := kafkago.NewConsumerGroup(kafkago.ConsumerGroupConfig{
		ID:                     cfg.Group,
		Brokers:                cfg.brokers(),
		Dialer:                 cn.dialer,
		Topics:                 topics,
		HeartbeatInterval:      cfg.HeartbeatInterval,
		SessionTimeout:         cfg.SessionTimeout,
		RebalanceTimeout:       cfg.RebalanceTimeout,
		JoinGroupBackoff:       cfg.RetryBackoffMax,
		WatchPartitionChanges:  true,
		PartitionWatchInterval: max(cfg.SessionTimeout/6, time.Second),
		StartOffset:            start,
		GroupBalancers:         balancers,
		Logger:                 kafkaLogger(log, slog.LevelDebug),
		ErrorLogger:            kafkaLogger(log, slog.LevelDebug),
	})
	if err != nil {
		return nil, fmt.Errorf("kafka: consumer group: %w", err)
	}
	in.cg = cg
	in.onGeneration = in.runGeneration
	return in, nil
}

// run joins generation after generation until ctx is cancelled or the group
// is closed.
func (in *ingest) run(ctx context.Context) {
	defer in.ready.Store(false)
	for {
		gen, err := in.cg.Next(ctx)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, kafkago.ErrGroupClosed) {
				return
			}
			if errors.Is(err, kafkago.RebalanceInProgress) {
				continue
			}
			in.ready.Store(false)
			in.joinErr.Store(&err)
			in.met.groupErrors.Add(1)
			if in.down.CompareAndSwap(false, true) {
				in.log.Warn("kafka: cannot join the consumer group; ingest paused, retrying",
					"group", in.cfg.Group, "topic", in.cfg.Topic, "err", err)
			} else {
				in.log.Debug("kafka: consumer group", "err", err)
			}
			continue
		}
		if in.down.CompareAndSwap(true, false) {
			in.log.Info("kafka: consumer group joined again; ingest resumed", "group", in.cfg.Group)
		}
		in.ready.Store(true)
		in.joinErr.Store(nil)
		in.met.generations.Add(1)
		in.onGeneration(gen)
	}
}

// runGeneration starts the generation's consumers and committer and returns;
// kafka-go ends the generation (cancelling their context) on a rebalance and
// waits for them before it joins the next one.
func (in *ingest) runGeneration(gen *kafkago.Generation) {
	parts := gen.Assignments[in.cfg.Topic]
	trackers := make(map[int]*offsets.Tracker, len(parts))
	ids := make([]int, 0, len(parts))
	for _, pa := range parts {
		trackers[pa.ID] = offsets.New(pa.Offset)
		ids = append(ids, pa.ID)
	}
	in.assigned.Store(int32(len(parts)))
	in.mu.Lock()
	in.current = ids
	in.mu.Unlock()
	in.log.Info("kafka: partitions assigned", "group", in.cfg.Group, "generation", gen.ID,
		"member", gen.MemberID, "topic", in.cfg.Topic, "partitions", ids)
	var consumers sync.WaitGroup
	consumers.Add(len(parts))
	for _, pa := range parts {
		tr := trackers[pa.ID]
		gen.Start(func(gctx context.Context) {
			in.consume(gctx, pa, tr, partStore{o: in.o}, consumers.Done)
		})
	}
	gen.Start(func(gctx context.Context) {
		in.commitLoop(gctx, gen, trackers, &consumers)
	})
}

// commitLoop commits the durable offsets every CommitInterval and a last time
// once the generation's consumers have stopped.
func (in *ingest) commitLoop(gctx context.Context, gen *kafkago.Generation, trackers map[int]*offsets.Tracker, consumers *sync.WaitGroup) {
	t := time.NewTicker(in.cfg.CommitInterval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			in.commit(gen, trackers, false)
		case <-gctx.Done():
			consumers.Wait()
			in.commit(gen, trackers, true)
			in.assigned.Store(0)
			in.mu.Lock()
			in.current = nil
			in.mu.Unlock()
			return
		}
	}
}

func (in *ingest) commit(gen *kafkago.Generation, trackers map[int]*offsets.Tracker, final bool) {
	offsets := make(map[int]int64)
	for p, tr := range trackers {
		if off, ok := tr.ToCommit(^uint64(0)); ok {
			offsets[p] = off
		}
	}
	if len(offsets) == 0 {
		return
	}
	err := gen.CommitOffsets(map[string]map[int]int64{in.cfg.Topic: offsets})
	if err != nil {
		in.met.commitErrors.Add(1)
		level := slog.LevelWarn
		if final {
			// The coordinator is often what ended the generation; the next
			// owner re-reads from the last commit and deduplicates by ID.
			level = slog.LevelInfo
		}
		in.log.Log(context.Background(), level, "kafka: commit offsets", "group", in.cfg.Group,
			"generation", gen.ID, "offsets", offsets, "final", final, "err", err)
		return
	}
	in.met.commits.Add(1)
	in.mu.Lock()
	for p, off := range offsets {
		trackers[p].CommittedAt(off)
		in.committed[p] = off
	}
	in.mu.Unlock()
}

// joinError returns why the last attempt to join the group failed, nil
// once it joined (or while a rebalance is merely under way).
func (in *ingest) joinError() error {
	if p := in.joinErr.Load(); p != nil {
		return *p
	}
	return nil
}

// committedOffsets returns the last offsets this instance committed.
func (in *ingest) committedOffsets() map[int]int64 {
	in.mu.Lock()
	defer in.mu.Unlock()
	out := make(map[int]int64, len(in.committed))
	for p, o := range in.committed {
		out[p] = o
	}
	return out
}

// partitions returns the partitions of the current generation.
func (in *ingest) partitions() []int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return append([]int(nil), in.current...)
}

// failedBatch is a batch waiting in a partition's retry lane.
type failedBatch struct {
	span offsets.Span
	msgs []kafkago.Message
}

// partStore is where consume stores one partition's records: o, and, in
// group mode, lsn reads the store's last changelog LSN once a batch is
// durable (so that its offset is committed only once that is shipped).
type partStore struct {
	o   enqueuer
	lsn func() uint64
}

func (ps partStore) lastLSN() uint64 {
	if ps.lsn == nil {
		return 0
	}
	return ps.lsn()
}

// consume runs one partition for one generation, storing its records in ps.
// It calls stopped once it has stopped fetching and its last write is done,
// so the final commit need not wait for the reader to close.
func (in *ingest) consume(gctx context.Context, pa kafkago.PartitionAssignment, tr *offsets.Tracker, ps partStore, stopped func()) {
	var once sync.Once
	stop := func() { once.Do(stopped) }
	defer stop()
	r := in.reader(pa.ID)
	if err := r.SetOffset(pa.Offset); err != nil {
		in.log.Error("kafka: set offset", "partition", pa.ID, "offset", pa.Offset, "err", err)
		_ = r.Close()
		return
	}

	msgs := make(chan kafkago.Message, in.cfg.BatchSize)
	var fetcher sync.WaitGroup
	fetcher.Add(1)
	go func() {
		defer fetcher.Done()
		defer close(msgs)
		in.fetch(gctx, r, pa.ID, msgs)
	}()

	retry := make(chan failedBatch, 8)
	var lane sync.WaitGroup
	lane.Add(1)
	go func() {
		defer lane.Done()
		in.retryLane(gctx, retry, tr, ps)
	}()

	batch := make([]kafkago.Message, 0, in.cfg.BatchSize)
	for {
		var ok bool
		if batch, ok = nextBatch(gctx, msgs, batch[:0]); !ok {
			break
		}
		if !in.storeBatch(gctx, pa.ID, batch, tr, ps, retry) {
			break
		}
	}
	close(retry)
	lane.Wait()
	stop()
	_ = r.Close()
	fetcher.Wait()
}

// reader returns a reader of partition p of the ingest topic.
func (in *ingest) reader(p int) *kafkago.Reader {
	return kafkago.NewReader(kafkago.ReaderConfig{
		Brokers:       in.cfg.brokers(),
		Topic:         in.cfg.Topic,
		Partition:     p,
		Dialer:        in.conns.dialer,
		QueueCapacity: in.cfg.BatchSize,
		MinBytes:      1,
		MaxBytes:      16 << 20,
		// A fetch in flight delays the reader's close, and with it the
		// rejoin at a rebalance: keep it within a heartbeat or so.
		MaxWait:        min(max(in.cfg.HeartbeatInterval, 100*time.Millisecond), 500*time.Millisecond),
		ReadBackoffMin: in.cfg.RetryBackoff,
		ReadBackoffMax: in.cfg.RetryBackoffMax,
		Logger:         kafkaLogger(in.log, slog.LevelDebug),
		ErrorLogger:    kafkaLogger(in.log, slog.LevelDebug),
	})
}

// fetch fetches partition p's records from r into msgs until gctx ends,
// counting and passing over fetch errors (the reader retries).
func (in *ingest) fetch(gctx context.Context, r *kafkago.Reader, p int, msgs chan<- kafkago.Message) {
	for {
		m, err := r.FetchMessage(gctx)
		if err != nil {
			if gctx.Err() != nil {
				return
			}
			in.met.fetchErrors.Add(1)
			in.log.Debug("kafka: fetch", "partition", p, "err", err)
			continue
		}
		select {
		case msgs <- m:
		case <-gctx.Done():
			return
		}
	}
}

// nextBatch waits for the next record and appends it to batch with what
// else has arrived already, up to the batch's capacity or maxBatchBytes.
// It reports false when gctx ended or msgs was closed first.
func nextBatch(gctx context.Context, msgs <-chan kafkago.Message, batch []kafkago.Message) ([]kafkago.Message, bool) {
	select {
	case <-gctx.Done():
		return batch, false
	case m, ok := <-msgs:
		if !ok {
			return batch, false
		}
		batch = append(batch, m)
	}
	size := msgSize(&batch[0])
	for len(batch) < cap(batch) && size < maxBatchBytes {
		select {
		case m, ok := <-msgs:
			if !ok {
				return batch, true
			}
			batch = append(batch, m)
			size += msgSize(&m)
		default:
			return batch, true
		}
	}
	return batch, true
}

// storeBatch stores one batch of partition p and marks it done in tr; a
// batch that fails goes to the retry lane while later ones go on. It
// reports false when gctx ended before the retry lane took it.
func (in *ingest) storeBatch(gctx context.Context, p int, batch []kafkago.Message, tr *offsets.Tracker, ps partStore, retry chan<- failedBatch) bool {
	in.met.records.Add(uint64(len(batch)))
	sp := tr.Add(batch[0].Offset, batch[len(batch)-1].Offset+1)
	err := in.store(in.work, ps.o, batch)
	if err == nil {
		tr.Done(sp.Start, ps.lastLSN())
		return true
	}
	in.met.enqueueErrors.Add(1)
	in.log.Warn("kafka: enqueue failed; retrying in the background, committed offset held below it",
		"topic", in.cfg.Topic, "partition", p, "from", sp.Start, "to", sp.End-1, "err", err)
	fb := failedBatch{span: sp, msgs: append([]kafkago.Message(nil), batch...)}
	select {
	case retry <- fb:
		return true
	case <-gctx.Done():
		return false
	}
}

// maxBatchBytes bounds the records of one enqueue by size as BatchSize
// bounds them by number, so that large payloads do not make huge writes.
const maxBatchBytes = 8 << 20

func msgSize(m *kafkago.Message) int {
	n := len(m.Key) + len(m.Value)
	for _, h := range m.Headers {
		n += len(h.Key) + len(h.Value)
	}
	return n
}

// retryLane retries failed batches of one partition in order, with backoff,
// until each is durable or the generation ends (the next owner of the
// partition reads them again from the committed offset).
func (in *ingest) retryLane(gctx context.Context, retry <-chan failedBatch, tr *offsets.Tracker, ps partStore) {
	for fb := range retry {
		b := backoff.NewExponentialBackOff()
		b.InitialInterval = in.cfg.RetryBackoff
		b.MaxInterval = in.cfg.RetryBackoffMax
		b.MaxElapsedTime = 0
		b.Reset()
		for {
			t := time.NewTimer(b.NextBackOff())
			select {
			case <-gctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			err := in.store(in.work, ps.o, fb.msgs)
			if err == nil {
				tr.Done(fb.span.Start, ps.lastLSN())
				in.log.Info("kafka: enqueue succeeded on retry", "topic", in.cfg.Topic,
					"partition", fb.msgs[0].Partition, "from", fb.span.Start, "to", fb.span.End-1)
				break
			}
			in.met.enqueueErrors.Add(1)
			in.log.Debug("kafka: enqueue retry failed", "partition", fb.msgs[0].Partition, "err", err)
		}
	}
}

// store makes a batch of records durable: deliverable records as pending
// events in one Ingest (the common case), the others as dead letters. It
// is idempotent (IDs are stable), so a failed batch is simply retried whole.
// It returns an error only for failures worth retrying.
func (in *ingest) store(ctx context.Context, o enqueuer, batch []kafkago.Message) error {
	ms := make([]mapped, len(batch))
	events := make([]outbox.Event, 0, len(batch))
	src := make([]int, 0, len(batch)) // index in batch of events[i]
	for i := range batch {
		ms[i] = in.m.mapRecord(&batch[i])
		if ms[i].dead == "" {
			events = append(events, ms[i].ev)
			src = append(src, i)
		}
	}
	if err := in.ingestEvents(ctx, o, batch, ms, events, src); err != nil {
		return err
	}
	for i := range ms {
		if ms[i].dead == "" {
			continue
		}
		if err := in.storeDead(ctx, o, &batch[i], ms[i]); err != nil {
			return err
		}
	}
	return nil
}

// ingestEvents ingests the mapped events of batch (events[k] is the record
// batch[src[k]]), in one Ingest when the outbox takes them all. A record the
// outbox refuses (invalid, an ID reused with other content, a fan-out over
// Config.MaxDeliveriesPerCall on its own) gets its reason in ms and the rest
// go on; events whose fan-outs are over the bound only together are
// ingested in halves. It returns an error only for failures worth retrying.
func (in *ingest) ingestEvents(ctx context.Context, o enqueuer, batch []kafkago.Message, ms []mapped, events []outbox.Event, src []int) error {
	for len(events) > 0 {
		err := in.enqueue(ctx, o, events)
		if err == nil {
			in.met.enqueued.Add(uint64(len(events)))
			return nil
		}
		var ve *outbox.ValidationError
		switch {
		case errors.As(err, &ve) && ve.Index >= 0 && ve.Index < len(events):
			// The outbox refused one event (an unknown destination, a bad
			// header): that record becomes a dead letter, the rest go on.
			i := src[ve.Index]
			ms[i].dead = fmt.Sprintf("refused by the outbox (Kafka record %s): %s: %s", coords(&batch[i]), ve.Field, ve.Reason)
			events = slices.Delete(slices.Clone(events), ve.Index, ve.Index+1)
			src = slices.Delete(slices.Clone(src), ve.Index, ve.Index+1)
		case errors.Is(err, outbox.ErrTooManyDeliveries) && len(events) > 1:
			mid := len(events) / 2
			if err := in.ingestEvents(ctx, o, batch, ms, events[:mid:mid], src[:mid:mid]); err != nil {
				return err
			}
			return in.ingestEvents(ctx, o, batch, ms, events[mid:], src[mid:])
		case errors.Is(err, outbox.ErrTooManyDeliveries), errors.Is(err, outbox.ErrConflict):
			return in.ingestOneByOne(ctx, o, batch, ms, events, src)
		default:
			return err
		}
	}
	return nil
}

// ingestOneByOne ingests events one at a time, keeping as dead letters those
// the outbox refuses: an ID header that reuses the ID of another event
// (found this way, which is rare), or one record whose fan-out alone is
// over Config.MaxDeliveriesPerCall.
func (in *ingest) ingestOneByOne(ctx context.Context, o enqueuer, batch []kafkago.Message, ms []mapped, events []outbox.Event, src []int) error {
	for j, ev := range events {
		err := in.enqueue(ctx, o, []outbox.Event{ev})
		if err == nil {
			in.met.enqueued.Add(1)
			continue
		}
		if !errors.Is(err, outbox.ErrConflict) && !errors.Is(err, outbox.ErrInvalid) && !errors.Is(err, outbox.ErrTooManyDeliveries) {
			return err
		}
		i := src[j]
		ms[i].dead = fmt.Sprintf("refused by the outbox (Kafka record %s): %v", coords(&batch[i]), err)
		var tm *outbox.TooManyDeliveriesError
		if errors.As(err, &tm) {
			ms[i].dead = fmt.Sprintf("refused by the outbox (Kafka record %s): it would create %d deliveries (one per subscribed endpoint), "+
				"over the limit of %d (outbox.Config.MaxDeliveriesPerCall)", coords(&batch[i]), tm.Deliveries, tm.Limit)
		}
	}
	return nil
}

func (in *ingest) enqueue(ctx context.Context, o enqueuer, events []outbox.Event) error {
	if in.cfg.BeforeEnqueue != nil {
		if err := in.cfg.BeforeEnqueue(ctx, events); err != nil {
			return err
		}
	}
	_, err := o.Ingest(ctx, events...)
	return err
}

// storeDead keeps an undeliverable record as a dead letter with the reason:
// as mapped if the outbox takes it, else stripped down step by step. A record
// the outbox refuses even bare is logged and counted: it is the one case
// where a record is passed over.
func (in *ingest) storeDead(ctx context.Context, o enqueuer, msg *kafkago.Message, mp mapped) error {
	reason := mp.dead
	cands := append([]outbox.Event{mp.ev}, deadFallbacks(msg, mp)...)
	var last error
	for _, ev := range cands {
		_, err := o.EnqueueDead(ctx, ev, reason)
		if err == nil {
			in.met.dead.Add(1)
			in.log.Warn("kafka: record stored as a dead letter", "id", ev.ID, "reason", reason)
			return nil
		}
		if !errors.Is(err, outbox.ErrInvalid) && !errors.Is(err, outbox.ErrConflict) {
			return err
		}
		if last == nil {
			reason += " (kept stripped: " + err.Error() + ")"
		}
		last = err
	}
	in.met.unstorable.Add(1)
	in.log.Error("kafka: record cannot be stored even as a dead letter; passed over",
		"record", coords(msg), "reason", mp.dead, "err", last)
	return nil
}

// kafkaLogger adapts kafka-go's printf logger to slog.
func kafkaLogger(l *slog.Logger, level slog.Level) kafkago.Logger {
	return kafkago.LoggerFunc(func(format string, args ...any) {
		if l.Enabled(context.Background(), level) {
			l.Log(context.Background(), level, "kafka-go: "+fmt.Sprintf(format, args...))
		}
	})
}
