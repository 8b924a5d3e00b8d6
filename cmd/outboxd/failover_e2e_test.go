//go:build unix

package main

import (
	"slices"
	"testing"
	"time"

	"github.com/outboxd/outbox/internal/testkit"
)

// The failover tests of partition-owned state (issue 18): three outboxd
// instances in one consumer group on a 6-partition topic of a kfake broker,
// each with its own state, losing and regaining members. The harness is in
// failover_harness_test.go.

// waitLong bounds the waits for the group and the deliveries: generous on a
// busy two-core machine under the race detector. The figures the tests log
// are the measured times.
const waitLong = 60 * time.Second

// evenOdd splits idList into the IDs at even and at odd positions.
func evenOdd(idList []string) (even, odd []string) {
	for i, id := range idList {
		if i%2 == 0 {
			even = append(even, id)
		} else {
			odd = append(odd, id)
		}
	}
	return even, odd
}

// Must show 1: 3,000 records pending (the receiver answers 503), one of
// three instances is killed and its disk lost; once the receiver recovers,
// the survivors deliver every record, its partitions' included.
func TestFailoverWithDiskLostDeliversEveryRecord(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	f.rc.setRespond(answerAll503)
	a, b, c := f.add("a"), f.add("b"), f.add("c")
	f.waitBalanced(waitLong, a, b, c)

	all := ids("lost", 0, 3000)
	f.producer().mustWrite(t, all)
	f.waitPending(waitLong, len(all))
	lostParts := a.owned()
	s, _ := a.stats()
	t.Logf("a owns partitions %v with %d pending events", lostParts, s.pendingIngested())

	killed := time.Now()
	a.kill()
	a.deleteState()
	f.rc.setRespond(nil)
	took := f.waitDelivered(waitLong, all)
	t.Logf("SIGKILL (and the receiver's recovery) to every record delivered: %s (session timeout %s); the survivors' group events since:",
		took.Round(time.Millisecond), fleetSession)
	logTimeline(t, killed, []string{"kafka: partitions assigned", "kafka: partition restored", "kafka: partition handed over",
		"kafka: commit offsets", "kafka: cannot join the consumer group; ingest paused, retrying"}, b, c)
	settled := f.waitBalanced(waitLong, b, c)
	t.Logf("the group settled on b and c %s after every record was delivered", settled.Round(time.Millisecond))
	t.Logf("duplicates: %d of %d records delivered more than once", f.duplicates(all), len(all))
}

// Must show 2: records delivered (and their tombstones shipped) before an
// instance is killed with its disk are not delivered again by the
// survivors that rebuild its partitions.
func TestFailoverDoesNotResurrectDeliveredRecords(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	all := ids("res", 0, 1200)
	first, rest := evenOdd(all)
	f.rc.setRespond(answerOnly(first))
	a, b, c := f.add("a"), f.add("b"), f.add("c")
	f.waitBalanced(waitLong, a, b, c)

	f.producer().mustWrite(t, all)
	f.waitDelivered(waitLong, first)
	f.waitPending(waitLong, len(rest))
	f.waitTombstoned(waitLong, first)
	before := f.ackedCounts(first)
	bound := inFlightBound(len(a.owned()))

	a.kill()
	a.deleteState()
	f.rc.setRespond(nil)
	f.waitDelivered(waitLong, rest)
	f.waitBalanced(waitLong, b, c)
	f.waitPending(waitLong, 0)
	again := f.redelivered(before)
	t.Logf("after the failover, %d of the %d records delivered before the kill were delivered again (bound %d)", again, len(first), bound)
	if again > bound {
		t.Errorf("%d deliveries of records delivered and shipped before the kill, more than the %d in flight or uncommitted an instance can lose", again, bound)
	}
}

// Must show 3: a rolling restart of the three instances (SIGTERM, restart,
// wait until it owns partitions again, next) under a steady produce load
// loses nothing acknowledged; duplicates only of in-flight deliveries.
func TestRollingRestartUnderLoadLosesNothing(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	a, b, c := f.add("a"), f.add("b"), f.add("c")
	fleet := []*instance{a, b, c}
	f.waitBalanced(waitLong, fleet...)

	ld := f.startLoad("roll", 10, 50*time.Millisecond)
	testkit.WaitFor(t, waitLong, "the load under way", func() bool { return ld.count() >= 200 })
	for _, in := range fleet {
		took := in.stop()
		in.restart()
		back := f.waitBalanced(waitLong, fleet...)
		t.Logf("%s: SIGTERM exit in %s, owning partitions %v again %s after its restart; restores %v",
			in.name, took.Round(time.Millisecond), in.owned(), back.Round(time.Millisecond), in.restores())
		if why := in.rebuildReasons(); len(why) > 0 {
			t.Logf("%s rebuilt partitions that had a local store: %v", in.name, why)
		}
	}
	n := ld.count()
	testkit.WaitFor(t, waitLong, "more load after the last restart", func() bool { return ld.count() >= n+200 })
	acked, failed := ld.finish()
	took := f.waitDelivered(waitLong, acked)
	dups := f.duplicates(acked)
	bound := len(fleet) * inFlightBound(fleetPartitions/len(fleet))
	t.Logf("rolling restart: %d records acknowledged (%d refused by the broker), all delivered %s after the load stopped; %d duplicates (bound %d)",
		len(acked), failed, took.Round(time.Millisecond), dups, bound)
	if dups > bound {
		t.Errorf("%d duplicate deliveries, more than the %d in flight at three hand-overs", dups, bound)
	}
}

// Must show 4: scaling 1 → 3 → 1 instances under load moves the partitions
// with their pending events, and loses nothing.
func TestScaleOutAndInUnderLoadLosesNothing(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	f.rc.setRespond(answerAll503) // pending events to move
	a := f.add("a")
	f.waitBalanced(waitLong, a)
	ld := f.startLoad("scale", 10, 50*time.Millisecond)
	testkit.WaitFor(t, waitLong, "the load under way", func() bool { return ld.count() >= 300 })

	b, c := f.add("b"), f.add("c")
	out := f.waitBalanced(waitLong, a, b, c)
	moved := map[string]int{}
	for _, in := range []*instance{b, c} {
		s, _ := in.stats()
		moved[in.name] = s.pendingIngested()
	}
	t.Logf("scale out: three instances own the partitions after %s; pending on the new ones %v", out.Round(time.Millisecond), moved)
	for name, n := range moved {
		if n == 0 {
			t.Errorf("%s owns partitions with no pending events: they did not move with the partitions", name)
		}
	}
	f.rc.setRespond(nil)
	n := ld.count()
	testkit.WaitFor(t, waitLong, "more load on three instances", func() bool { return ld.count() >= n+200 })

	b.stop()
	c.stop()
	in := f.waitBalanced(waitLong, a)
	t.Logf("scale in: a owns every partition again %s after the others stopped; restores %v", in.Round(time.Millisecond), a.restores())
	if why := a.rebuildReasons(); len(why) > 0 {
		t.Logf("a rebuilt partitions that had a local store: %v", why)
	}
	n = ld.count()
	testkit.WaitFor(t, waitLong, "more load on one instance", func() bool { return ld.count() >= n+200 })
	acked, failed := ld.finish()
	took := f.waitDelivered(waitLong, acked)
	t.Logf("scale 1→3→1: %d records acknowledged (%d refused by the broker), all delivered %s after the load stopped; %d duplicates",
		len(acked), failed, took.Round(time.Millisecond), f.duplicates(acked))
}

// Must show 5: an instance paused past its session timeout while its
// partitions hold pending events is a zombie once resumed: the survivors
// took over and delivered, and what the zombie writes before it notices is
// not applied over their state by a later restore, neither by the zombie
// catching up its kept stores nor by a rebuild from the whole changelog.
func TestZombieWritesAreFencedFromRestore(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	f.rc.setRespond(answerAll503)
	a, b, c := f.add("a"), f.add("b"), f.add("c")
	f.waitBalanced(waitLong, a, b, c)
	all := ids("zombie", 0, 600)
	f.producer().mustWrite(t, all)
	f.waitPending(waitLong, len(all))
	zparts := a.owned()

	a.pause()
	paused := time.Now()
	f.waitBalanced(waitLong, b, c)
	t.Logf("a (partitions %v) paused; b and c own every partition %s later (session timeout %s)",
		zparts, time.Since(paused).Round(time.Millisecond), fleetSession)
	f.rc.setRespond(nil)
	f.waitDelivered(waitLong, all)
	testkit.WaitFor(t, waitLong, "nothing pending on b and c", func() bool {
		n, ok := pending(b, c)
		return ok && n == 0
	})
	f.waitTombstoned(waitLong, all)
	before := f.ackedCounts(all)

	// From now on the receiver refuses everything, so that whatever is
	// pending after a restore stays pending where the test reads it, and
	// the zombie's deliveries fail: it records their outcomes (pending
	// again, with new attempt times) and ships them, the writes a restore
	// must not apply over the tombstones of the new owners.
	f.rc.setRespond(answerAll503)
	if err := f.view.refresh(); err != nil {
		t.Fatal(err)
	}
	mark := slices.Clone(f.view.next)
	a.resume()
	f.waitBalanced(waitLong, a, b, c)
	if err := f.view.refresh(); err != nil {
		t.Fatal(err)
	}
	written := 0
	for _, p := range zparts {
		if p < len(mark) {
			written += int(f.view.next[p] - mark[p])
		}
	}
	t.Logf("the zombie rejoined owning %v; its old partitions %v got %d changelog records since its resume", a.owned(), zparts, written)

	// Its partitions back to the zombie, restored from the stores it kept
	// (and the checkpoints it wrote at its late hand-over).
	b.stop()
	c.stop()
	f.waitBalanced(waitLong, a)
	t.Logf("a alone: restores %v", a.restores())
	requireNothingPending(t, "a, catching up the stores it kept as a zombie", a)

	// Every state lost: a fresh instance rebuilds every partition from the
	// whole changelog, the zombie's writes included.
	a.kill()
	a.deleteState()
	d := f.add("d")
	f.waitBalanced(waitLong, d)
	fenced := int64(0)
	if s, ok := d.stats(); ok && s.Kafka != nil {
		for _, p := range s.Kafka.Partitions {
			fenced += p.Restore.Fenced
		}
	}
	t.Logf("d rebuilt every partition (%v), skipping %d fenced records", d.restores(), fenced)
	requireNothingPending(t, "d, rebuilt from the changelog", d)

	f.rc.setRespond(nil)
	f.waitPending(waitLong, 0)
	again := f.redelivered(before)
	bound := inFlightBound(len(zparts))
	t.Logf("zombie: %d redeliveries of the %d records the survivors delivered (bound %d)", again, len(all), bound)
	if again > bound {
		t.Errorf("%d deliveries of records the survivors had delivered, more than the %d a zombie can have in flight", again, bound)
	}
}

// Must show 6: an instance restarted with its state, that gets its
// partitions back, catches up from its checkpoint (over what another owner
// wrote meanwhile) instead of rebuilding.
func TestWarmRestartCatchesUpFromCheckpoint(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	f.rc.setRespond(answerAll503)
	a := f.add("a")
	f.waitBalanced(waitLong, a)
	all := ids("warm", 0, 600)
	f.producer().mustWrite(t, all)
	f.waitPending(waitLong, len(all))
	a.stop()

	// Another owner meanwhile: it rebuilds, delivers half and ships the
	// tombstones, and hands the partitions back.
	b := f.add("b")
	f.waitBalanced(waitLong, b)
	first, rest := evenOdd(all)
	f.rc.setRespond(answerOnly(first))
	f.waitDelivered(waitLong, first)
	f.waitPending(waitLong, len(rest))
	f.waitTombstoned(waitLong, first)
	before := f.ackedCounts(first)
	b.stop()

	a.restart()
	f.waitBalanced(waitLong, a)
	modes := a.restores()
	t.Logf("a's restores after its restart: %v", modes)
	for p := range fleetPartitions {
		if modes[p] != "checkpoint" {
			t.Errorf("partition %d restored with mode %q, want checkpoint", p, modes[p])
		}
	}
	for _, rec := range a.logRecords("kafka: partition restored") {
		t.Logf("partition %v: mode=%v records=%v took=%s", rec["partition"], rec["mode"], rec["records"], logDuration(rec["took"]))
	}
	f.waitPending(waitLong, len(rest))
	if v, ok := a.metric("outboxd_kafka_restores_total", `mode="checkpoint"`); !ok || v == 0 {
		t.Errorf("outboxd_kafka_restores_total{mode=\"checkpoint\"}: %v (present %v), want > 0", v, ok)
	}
	f.rc.setRespond(nil)
	f.waitDelivered(waitLong, rest)
	f.waitPending(waitLong, 0)
	if again := f.redelivered(before); again != 0 {
		t.Errorf("%d records delivered by b (tombstones shipped before its clean stop) delivered again after a's catch-up", again)
	}
}
