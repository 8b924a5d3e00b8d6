package kafka

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/outboxd/outbox/internal/testkit"
	"github.com/outboxd/outbox/outbox"
)

// standbyStore returns the store g keeps as a standby of partition p while
// it tails, or nil.
func standbyStore(g *Group, p int) *outbox.Outbox {
	g.mu.Lock()
	s := g.standbys[p]
	g.mu.Unlock()
	if s == nil {
		return nil
	}
	return s.Store()
}

// ownedStore returns g's active store of partition p, or nil.
func ownedStore(g *Group, p int) *outbox.Outbox {
	g.mu.Lock()
	t := g.tasks[p]
	g.mu.Unlock()
	if t == nil {
		return nil
	}
	return t.ActiveStore()
}

// allEvents lists every pending event and dead letter of o, in ID order.
func allEvents(t *testing.T, o *outbox.Outbox) []outbox.Event {
	t.Helper()
	out, err := storeEvents(o)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// storeEvents returns every pending and dead event of o.
func storeEvents(o *outbox.Outbox) ([]outbox.Event, error) {
	var out []outbox.Event
	for _, st := range []outbox.State{outbox.StatePending, outbox.StateDead} {
		after := ""
		for {
			evs, next, err := o.List(context.Background(), outbox.ListOptions{State: st, After: after, Limit: 1000})
			if err != nil {
				return nil, err
			}
			out = append(out, evs...)
			if next == "" {
				break
			}
			after = next
		}
	}
	return out, nil
}

// byKeyOutcome answers by the record's key: keys ending in 0-3 are
// delivered, 4-5 dead, the rest retried (and, with the hour-long backoff
// of quietStores, left alone after their first attempt).
func byKeyOutcome(d *outbox.Delivery) outbox.Action {
	switch d.Key[len(d.Key)-1] {
	case '0', '1', '2', '3':
		return outbox.ActionSuccess
	case '4', '5':
		return outbox.ActionDead
	}
	return outbox.ActionRetry
}

// quietStores is groupStoreConfig with retries an hour apart: after one
// attempt each, the stores (and so the changelog) stop changing.
func quietStores(dir string, sink outbox.Sink) StoreConfig {
	sc := groupStoreConfig(dir, sink)
	sc.Outbox.BackoffInitial, sc.Outbox.BackoffMax = time.Hour, time.Hour
	// Trim the stores' own changelogs often and short, standbys' included.
	sc.Outbox.MaintenanceInterval, sc.Outbox.ChangelogMaxEntries = time.Millisecond, 20
	return sc
}

// caughtUp reports whether every partition is owned (active) by one of gs
// and kept as a standby by another, every owner has shipped its whole
// changelog, and every standby has applied its changelog partition up to
// the end offsets in end.
func caughtUp(parts int, end map[int]int64, gs ...*Group) error {
	for p := range parts {
		var owners, standbys []string
		for i, g := range gs {
			if ownedStore(g, p) != nil {
				owners = append(owners, fmt.Sprint(i))
			}
			for _, s := range g.Standbys() {
				if s.Partition != p {
					continue
				}
				if s.State != StandbyTailing || s.Applied != end[p] {
					return fmt.Errorf("partition %d: standby on member %d %s at offset %d of %d", p, i, s.State, s.Applied, end[p])
				}
				standbys = append(standbys, fmt.Sprint(i))
			}
		}
		if len(owners) != 1 || len(standbys) != 1 || owners[0] == standbys[0] {
			return fmt.Errorf("partition %d: owners %v, standbys %v", p, owners, standbys)
		}
	}
	for i, g := range gs {
		if sh := g.Metrics().Shipping; sh.LagEntries > 0 {
			return fmt.Errorf("member %d: %d changelog entries not shipped", i, sh.LagEntries)
		}
	}
	return nil
}

// With one standby replica, every partition of a two-member group has a
// standby on the member that does not own it; once the standbys caught up,
// each standby store holds exactly what its owner's store holds (pending
// events with their attempts and next attempt, dead letters with their
// reasons, and tombstones of the delivered), and when the owner leaves, the
// other member takes its partitions over from the standby stores without
// rebuilding them.
func TestStandbyKeepsTheOwnersStoreAndTakesOverWithoutRebuild(t *testing.T) {
	const parts, n = 4, 800
	c := newCluster(t, kfakeSeed(parts, "in")...)
	brokers := c.ListenAddrs()
	cfg := testConfig(brokers, "in")
	cfg.StandbyReplicas = 1
	sink := newRecorder("s")
	sink.action = byKeyOutcome

	a := startGroup(t, cfg, quietStores(t.TempDir(), sink))
	b := startGroup(t, cfg, quietStores(t.TempDir(), sink))
	newProducer(t, brokers, "in").produce(t, records(0, n, 97)...)
	testkit.WaitFor(t, 30*time.Second, "every record attempted once", func() bool { return sink.distinct() == n })

	// Every outcome committed: the delivered gone, the dead dead, the
	// retried pending with their attempt recorded.
	wantPending, wantDead := 0, 0
	for _, r := range records(0, n, 97) {
		switch byKeyOutcome(&outbox.Delivery{Key: string(r.Key)}) {
		case outbox.ActionRetry:
			wantPending++
		case outbox.ActionDead:
			wantDead++
		}
	}
	testkit.WaitFor(t, 30*time.Second, "every outcome committed", func() bool {
		pending, dead := 0, 0
		for _, g := range []*Group{a, b} {
			for _, ps := range g.Partitions() {
				pending += ps.Pending
				dead += ps.Dead
			}
			for _, o := range g.Stores() {
				evs, err := storeEvents(o)
				if err != nil {
					return false // handed over meanwhile: the group is still settling
				}
				for _, ev := range evs {
					if ev.Attempts == 0 {
						return false
					}
				}
			}
		}
		return pending == wantPending && dead == wantDead
	})
	cl := admin(t, brokers)
	changelog := DefaultGroupChangelogTopic(cfg.Group, cfg.Topic)
	testkit.WaitFor(t, 30*time.Second, "the standbys caught up with the owners", func() bool {
		ends, err := listEndOffsets(cl, changelog, parts)
		return err == nil && caughtUp(parts, ends, a, b) == nil
	})

	delivered := 0
	for p := range parts {
		var owner, standby *outbox.Outbox
		for _, g := range []*Group{a, b} {
			if o := ownedStore(g, p); o != nil {
				owner = o
			}
			if o := standbyStore(g, p); o != nil {
				standby = o
			}
		}
		// Versions are each store's own (a restore writes its own
		// changelog); everything else is the event's.
		want, got := unversioned(allEvents(t, owner)), unversioned(allEvents(t, standby))
		if len(want) == 0 {
			t.Errorf("partition %d: the owner holds nothing; the test proves nothing", p)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("partition %d: the standby holds %d events, the owner %d; first difference: %s; standbys %+v %+v; partitions %+v %+v",
				p, len(got), len(want), firstDiff(got, want), a.Standbys(), b.Standbys(), a.Partitions(), b.Partitions())
			continue
		}
		// The standby store trims its own changelog though it is never
		// started, every MaintenanceInterval (a millisecond here) whether
		// records arrive or not: untrimmed, it would hold at least one
		// entry per ID.
		ids := 0
		for id := range sink.snapshot() {
			if strings.HasPrefix(id, fmt.Sprintf("kafka:in:%d:", p)) {
				ids++
			}
		}
		testkit.WaitFor(t, 10*time.Second, fmt.Sprintf("the standby store of partition %d to trim its changelog (ChangelogMaxEntries 20) below its %d events", p, ids), func() bool {
			es, err := standby.Changelog().Entries(0, 100000)
			if err != nil {
				t.Fatal(err)
			}
			return len(es) < ids
		})
		// Every ID reads the same in both, the delivered ones as
		// tombstones: an ID read again is a duplicate wherever the
		// partition goes.
		for id := range sink.snapshot() {
			if !strings.HasPrefix(id, fmt.Sprintf("kafka:in:%d:", p)) {
				continue // another partition's
			}
			oev, oerr := owner.Get(context.Background(), id)
			sev, serr := standby.Get(context.Background(), id)
			oev.Version, sev.Version = 0, 0
			if oerr != nil || serr != nil || !reflect.DeepEqual(oev, sev) {
				t.Errorf("partition %d, %s: owner has %+v (%v), standby %+v (%v)", p, id, oev, oerr, sev, serr)
			}
			if oev.State == outbox.StateDelivered {
				delivered++
			}
		}
	}
	if delivered == 0 {
		t.Error("no delivered event in any store: the tombstones were not compared")
	}
	// A standby never delivers: each event was attempted once, by its
	// owner (a retry waits an hour).
	for id, k := range sink.snapshot() {
		if k != 1 {
			t.Errorf("%s attempted %d times before the take-over, want once", id, k)
		}
	}

	// The owner of a's partitions leaves: b takes them over from its
	// standbys, catching up the tail a wrote at its hand-over.
	restoresBefore := b.Metrics().Restores
	pendingBefore := pendingOf(a) + pendingOf(b)
	closeGroup(t, a)
	testkit.WaitFor(t, 30*time.Second, "b to own every partition", func() bool { return activeCount(b) == parts })
	m := b.Metrics()
	if m.Restores.Rebuild != restoresBefore.Rebuild {
		t.Errorf("b rebuilt %d partition stores at the take-over, want none (restores before %+v, after %+v)",
			m.Restores.Rebuild-restoresBefore.Rebuild, restoresBefore, m.Restores)
	}
	for _, ps := range m.Partitions {
		if ps.Restore.Mode != RestoreCheckpoint {
			t.Errorf("partition %d restored by %s, want from its checkpoint", ps.Partition, ps.Restore.Mode)
		}
		t.Logf("partition %d: caught up %d records from offset %d to %d in %s", ps.Partition, ps.Restore.Records,
			ps.Restore.From, ps.Restore.To, ps.Restore.Duration.Round(time.Millisecond))
	}
	if got := pendingOf(b); got != pendingBefore {
		t.Errorf("b holds %d pending events after the take-over, the group held %d before", got, pendingBefore)
	}
	if len(m.Standbys) != 0 {
		t.Errorf("b alone keeps standbys %+v; a member never keeps one of its own partitions", m.Standbys)
	}
}

// firstDiff describes the first event that differs between got and want.
func firstDiff(got, want []outbox.Event) string {
	for i := range min(len(got), len(want)) {
		if !reflect.DeepEqual(got[i], want[i]) {
			return fmt.Sprintf("standby %+v, owner %+v", got[i], want[i])
		}
	}
	return fmt.Sprintf("%d events vs %d", len(got), len(want))
}

// unversioned returns evs with their Version zeroed.
func unversioned(evs []outbox.Event) []outbox.Event {
	for i := range evs {
		evs[i].Version = 0
	}
	return evs
}
