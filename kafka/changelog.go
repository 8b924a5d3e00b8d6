package kafka

import (
	"fmt"
	"strconv"
	"time"

	kafkago "github.com/segmentio/kafka-go"

	"github.com/outboxd/outbox/outbox"
)

// The changelog topic's record format. Key: the event ID. Value:
// outbox.ChangelogEntry.MarshalBinary of the changelog entry (which carries the record as it is
// after the change), or null for a deleting op (delivered, dropped,
// superseded), so that compaction keeps only the latest state of each event
// and finally forgets delivered ones. Every record also carries the op and
// the LSN in headers, so a tombstone says what it was.
const (
	// HeaderOp holds the changelog op name ("enqueue", "delete", ...).
	HeaderOp = "outbox-op"
	// HeaderLSN holds the entry's LSN in decimal.
	HeaderLSN = "outbox-lsn"
	// HeaderEpoch holds, in group mode, the fencing epoch of the owner that
	// wrote the record, in decimal: a restore skips a record whose epoch is
	// below one it has already applied for that partition.
	HeaderEpoch = "outbox-epoch"
	// HeaderGeneration holds, in group mode, the consumer group generation
	// the writer owned the partition in, in decimal (for the record; fencing
	// reads the epoch).
	HeaderGeneration = "outbox-generation"
)

// A fence record is written to a changelog partition by each new owner once
// its store is restored, before it writes anything else: key fenceKey (not
// a valid event ID), op opFence, its epoch in HeaderEpoch and as the value
// (so that compaction keeps the latest one). Restores apply no record with
// a lower epoch after it.
const (
	opFence  = "fence"
	fenceKey = "\x00outbox-fence"
)

// stamp is what group mode adds to every changelog record: the partition
// it goes to (read by the writer's balancer), the owner's epoch and its
// group generation.
type stamp struct {
	partition  int
	epoch      int64
	generation int32
}

// apply adds the stamp's headers to m and routes it to the stamp's
// partition.
func (st stamp) apply(m *kafkago.Message) {
	m.Headers = append(m.Headers,
		kafkago.Header{Key: HeaderEpoch, Value: strconv.AppendInt(nil, st.epoch, 10)},
		kafkago.Header{Key: HeaderGeneration, Value: strconv.AppendInt(nil, int64(st.generation), 10)})
	m.WriterData = st.partition
}

// fenceMessage is the fence record of an owner with this stamp.
func fenceMessage(st stamp) kafkago.Message {
	m := kafkago.Message{
		Key:     []byte(fenceKey),
		Value:   strconv.AppendInt(nil, st.epoch, 10),
		Headers: []kafkago.Header{{Key: HeaderOp, Value: []byte(opFence)}},
	}
	st.apply(&m)
	return m
}

// partitionBalancer sends each message to the partition its stamp names.
type partitionBalancer struct{}

// Balance implements kafkago.Balancer.
func (partitionBalancer) Balance(m kafkago.Message, partitions ...int) int {
	if p, ok := m.WriterData.(int); ok {
		return p
	}
	return partitions[0] // never: every group-mode record is stamped
}

// recordEpoch returns the epoch header of a changelog record (0 without
// one: a record written outside group mode) and whether it is a fence.
// A malformed epoch fails with ErrBadChangelogRecord.
func recordEpoch(headers []kafkago.Header) (epoch int64, fence bool, err error) {
	for _, h := range headers {
		switch h.Key {
		case HeaderEpoch:
			n, perr := strconv.ParseInt(string(h.Value), 10, 64)
			if perr != nil || n < 0 {
				return 0, false, fmt.Errorf("%w: %s header %q is not a non-negative number", ErrBadChangelogRecord, HeaderEpoch, h.Value)
			}
			epoch = n
		case HeaderOp:
			fence = string(h.Value) == opFence
		}
	}
	return epoch, fence, nil
}

// entryMessage turns a changelog entry into its changelog topic record.
func entryMessage(e outbox.ChangelogEntry) kafkago.Message {
	m := kafkago.Message{
		Key:  []byte(e.ID),
		Time: e.Time,
		Headers: []kafkago.Header{
			{Key: HeaderOp, Value: []byte(e.Op.String())},
			{Key: HeaderLSN, Value: strconv.AppendUint(nil, e.LSN, 10)},
		},
	}
	if !e.Op.Deleting() {
		m.Value, _ = e.MarshalBinary() // never fails
	}
	return m
}

// decodeChangelogRecord turns a changelog topic record back into the entry it
// was shipped from (for a tombstone: the op, ID, LSN and time, no record).
// Errors wrap ErrBadChangelogRecord.
func decodeChangelogRecord(key, value []byte, headers []kafkago.Header, ts time.Time) (outbox.ChangelogEntry, error) {
	var none outbox.ChangelogEntry
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrBadChangelogRecord, fmt.Sprintf(format, args...))
	}
	if len(key) == 0 {
		return none, bad("no key")
	}
	var opName, lsnText []byte
	var haveOp, haveLSN bool
	for _, h := range headers {
		switch h.Key {
		case HeaderOp:
			opName, haveOp = h.Value, true
		case HeaderLSN:
			lsnText, haveLSN = h.Value, true
		}
	}
	var lsn uint64
	if haveLSN {
		n, err := strconv.ParseUint(string(lsnText), 10, 64)
		if err != nil {
			return none, bad("key %q: %s header %q is not a number", key, HeaderLSN, lsnText)
		}
		lsn = n
	}
	if len(value) == 0 {
		op := outbox.OpDelete
		if haveOp {
			var ok bool
			if op, ok = outbox.ParseChangelogOp(string(opName)); !ok {
				return none, bad("key %q: unknown op %q", key, opName)
			}
			if !op.Deleting() {
				return none, bad("key %q: null value for non-deleting op %v", key, op)
			}
		}
		return outbox.ChangelogEntry{LSN: lsn, Op: op, ID: string(key), Version: lsn, Time: ts.UTC()}, nil
	}
	e, err := outbox.DecodeChangelogEntry(value)
	if err != nil {
		return none, bad("key %q: %v", key, err)
	}
	if e.ID != string(key) {
		return none, bad("key %q holds an entry for ID %q", key, e.ID)
	}
	// The decoder checked that the record is the entry's (its store ID,
	// which for a delivery of a topic event is not the event's ID).
	if _, ok := e.Event(); e.Op.Deleting() || !ok {
		return none, bad("key %q: %v entry without its record", key, e.Op)
	}
	return e, nil
}
