package kafka

import (
	"iter"
	"maps"
	"slices"
	"time"

	"github.com/outboxd/outbox/kafka/internal/partition"
	"github.com/outboxd/outbox/outbox"
)

// Stale copy sources, as StaleCopy.Source reports them.
const (
	// StaleOwned: the store of a partition this instance owns but does not
	// serve: caught up from its checkpoint (at the checkpoint's offset),
	// restored and not started yet (at the changelog's end), or being
	// handed over (at the end of what this ownership wrote).
	StaleOwned = "owned"
	// StaleStandby: a standby's store (Config.StandbyReplicas), at the
	// offset it has applied.
	StaleStandby = "standby"
	// StaleCheckpoint: a store closed with its checkpoint by this
	// instance's last or current generation, at the checkpoint's offset.
	StaleCheckpoint = "checkpoint"
)

// StaleCopy describes a copy of a partition's store that this instance
// holds but does not serve, as Group.StaleCopies yields it.
type StaleCopy struct {
	// Partition is the partition of the ingest and changelog topics.
	Partition int
	// Offset is the changelog offset the copy reflects: it holds every
	// record of the changelog partition below it, and perhaps some more.
	Offset int64
	// Source is StaleOwned, StaleStandby or StaleCheckpoint.
	Source string
}

// StaleCopies returns the copies of partition stores that this instance
// holds but does not serve, one per partition in partition order, each
// with its store opened for reading: the store of a partition it owns that
// is not serving yet (or any more), else its standby's store, else the
// store closed with a checkpoint in its last or current generation. Such
// a copy answers reads of a partition while it moves between members; it
// may miss what was written after Offset, and may still hold events
// delivered since.
//
// A store is valid only in the body of the loop that ranges over the
// copies; it must be read only (its writes fail or are lost to the next
// restore), and the body must not block: the holder of a copy waits for
// the reads under way before it closes the store, and a copy read from its
// checkpoint holds the file's lock meanwhile.
//
// A copy passing from one holder to the next here (a file being opened by
// the partition's new task or standby, a store being stopped and reopened
// to be handed over, a file whose holder is still closing it) is waited
// for rather than skipped, for up to a second over the whole iteration:
// the partition is yielded once its new holder publishes the store, or
// skipped if it never does in that time.
func (g *Group) StaleCopies() iter.Seq2[StaleCopy, *outbox.Outbox] {
	return func(yield func(StaleCopy, *outbox.Outbox) bool) {
		deadline := time.Now().Add(partition.CopyWait)
		g.mu.Lock()
		tasks, standbys := maps.Clone(g.tasks), maps.Clone(g.standbys)
		parts := slices.Concat(g.lastHeld, heldPartitions(tasks, standbys))
		g.mu.Unlock()
		slices.Sort(parts)
		for _, p := range slices.Compact(parts) {
			if !g.readStale(p, tasks[p], standbys[p], deadline, yield) {
				return
			}
		}
	}
}

// readStale yields partition p's copy, if there is one: t's store when p
// is owned (none while t serves: its answers are fresh), else s's, else
// the checkpointed file, else t's or s's if published meanwhile, waiting
// for copies in passing until deadline. It returns false when yield did.
func (g *Group) readStale(p int, t *partition.Task, s *partition.Standby, deadline time.Time, yield func(StaleCopy, *outbox.Outbox) bool) bool {
	more := true
	read := func(source string) partition.ReadFunc {
		return func(o *outbox.Outbox, offset int64) {
			more = yield(StaleCopy{Partition: p, Offset: offset, Source: source}, o)
		}
	}
	if t != nil && t.ActiveStore() != nil {
		return true
	}
	held := func() bool {
		return t != nil && t.Read(deadline, read(StaleOwned)) || s != nil && s.Read(deadline, read(StaleStandby))
	}
	// A holder that opens the file publishes its store once it has it: it
	// is asked again when the file could not be read.
	_ = held() || g.env.ReadCheckpointed(p, deadline, read(StaleCheckpoint)) || held()
	return more
}

// heldPartitions returns the partitions of tasks and standbys.
func heldPartitions(tasks map[int]*partition.Task, standbys map[int]*partition.Standby) []int {
	return slices.Concat(slices.Collect(maps.Keys(tasks)), slices.Collect(maps.Keys(standbys)))
}
