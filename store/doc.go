// Package store is the durable state of the outbox: one bbolt file holding
// the pending events, their due index, dead letters, tombstones, endpoint
// state and a write-ahead changelog.
//
// # Layout
//
// Buckets (numeric keys big-endian):
//
//	events              ID → record (framed, versioned, CRC32-C)
//	due                 NextAttemptAt (8 bytes) ‖ ID → empty
//	dead                ID → record
//	tombstones          ID → deletedAt (8 bytes)
//	tombstones_by_time  deletedAt ‖ ID → empty (trimming)
//	keys                len(Key) ‖ Key ‖ seq ‖ ID → empty (oldest pending per Key)
//	endpoints           name → endpoint state
//	changelog           LSN (8 bytes) → entry
//	meta                schema version, last LSN, shipped LSN, counters
//
// # Guarantees
//
// Every write returns after its transaction has committed and been fsynced.
// Every state change appends its changelog entry in the same transaction that
// applies it, and the entry's LSN becomes the record's Version. Deletes are
// compare-and-delete on that version and use the stored key bytes; they
// leave a tombstone, so a later snapshot, a reopen or a Restore from the
// changelog never brings a delivered record back.
//
// Writes go through one committer goroutine owned by the Store: concurrent
// calls are grouped into one transaction (group commit, no timer: whatever
// queued during the previous commit forms the next one), and a
// read-modify-write (Update, UpsertKey) runs inside that serialized
// transaction, so concurrent updates of one record never lose one. Reads use
// short read transactions and return copies; nothing is held across I/O.
//
// Commits skip writing bbolt's freelist (NoFreelistSync, map freelist), so
// a commit stays cheap after a large backlog drains; Close writes it once,
// so a clean restart opens in milliseconds. After a crash, Open rebuilds it
// by walking the file (about 5 s for a million records).
//
// # Bad files
//
// Open never panics on a bad file: an empty file, random bytes, a truncated
// file, a newer schema and a locked file each give an *OpenError naming the
// file and wrapping ErrNotDatabase, ErrCorrupt, ErrSchemaTooNew or ErrLocked.
// Memory faults and bbolt panics while reading a damaged file are turned into
// ErrCorrupt. One case is beyond reach: bbolt rebuilds its freelist on open
// in a goroutine of its own that panics on a damaged inner page.
package store
