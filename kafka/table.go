package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	kafkago "github.com/segmentio/kafka-go"

	"github.com/outboxd/outbox/kafka/internal/retry"
)

// DefaultTableSuffix is appended to a group's changelog topic to name its
// table topic when Config.EndpointsTopic is empty.
const DefaultTableSuffix = "-endpoints"

// ErrTableClosed is returned by Table.Put once the table is closed.
var ErrTableClosed = errors.New("kafka: table closed")

// TableRecord is one record of a table's topic, as its handler gets it.
type TableRecord struct {
	// Offset is the record's offset in the table's topic.
	Offset int64
	// Key and Value are the record's. Value is nil for a tombstone.
	Key, Value []byte
}

// TableHandler applies one record. An error means the record does not
// decode: the table skips it, logs it once and counts it
// (TableStats.Skipped). A handler runs on the table's reader, one record
// at a time in offset order; it must not call Put (Put waits for that very
// reader).
type TableHandler func(TableRecord) error

// TableConfig says what a Table does with its records.
type TableConfig struct {
	// Handlers apply the records by the prefix of their key: a record
	// goes to the handler of the longest prefix its key starts with, and
	// is ignored (counted in TableStats.Unhandled) when none does, so that
	// kinds of records an older version does not know share the topic.
	// Prefixes are conventionally "<kind>/" ("endpoint/", "state/").
	Handlers map[string]TableHandler
	// Logger gets a line per skipped record and the table's own events.
	// Default: discard.
	Logger *slog.Logger
}

// TableStats are a table's figures.
type TableStats struct {
	// Topic is the table's topic.
	Topic string
	// Applied is the offset below which every record has been applied.
	Applied int64
	// Records counts the records handled since Open; Skipped those a
	// handler could not decode; Unhandled those no handler's prefix
	// matched.
	Records, Skipped, Unhandled uint64
}

// Table is a compacted, single-partition topic that every member of a
// group reads whole, in offset order, as a Kafka Streams global table: at
// Open from the topic's first offset, then as it grows, each record given
// to the handler of its key's prefix. Every member applies the same
// records in the same order, so all of them hold the same state once they
// have read the same offsets; the offset order decides between changes
// written at the same time.
//
// Put writes a record acknowledged by every in-sync replica and returns
// once this member's reader has applied it (read your writes). A record
// that does not decode is skipped, logged once and counted; it never stops
// the reader. Open it with OpenTable and stop it with Close.
type Table struct {
	cfg     Config
	topic   string
	h       TableConfig
	log     *slog.Logger
	conns   *conns
	client  *kafkago.Client
	reader  *kafkago.Reader
	stop    context.CancelFunc
	done    chan struct{}
	records atomic.Uint64
	skipped atomic.Uint64
	ignored atomic.Uint64

	mu      sync.Mutex
	applied int64         // every record below is applied
	moved   chan struct{} // closed when applied moves, then replaced
	closed  bool
}

// EndpointsTopic returns the table topic of cfg: Config.EndpointsTopic, or
// "<changelog topic>-endpoints" (with a group's default changelog topic
// when Config.ChangelogTopic is empty).
func EndpointsTopic(cfg Config) string {
	if cfg.EndpointsTopic != "" {
		return cfg.EndpointsTopic
	}
	cl := cfg.ChangelogTopic
	if cl == "" {
		cl = DefaultGroupChangelogTopic(cfg.Group, cfg.Topic)
	}
	return cl + DefaultTableSuffix
}

// OpenTable opens the table topic of cfg (EndpointsTopic): it creates the
// topic when missing, compacted, with one partition and
// cfg.ChangelogReplication, and fails with a *TopicError when the topic is
// not compacted or has more than one partition (records of several
// partitions have no order between them). It then applies every record
// up to the topic's end offset as it was at the call, and returns once it
// has; ctx bounds all of that, and the reader goes on until Close.
func OpenTable(ctx context.Context, cfg Config, tc TableConfig) (*Table, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.WithDefaults()
	if tc.Logger == nil {
		tc.Logger = slog.New(slog.DiscardHandler)
	}
	cn, err := cfg.conns()
	if err != nil {
		return nil, err
	}
	t := &Table{cfg: cfg, topic: EndpointsTopic(cfg), h: tc, log: tc.Logger, conns: cn,
		moved: make(chan struct{}), done: make(chan struct{})}
	t.client = &kafkago.Client{Addr: kafkago.TCP(cfg.brokers()...), Transport: cn.transport, Timeout: cfg.DialTimeout}
	if err := t.ensureTopic(ctx); err != nil {
		cn.close()
		return nil, err
	}
	end, err := t.endOffset(ctx)
	if err != nil {
		cn.close()
		return nil, err
	}
	t.start()
	if err := t.waitApplied(ctx, end); err != nil {
		t.Close()
		return nil, fmt.Errorf("kafka: reading table %s up to offset %d: %w", t.topic, end, err)
	}
	return t, nil
}

// start starts the reader from the topic's first offset.
func (t *Table) start() {
	t.reader = kafkago.NewReader(kafkago.ReaderConfig{
		Brokers: t.cfg.brokers(), Topic: t.topic, Partition: 0, Dialer: t.conns.dialer,
		MinBytes: 1, MaxBytes: DefaultChangelogMaxBytes, MaxWait: 100 * time.Millisecond,
		ReadBackoffMin: t.cfg.RetryBackoff, ReadBackoffMax: t.cfg.RetryBackoffMax,
		StartOffset: kafkago.FirstOffset,
		ErrorLogger: kafkaLogger(t.log, slog.LevelDebug),
	})
	ctx, stop := context.WithCancel(context.Background())
	t.stop = stop
	go t.read(ctx)
}

// read applies the records until ctx ends.
func (t *Table) read(ctx context.Context) {
	defer close(t.done)
	for {
		m, err := t.reader.FetchMessage(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			t.log.Warn("kafka: reading the table topic; retrying", "topic", t.topic, "err", err)
			if !retry.Sleep(ctx, t.cfg.RetryBackoff) {
				return
			}
			continue
		}
		t.apply(TableRecord{Offset: m.Offset, Key: m.Key, Value: m.Value})
		t.advance(m.Offset + 1)
	}
}

// apply gives r to its handler.
func (t *Table) apply(r TableRecord) {
	h := t.handler(string(r.Key))
	if h == nil {
		t.ignored.Add(1)
		return
	}
	t.records.Add(1)
	if err := h(r); err != nil {
		t.skipped.Add(1)
		t.log.Warn("kafka: a table record does not decode; skipped", "topic", t.topic, "offset", r.Offset,
			"key", fmt.Sprintf("%.100q", r.Key), "err", err)
	}
}

// handler returns the handler of the longest prefix of key, or nil.
func (t *Table) handler(key string) TableHandler {
	var h TableHandler
	best := -1
	for p, ph := range t.h.Handlers {
		if len(p) > best && strings.HasPrefix(key, p) {
			h, best = ph, len(p)
		}
	}
	return h
}

// advance records that every offset below next is applied.
func (t *Table) advance(next int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if next <= t.applied {
		return
	}
	t.applied = next
	close(t.moved)
	t.moved = make(chan struct{})
}

// waitApplied returns once every offset below next is applied.
func (t *Table) waitApplied(ctx context.Context, next int64) error {
	for {
		t.mu.Lock()
		applied, moved := t.applied, t.moved
		t.mu.Unlock()
		if applied >= next {
			return nil
		}
		select {
		case <-moved:
		case <-t.done:
			return ErrTableClosed
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Put writes the record key, value to the table, acknowledged by every
// in-sync replica, and returns its offset once this member's reader has
// applied it (its handler ran). A nil value is a tombstone, which
// compaction eventually removes with every earlier record of key. Put is
// retried while the brokers answer with a retriable error, until ctx ends.
func (t *Table) Put(ctx context.Context, key, value []byte) (int64, error) {
	t.mu.Lock()
	closed := t.closed
	t.mu.Unlock()
	if closed {
		return 0, ErrTableClosed
	}
	off, err := t.produce(ctx, key, value)
	if err != nil {
		return 0, err
	}
	if err := t.waitApplied(ctx, off+1); err != nil {
		return off, fmt.Errorf("kafka: table %s: waiting for offset %d to be applied: %w", t.topic, off, err)
	}
	return off, nil
}

// produce writes one record and returns its offset.
func (t *Table) produce(ctx context.Context, key, value []byte) (int64, error) {
	b := newBackoff(t.cfg)
	for {
		rec := kafkago.Record{Key: kafkago.NewBytes(key)}
		if value != nil {
			rec.Value = kafkago.NewBytes(value)
		}
		resp, err := t.client.Produce(ctx, &kafkago.ProduceRequest{
			Topic: t.topic, Partition: 0, RequiredAcks: kafkago.RequireAll,
			Records: kafkago.NewRecordReader(rec),
		})
		if err == nil {
			err = resp.Error
		}
		if err == nil {
			return resp.BaseOffset, nil
		}
		var ke kafkago.Error
		if errors.As(err, &ke) && !ke.Temporary() {
			return 0, fmt.Errorf("kafka: table %s: produce: %w", t.topic, err)
		}
		t.log.Debug("kafka: table produce; retrying", "topic", t.topic, "err", err)
		if !retry.Sleep(ctx, b.NextBackOff()) {
			return 0, fmt.Errorf("kafka: table %s: produce: %w", t.topic, errors.Join(err, ctx.Err()))
		}
	}
}

// Topic returns the table's topic.
func (t *Table) Topic() string { return t.topic }

// Stats returns the table's figures.
func (t *Table) Stats() TableStats {
	t.mu.Lock()
	applied := t.applied
	t.mu.Unlock()
	return TableStats{Topic: t.topic, Applied: applied,
		Records: t.records.Load(), Skipped: t.skipped.Load(), Unhandled: t.ignored.Load()}
}

// Close stops the reader and waits for it; a Put waiting for its record
// returns ErrTableClosed. Close is idempotent.
func (t *Table) Close() {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		<-t.done
		return
	}
	t.closed = true
	t.mu.Unlock()
	t.stop()
	<-t.done
	_ = t.reader.Close()
	t.conns.close()
}
