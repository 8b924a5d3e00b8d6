package changelog

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	kafkago "github.com/segmentio/kafka-go"

	"github.com/outboxd/outbox/outbox"
)

// The headers of a changelog record.
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

// ErrBadRecord is wrapped by the error for a changelog record that cannot
// be decoded (corrupt value, missing key, unknown operation header).
var ErrBadRecord = errors.New("kafka: bad changelog record")

// A fence record is written to a changelog partition by each new owner once
// its store is restored, before it writes anything else: key fenceKey (not
// a valid event ID), op opFence, its epoch in HeaderEpoch and as the value
// (so that compaction keeps the latest one). Restores apply no record with
// a lower epoch after it.
const (
	opFence  = "fence"
	fenceKey = "\x00outbox-fence"
)

// Stamp is what group mode adds to every changelog record: the partition
// it goes to (read by PartitionBalancer), the owner's epoch and its group
// generation.
type Stamp struct {
	// Partition is the changelog partition the record goes to.
	Partition int
	// Epoch is the writer's fencing epoch.
	Epoch int64
	// Generation is the group generation the writer owns the partition in.
	Generation int32
}

// Apply adds the stamp's headers to m and routes it to the stamp's
// partition.
func (st Stamp) Apply(m *kafkago.Message) {
	m.Headers = append(m.Headers,
		kafkago.Header{Key: HeaderEpoch, Value: strconv.AppendInt(nil, st.Epoch, 10)},
		kafkago.Header{Key: HeaderGeneration, Value: strconv.AppendInt(nil, int64(st.Generation), 10)})
	m.WriterData = st.Partition
}

// FenceMessage is the fence record of an owner with this stamp.
func FenceMessage(st Stamp) kafkago.Message {
	m := kafkago.Message{
		Key:     []byte(fenceKey),
		Value:   strconv.AppendInt(nil, st.Epoch, 10),
		Headers: []kafkago.Header{{Key: HeaderOp, Value: []byte(opFence)}},
	}
	st.Apply(&m)
	return m
}

// PartitionBalancer sends each message to the partition its stamp names.
type PartitionBalancer struct{}

// Balance implements kafkago.Balancer.
func (PartitionBalancer) Balance(m kafkago.Message, partitions ...int) int {
	if p, ok := m.WriterData.(int); ok {
		return p
	}
	return partitions[0] // never: every group-mode record is stamped
}

// RecordEpoch returns the epoch header of a changelog record (0 without
// one: a record written outside group mode) and whether it is a fence.
// A malformed epoch fails with ErrBadRecord.
func RecordEpoch(headers []kafkago.Header) (epoch int64, fence bool, err error) {
	for _, h := range headers {
		switch h.Key {
		case HeaderEpoch:
			n, perr := strconv.ParseInt(string(h.Value), 10, 64)
			if perr != nil || n < 0 {
				return 0, false, fmt.Errorf("%w: %s header %q is not a non-negative number", ErrBadRecord, HeaderEpoch, h.Value)
			}
			epoch = n
		case HeaderOp:
			fence = string(h.Value) == opFence
		}
	}
	return epoch, fence, nil
}

// EntryMessage turns a changelog entry into its changelog topic record.
func EntryMessage(e outbox.ChangelogEntry) kafkago.Message {
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

// DecodeRecord turns a changelog topic record back into the entry it
// was shipped from (for a tombstone: the op, ID, LSN and time, no record).
// Errors wrap ErrBadRecord.
func DecodeRecord(key, value []byte, headers []kafkago.Header, ts time.Time) (outbox.ChangelogEntry, error) {
	var none outbox.ChangelogEntry
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrBadRecord, fmt.Sprintf(format, args...))
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
