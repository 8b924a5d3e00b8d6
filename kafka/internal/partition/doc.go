// Package partition runs the partitions of a consumer group in which the
// state follows the partitions: a Task for each partition this instance
// owns in a generation, a Standby for each partition it keeps a warm copy
// of.
//
// A Task restores its partition's store before anything of it is ingested
// or delivered: from the kept local store and its checkpoint when they are
// usable, caught up to the end of the changelog partition, otherwise
// rebuilt from the whole changelog partition into a new file that replaces
// the old one only once complete. Records are applied in offset order:
// the last record per ID wins, a tombstone deletes, and a record whose
// epoch is below one already applied is skipped (fencing). Once restored,
// the owner writes a fence record with an epoch above every epoch it saw,
// then starts the store, ingests the partition into it and ships its
// changelog with that epoch. When the generation ends it hands the
// partition over: the store stops, the rest of its changelog is shipped,
// the group commits the offsets (Handover), and the store is closed with a
// checkpoint only when all of that succeeded and nobody else wrote to the
// changelog partition meanwhile.
//
// A Standby opens the partition's store (resuming from its checkpoint when
// usable), never starts it, applies the changelog partition as it grows
// as a restore does, trims the store's own changelog and tombstones
// itself, and closes it with a checkpoint of the offset it applied.
//
// A checkpoint is removed durably before the store it vouches for
// changes, so a crash never leaves one that vouches for a changed store.
// It is written once nothing writes to the store any more, just before the
// store is closed.
//
// While a partition moves, the stores of tasks that do not serve (caught
// up from a checkpoint, restored and not started, handed over) and of
// standbys can be read as copies (Task.Read, Standby.Read), and a store
// closed with its checkpoint from its file (Env.ReadCheckpointed). A
// holder publishes its store for reading and retires it just before
// closing it, waiting for the reads under way. A standby's store is so
// readable from the moment it is opened until it is closed, a task's until
// it serves and again once its hand-over reopened it, and the file from
// the close until the next holder opens it. The gaps between are waited
// for by reads, up to their deadline (CopyWait): a holder about to open
// the file, or to stop and reopen its store for the hand-over, says that
// its store is coming (readable.expect) before it takes the file, and a
// read of the file whose holder still has it open tries again while its
// checkpoint stays.
package partition
