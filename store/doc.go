// Package store is the durable state of the outbox: one bbolt file holding
// the pending events, their due indexes, dead letters, tombstones, endpoint
// state and a write-ahead changelog.
//
// # Layout
//
// Buckets (numeric keys big-endian):
//
//	events              ID → record (framed, versioned, CRC32-C)
//	due                 NextAttemptAt (8 bytes) ‖ ID → empty
//	due_by_endpoint     len(Endpoint) (2 bytes) ‖ Endpoint ‖ NextAttemptAt (8 bytes) ‖ ID → empty
//	due_endpoints       head NextAttemptAt (8 bytes) ‖ Endpoint → empty (one per endpoint with pending records)
//	dead                ID → record
//	tombstones          ID → deletedAt (8 bytes)
//	tombstones_by_time  deletedAt ‖ ID → why: empty (delivered or superseded) or "o" (dropped by an operator)
//	keys                len(Key) ‖ Key ‖ seq ‖ ID → empty (oldest pending per Key)
//	endpoints           name → endpoint state
//	changelog           LSN (8 bytes) → entry
//	attempts            len(ID) (2 bytes) ‖ ID ‖ seq (8 bytes) → attempt (framed like records)
//	meta                schema version, last LSN, shipped LSN, counters
//	archive, archive_by_topic, archive_by_endpoint, archive_by_key
//	                    delivered records and their indexes (Options.Archive; see archive.go)
//
// The attempts bucket is the attempt log: every delivery attempt of an
// event, written by Apply in the transaction of the outcome it answers
// (Outcome.Attempt; OutcomeAttempt for one that leaves its event as it
// is). One event's attempts are one run of keys in attempt order; the log
// keeps the last AttemptsPerEvent of each event, and an event's attempts
// are deleted when its tombstone is trimmed (a dead letter keeps them, a
// replayed event continues their numbering). They are local history: the
// changelog does not carry them, so Restore (and a rebuild from a
// changelog topic) starts an event's log afresh. Open adds the bucket to a
// file from before the attempt log, and refuses a file in which the
// application owns a bucket of that name.
//
// Every other top-level bucket belongs to the application (AppUpdate,
// AppView; IsReservedBucket tells which names are the store's): the store
// never reads or writes it, Check walks its pages without judging its
// values, and Compact copies it.
//
// A record with a not-before time (Record.DeliverAt) is inserted with its
// due index entry at that time, and Replay never puts it earlier, so Due
// never reads what is scheduled for later. The time is a field appended to
// the record's first layout, written only when set: older files decode, and
// records without one keep their bytes.
//
// The records of one fan-out event (Record.Topic) form a group: each
// delivery is stored under GroupID ‖ GroupSep ‖ Endpoint (the event while no
// endpoint subscribes to it under GroupID ‖ GroupSep, counted in
// Stats.Unrouted), so a group is one run of keys in every bucket. Insert
// deduplicates a group as a whole (any pending, dead or tombstoned member
// makes the event known; another event under its group ID is a conflict),
// the key index scopes a delivery's Key by its Endpoint, and Route swaps an
// unrouted event for its deliveries in one transaction. The topic is a
// field appended to the record, written only when set.
//
// The per-endpoint due index keeps one endpoint's backlog from stalling the
// others. Every pending record has an entry in due_by_endpoint as well as
// in due (a record without an Endpoint, a fan-out event kept unrouted,
// under the empty endpoint), written in the same transaction; every
// endpoint with pending records has one entry in due_endpoints at its head,
// the earliest NextAttemptAt of its records. A write transaction notes the
// head of each endpoint it touches before its first change and fixes the
// head entries of those whose head moved before it commits: its cost grows
// with the endpoints touched, not with the records. DueHeads reads the
// heads that are due and DueByEndpoint one endpoint's run of due entries,
// so passing over a held or saturated endpoint costs one entry whatever its
// backlog. Due and NextDue keep reading the due index. Files with this index
// carry schema 3 (with the key index) or 4 (without); builds before it
// understand up to 2 and refuse them. Open builds the index of an older
// file from its pending records, in transactions of at most 10,000 records
// (a meta mark says a build is under way; a build cut short starts over),
// and then writes the new schema. A read-only store of an older file reads
// with Due; DueHeads and DueByEndpoint fail with ErrNoEndpointIndex.
//
// The keys bucket (the key index) serves per-key order and UpsertKey. With
// Options.NoKeyIndex it stays empty and the schema version says so (4
// instead of 3; 2 instead of 1 in files before the per-endpoint due index);
// Open empties or rebuilds it when the option changes.
//
// # Guarantees
//
// Every write returns after its transaction has committed and been fsynced.
// Every state change appends its changelog entry in the same transaction that
// applies it, and the entry's LSN becomes the record's Version. Deletes are
// compare-and-delete on that version and use the stored key bytes; they
// leave a tombstone, so a later snapshot, a reopen or a Restore from the
// changelog never brings a delivered record back. A tombstone says whether
// the record was delivered (or superseded) or dropped by an operator (Get:
// StateDelivered or StateDeleted); the reason is kept in the value of the
// time index entry, which older builds never read, so files stay readable
// both ways without a schema change, and a tombstone an older build wrote
// reads as a delivery.
//
// Writes go through one committer goroutine owned by the Store: concurrent
// calls are grouped into one transaction (group commit, no timer: whatever
// queued during the previous commit forms the next one), and a
// read-modify-write (Update, UpsertKey) runs inside that serialized
// transaction, so concurrent updates of one record never lose one.
// AppUpdate's functions (application code that may fail after writing) run
// first in their transaction; when one fails, panics or is cancelled, the
// transaction is rolled back and run again without it, so only they may run
// more than once, and every other function runs once. Reads use
// short read transactions and return copies; nothing is held across I/O.
//
// Commits skip writing bbolt's freelist (NoFreelistSync, map freelist), so
// a commit stays cheap after a large backlog drains; Close writes it once,
// so a clean restart reads it instead of rebuilding it. After a crash, Open
// first checks every page that bbolt's rebuild of the freelist will walk,
// then bbolt rebuilds it; both take time in proportion to the file.
//
// # Bad files
//
// Open never panics on a bad file: an empty file, random bytes, a truncated
// file, a newer schema and a locked file each give an *OpenError naming the
// file and wrapping ErrNotDatabase, ErrCorrupt, ErrSchemaTooNew or ErrLocked.
// Memory faults and bbolt panics while reading a damaged file are turned into
// ErrCorrupt. A damaged inner page of a file left by a crash is found (on
// Unix) by Open's own walk (page identity and type, elements inside their page,
// children in range and referenced once, key order), because bbolt's rebuild
// of the freelist would meet it in a goroutine of its own and crash the
// process; the error names the page. Inner pages of a cleanly closed file are
// read only when used, and a damaged one is an ErrCorrupt of that read.
//
// Check verifies a whole file offline, without crashing on any damage: the
// page tree of every bucket (and, once that is sound, bbolt's own Tx.Check),
// every value decoded with the store's codecs, and the invariants between
// buckets and the counts in meta. It reports each problem with its bucket,
// page and key. Compact refuses a file that Check finds damaged.
package store
