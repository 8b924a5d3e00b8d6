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
)

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
	ev, ok := e.Event()
	if e.Op.Deleting() || !ok {
		return none, bad("key %q: %v entry without its record", key, e.Op)
	}
	if ev.ID != e.ID {
		return none, bad("key %q: record ID %q differs", key, ev.ID)
	}
	return e, nil
}
