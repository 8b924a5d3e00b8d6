package changelog

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	kafkago "github.com/segmentio/kafka-go"
)

// Range is a range of offsets of one partition, [First, Last).
type Range struct {
	// ID is the partition.
	ID int
	// First is the first offset of the range, Last the offset after it.
	First, Last int64
}

// Reading says how to read the changelog topic.
type Reading struct {
	// Topic is the changelog topic.
	Topic string
	// Brokers are the addresses of the brokers.
	Brokers []string
	// Dialer connects to them.
	Dialer *kafkago.Dialer
	// FetchBytes bounds a fetch response: the largest batch a shipper
	// writes, so that every batch fits in one.
	FetchBytes int
	// RetryBackoff and RetryBackoffMax pace the reader's retries.
	RetryBackoff, RetryBackoffMax time.Duration
}

// queueCapacity is the records a reader fetches ahead.
const queueCapacity = 1000

// idleWait is how long a partition may deliver nothing before ReadRange
// checks whether the rest of it was compacted away.
const idleWait = time.Second

// Reader returns a reader of partition p of the topic.
func (rd Reading) Reader(p int) *kafkago.Reader {
	return kafkago.NewReader(kafkago.ReaderConfig{
		Brokers:        rd.Brokers,
		Topic:          rd.Topic,
		Partition:      p,
		Dialer:         rd.Dialer,
		MinBytes:       1,
		MaxBytes:       rd.FetchBytes,
		MaxWait:        250 * time.Millisecond,
		QueueCapacity:  queueCapacity,
		ReadBackoffMin: rd.RetryBackoff,
		ReadBackoffMax: rd.RetryBackoffMax,
	})
}

// Offsets returns the partitions of topic with their first offset and
// their end offset now.
func Offsets(ctx context.Context, cl *kafkago.Client, topic string) ([]Range, error) {
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
	out := make([]Range, 0, len(ids))
	for _, id := range ids {
		po, ok := byID[id]
		if !ok {
			return nil, fmt.Errorf("kafka: restore: no offsets for %s/%d", topic, id)
		}
		out = append(out, Range{ID: id, First: po.FirstOffset, Last: po.LastOffset})
	}
	return out, nil
}

// ReadRange calls fn with every record of the topic's partition p.ID from
// p.First up to p.Last, in offset order, and returns fn's first error. It
// finishes early when the reader's position passes the end (the last
// records were compacted away), and fails when the partition delivers
// nothing for long before its end.
func ReadRange(ctx context.Context, rd Reading, p Range, fn func(*kafkago.Message) error) error {
	if p.Last <= p.First {
		return nil
	}
	r := rd.Reader(p.ID)
	defer r.Close()
	if err := r.SetOffset(p.First); err != nil {
		return err
	}
	idle := 0
	for {
		done, err := readStretch(ctx, r, p, &idle, fn)
		if done {
			return err
		}
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		if !errors.Is(err, errIdle) {
			return fmt.Errorf("kafka: restore: read %s/%d: %w", rd.Topic, p.ID, err)
		}
		if r.Offset() >= p.Last {
			return nil
		}
		idle++
		if time.Duration(idle)*idleWait >= max(30*time.Second, 3*rd.RetryBackoffMax) {
			return fmt.Errorf("kafka: restore: %s/%d delivers nothing at offset %d, before its end offset %d",
				rd.Topic, p.ID, r.Offset(), p.Last)
		}
	}
}

// readStretch reads records and calls fn with them until the range's end
// (done) or fn fails (done, with its error), or a fetch fails: then it
// returns why, errIdle when no record came for idleWait. Every record
// resets *idle, the count of stretches that ended idle in a row. One watchdog per
// stretch of reading, pushed back by every record, rather than a timer per
// fetch, cancels the fetch that waits longer than idleWait.
func readStretch(ctx context.Context, r *kafkago.Reader, p Range, idle *int, fn func(*kafkago.Message) error) (done bool, err error) {
	fctx, cancel := context.WithCancelCause(ctx)
	wd := time.AfterFunc(idleWait, func() { cancel(errIdle) })
	defer wd.Stop()
	defer cancel(nil)
	for {
		msg, err := r.FetchMessage(fctx)
		if err != nil {
			if errors.Is(context.Cause(fctx), errIdle) {
				return false, errIdle
			}
			return false, err
		}
		wd.Reset(idleWait)
		*idle = 0
		if msg.Offset >= p.Last {
			return true, nil
		}
		if err := fn(&msg); err != nil {
			return true, err
		}
		if msg.Offset >= p.Last-1 {
			return true, nil
		}
	}
}

// errIdle ends a fetch that waited idleWait for a record.
var errIdle = errors.New("kafka: restore: no record for a while")
