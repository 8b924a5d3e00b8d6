// Package changelog is the changelog topic of package kafka: the format of
// its records, and the reading of ranges of its partitions.
//
// A record's key is the event ID; its value is
// outbox.ChangelogEntry.MarshalBinary of the entry (the event after the
// change), or null for a deleting op, so that compaction keeps only the
// latest state of each event and finally forgets delivered ones. Every
// record carries the op and the LSN in headers, so a tombstone says what
// it was. In group mode a record also carries a Stamp: the fencing epoch
// of the owner that wrote it and its group generation, and it goes to the
// changelog partition of its store's partition.
//
// A fence record is written to a changelog partition by each new owner
// before anything else, with its epoch: a reader skips every later record
// whose epoch is below the highest it has seen (a zombie's writes).
//
// Reading a range stops at its end offset, or earlier when the partition's
// last records were compacted away, and fails when the partition delivers
// nothing for long before its end.
package changelog
