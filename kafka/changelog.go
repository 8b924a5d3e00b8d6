package kafka

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
