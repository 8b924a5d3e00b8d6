//go:build fault

package faults

import (
	"context"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/outboxd/outbox/internal/testkit"
)

// netVerdict is what one network fault scenario measured.
type netVerdict struct {
	acked, lost, redelivered int
	// resumed is how long after the fault healed the first record
	// acknowledged by the broker after the fault began was delivered
	// (negative: before it healed, by the instances that were not cut off).
	resumed time.Duration
	// rebalanced is how long after the fault healed every partition was
	// active on one instance again.
	rebalanced time.Duration
	drained    time.Duration
	fencing    fencing
}

// runNetworkScenario runs three instances under a steady load of records
// produced to the ingest topic, applies fault (which returns once the fault
// has lasted as long as it should), heals every Link, and checks the
// history: every acknowledged record delivered, every delivery carrying
// its own payload, and no changelog record accepted from a fenced owner.
func runNetworkScenario(t *testing.T, name string, fault func(f *fleet)) netVerdict {
	f := newFleet(t, 3)
	pr := f.produce(name, 20, 20*time.Millisecond)
	testkit.WaitFor(t, 30*time.Second, "deliveries under load", func() bool { return len(f.rcv.delivered()) >= 300 })

	faultAt := time.Now()
	fault(f)
	f.toRcv.Heal()
	for _, m := range f.members {
		m.toBroker().Heal()
		m.toAPI.Heal()
	}
	healAt := time.Now()
	var v netVerdict
	testkit.WaitFor(t, 60*time.Second, "every partition active on one instance after the fault", func() bool { return balanced(f.members...) })
	v.rebalanced = time.Since(healAt)
	testkit.WaitFor(t, 30*time.Second, "records acknowledged after the fault healed", func() bool { return pr.ackedSince(healAt) })
	pr.finish()

	acked := pr.ledger()
	var missing []string
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	err := testkit.Poll(ctx, 50*time.Millisecond, func() (bool, error) {
		missing = missing[:0]
		got := f.rcv.delivered()
		for id := range acked {
			if len(got[id]) == 0 {
				missing = append(missing, id)
			}
		}
		return len(missing) == 0, nil
	})
	v.drained = time.Since(healAt)
	if err != nil {
		slices.Sort(missing)
		v.lost = len(missing)
		t.Errorf("VIOLATION: %d acknowledged records not delivered within 2 minutes of the heal, e.g. %s", v.lost, sample(missing))
	}
	v.acked = len(acked)
	got := f.rcv.delivered()
	first := time.Time{}
	for id, ds := range got {
		v.redelivered += len(ds) - 1
		if at, ok := acked[id]; ok && at.After(faultAt) {
			if d := slices.MinFunc(ds, func(a, b delivery) int { return a.At.Compare(b.At) }); first.IsZero() || d.At.Before(first) {
				first = d.At
			}
		}
	}
	v.resumed = first.Sub(healAt)
	if v.fencing, err = f.checkFencing(); err != nil {
		t.Fatalf("reading the changelog: %v", err)
	}
	for _, m := range f.members {
		m.stop()
	}
	f.rcv.mu.Lock()
	for _, p := range f.rcv.violations {
		t.Errorf("VIOLATION: %s", p)
	}
	f.rcv.mu.Unlock()
	if os.Getenv("FAULTS_DUMP") != "" {
		for _, m := range f.members {
			t.Logf("outboxd %d:\n%s", m.idx, m.logs)
		}
	}
	if v.fencing.accepted > 0 {
		t.Errorf("VIOLATION: %d changelog records of a fenced owner would be applied by a restore (written between a new owner's restore and its fence)", v.fencing.accepted)
	}
	report(t, "**Network: %s**: %d records acknowledged, %d lost, %d redelivered; first delivery of a record produced during the fault %s after it healed; "+
		"partitions balanced again %s after, all delivered %s after; changelog: %d owners checked, %d fenced records skipped by restores, %d accepted.",
		name, v.acked, v.lost, v.redelivered, v.resumed.Round(time.Millisecond), v.rebalanced.Round(time.Millisecond), v.drained.Round(time.Millisecond),
		v.fencing.owners, v.fencing.skipped, v.fencing.accepted)
	return v
}

// hold lets a fault last d.
func hold(d time.Duration) {
	tm := time.NewTimer(d)
	defer tm.Stop()
	<-tm.C
}

// TestNetworkBrokerBlackHole: the broker black-holes every instance's
// traffic for twice the session timeout while records are produced; the
// group falls apart and re-forms once it heals, and nothing is lost.
func TestNetworkBrokerBlackHole(t *testing.T) {
	runNetworkScenario(t, "broker black-holed for 2x the session timeout", func(f *fleet) {
		for _, m := range f.members {
			m.toBroker().Set(testkit.Faults{BlackHole: true})
		}
		hold(2 * fleetSession)
	})
}

// TestNetworkZombieOwner: one instance is cut off from the broker but not
// from the receiver. The others take its partitions over and fence it; it
// may go on delivering what it holds (redeliveries), but none of its
// changelog writes, which reach the broker once the network heals, is
// applied by a restore.
func TestNetworkZombieOwner(t *testing.T) {
	runNetworkScenario(t, "one instance cut off from the broker (zombie owner)", func(f *fleet) {
		f.members[0].toBroker().Set(testkit.Faults{BlackHole: true})
		testkit.WaitFor(t, 60*time.Second, "the other two owning every partition", func() bool { return balanced(f.members[1:]...) })
		hold(2 * fleetSession)
	})
}

// TestNetworkResets: 50 connection resets, spread over the instances'
// connections to the broker and to the receiver.
func TestNetworkResets(t *testing.T) {
	runNetworkScenario(t, "50 connection resets", func(f *fleet) {
		for i := range 50 {
			m := f.members[i%len(f.members)]
			if i%5 == 4 {
				f.toRcv.Reset()
			} else {
				m.toBroker().Reset()
			}
			hold(100 * time.Millisecond)
		}
	})
}

// TestNetworkLatencyBandwidth: every instance's traffic to the broker and
// the receiver, and between the instances, is delayed by 50ms a chunk and capped at 256 KiB/s a
// connection for five seconds.
func TestNetworkLatencyBandwidth(t *testing.T) {
	runNetworkScenario(t, "50ms latency and 256 KiB/s per connection", func(f *fleet) {
		slow := testkit.Faults{Latency: 50 * time.Millisecond, Bandwidth: 256 << 10}
		f.toRcv.Set(slow)
		for _, m := range f.members {
			m.toBroker().Set(slow)
			m.toAPI.Set(slow)
		}
		hold(5 * time.Second)
	})
}

// TestNetworkPeerCutOff: one instance's API is black-holed for the others
// (it still reaches the broker and the receiver). The group's views, asked
// of another instance, answer without it and say they are incomplete, and
// whole again once the network heals.
func TestNetworkPeerCutOff(t *testing.T) {
	runNetworkScenario(t, "one instance's API cut off from the others", func(f *fleet) {
		f.members[2].toAPI.Set(testkit.Faults{BlackHole: true})
		began := time.Now()
		complete, ok := f.members[0].groupStats()
		if !ok || complete {
			t.Errorf("VIOLATION: the group's stats with a member cut off: answered %v, complete %v", ok, complete)
		}
		report(t, "**Network: a peer cut off**: the group's stats answered in %s without it (complete: %v).", time.Since(began).Round(time.Millisecond), complete)
		f.members[2].toAPI.Heal()
		testkit.WaitFor(t, 30*time.Second, "the group's stats complete again", func() bool {
			complete, ok := f.members[0].groupStats()
			return ok && complete
		})
	})
}
