package kafka

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outboxd/outbox/internal/testkit"
	"github.com/outboxd/outbox/outbox"
)

// pendingGroupPair starts two members keeping one standby replica, whose
// events all stay pending, with n records produced and every store and
// standby caught up with the changelog.
func pendingGroupPair(t *testing.T, parts, n int) (a, b *Group, brokers []string, cfg Config) {
	t.Helper()
	c := newCluster(t, kfakeSeed(int32(parts), "in")...)
	brokers = c.ListenAddrs()
	cfg = testConfig(brokers, "in")
	cfg.StandbyReplicas = 1
	sink := newRecorder("s")
	sink.action = func(*outbox.Delivery) outbox.Action { return outbox.ActionRetry }
	a = startGroup(t, cfg, quietStores(t.TempDir(), sink))
	b = startGroup(t, cfg, quietStores(t.TempDir(), sink))
	newProducer(t, brokers, "in").produce(t, records(0, n, 97)...)
	testkit.WaitFor(t, 30*time.Second, "every record attempted once", func() bool { return sink.distinct() == n })
	cl := admin(t, brokers)
	changelog := DefaultGroupChangelogTopic(cfg.Group, cfg.Topic)
	testkit.WaitFor(t, 30*time.Second, "the standbys caught up with the owners", func() bool {
		ends, err := listEndOffsets(cl, changelog, parts)
		return err == nil && caughtUp(parts, ends, a, b) == nil
	})
	return a, b, brokers, cfg
}

// staleCopies reads g's stale copies: by partition, the copy and whether
// its store holds the partition's first record's event.
func staleCopies(t *testing.T, g *Group) map[int]StaleCopy {
	t.Helper()
	out := map[int]StaleCopy{}
	for c, o := range g.StaleCopies() {
		if _, ok := out[c.Partition]; ok {
			t.Errorf("partition %d yielded twice", c.Partition)
		}
		out[c.Partition] = c
		if _, err := o.Get(context.Background(), RecordID("in", c.Partition, 0)); err != nil {
			t.Errorf("%+v: the first record's event: %v", c, err)
		}
	}
	return out
}

// A member reads the partitions it keeps as standbys but not those it
// serves (their answers are fresh); once it left the group, the stores it
// closed with their checkpoints read at the checkpoints' offsets; a member
// that serves every partition has no stale copy.
func TestStaleCopiesAreThePartitionsAMemberHoldsButDoesNotServe(t *testing.T) {
	const parts = 4
	a, b, _, _ := pendingGroupPair(t, parts, 200)

	copies := staleCopies(t, a)
	standbys := map[int]StaleCopy{}
	for _, s := range a.Standbys() {
		standbys[s.Partition] = StaleCopy{Partition: s.Partition, Offset: s.Applied, Source: StaleStandby}
	}
	if len(standbys) == 0 || !maps.Equal(copies, standbys) {
		t.Fatalf("a's stale copies %+v, want its standbys %+v", copies, standbys)
	}
	for p := range copies {
		if ownedStore(a, p) != nil {
			t.Errorf("partition %d is served by a and read as a stale copy", p)
		}
	}

	closeGroup(t, a)
	testkit.WaitFor(t, 30*time.Second, "b to own every partition", func() bool { return activeCount(b) == parts })
	copies = staleCopies(t, a)
	if got := slices.Sorted(maps.Keys(copies)); !slices.Equal(got, []int{0, 1, 2, 3}) {
		t.Errorf("after a left, its checkpointed copies are of partitions %v, want all it held: %+v", got, copies)
	}
	for _, c := range copies {
		if c.Source != StaleCheckpoint || c.Offset <= 0 {
			t.Errorf("after a left: %+v, want a checkpoint at a positive offset", c)
		}
	}
	if copies := staleCopies(t, b); len(copies) != 0 {
		t.Errorf("b serves every partition, yet has stale copies %+v", copies)
	}
}

// Reading the stale copies all the time while the partitions move (a third
// member joins, then leaves) never sees a store closed under it, and never
// holds up the restores, hand-overs and standbys of the rebalances.
func TestStaleCopiesAreSafeWhileThePartitionsMove(t *testing.T) {
	const parts = 4
	a, b, _, cfg := pendingGroupPair(t, parts, 200)

	ctx, stop := context.WithCancel(context.Background())
	var reads atomic.Int64
	var readers sync.WaitGroup
	for _, g := range []*Group{a, b} {
		readers.Go(func() {
			for ctx.Err() == nil {
				for c, o := range g.StaleCopies() {
					_, err := o.Get(context.Background(), RecordID("in", c.Partition, 0))
					if err != nil && !errors.Is(err, outbox.ErrNotFound) {
						t.Errorf("reading %+v: %v", c, err)
					}
					reads.Add(1)
				}
			}
		})
	}
	defer func() {
		stop()
		readers.Wait()
	}()

	sink := newRecorder("c")
	sink.action = func(*outbox.Delivery) outbox.Action { return outbox.ActionRetry }
	c := startGroup(t, cfg, quietStores(t.TempDir(), sink))
	testkit.WaitFor(t, 60*time.Second, "every partition served by one of three members", func() bool {
		return activeCount(c) > 0 && activeCount(a)+activeCount(b)+activeCount(c) == parts
	})
	closeGroup(t, c)
	testkit.WaitFor(t, 60*time.Second, "every partition served by a and b again", func() bool {
		return activeCount(a)+activeCount(b) == parts
	})
	if reads.Load() == 0 {
		t.Error("no stale copy was read: the test proves nothing")
	}
}
