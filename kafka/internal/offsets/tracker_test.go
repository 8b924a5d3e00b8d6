package offsets

import (
	"testing"

	kafkago "github.com/segmentio/kafka-go"
)

func TestTracker(t *testing.T) {
	tr := New(kafkago.FirstOffset)
	if _, ok := tr.ToCommit(^uint64(0)); ok {
		t.Fatal("nothing consumed, nothing to commit")
	}
	a := tr.Add(10, 20) // started from "earliest": the first record is at 10
	b := tr.Add(22, 30) // offsets 20, 21 compacted away: the range covers them
	c := tr.Add(30, 40)
	tr.Done(b.Start, 0)
	tr.Done(c.Start, 0)
	if _, ok := tr.ToCommit(^uint64(0)); ok {
		t.Fatal("commit offered while the first range is not durable")
	}
	tr.Done(a.Start, 0)
	if off, ok := tr.ToCommit(^uint64(0)); !ok || off != 40 {
		t.Fatalf("toCommit = %d %v, want 40", off, ok)
	}
	tr.CommittedAt(40)
	if _, ok := tr.ToCommit(^uint64(0)); ok {
		t.Fatal("the same offset offered twice")
	}
	d := tr.Add(40, 50)
	e := tr.Add(50, 60)
	tr.Done(e.Start, 0)
	if off, _ := tr.Durable(); off != 40 {
		t.Fatalf("durable %d passed a failed range", off)
	}
	tr.Done(d.Start, 0)
	if off, waiting := tr.Durable(); off != 60 || waiting != 0 {
		t.Fatalf("durable %d waiting %d", off, waiting)
	}

	tr = New(7) // a committed offset
	s := tr.Add(9, 12)
	if s.Start != 7 {
		t.Fatalf("first range starts at %d, want the assigned offset 7", s.Start)
	}
}

// In group mode an offset is committed only once the changelog entries of
// the records below it are shipped: a new owner rebuilding the store from
// the changelog would otherwise miss records the group no longer re-reads.
func TestTrackerCommitsOnlyShippedRecords(t *testing.T) {
	tr := New(0)
	a := tr.Add(0, 10)
	b := tr.Add(10, 20)
	tr.Done(a.Start, 5) // store LSNs up to 5 hold records 0..9
	tr.Done(b.Start, 9)
	if _, ok := tr.ToCommit(4); ok {
		t.Fatal("offset offered before any of its entries shipped")
	}
	if off, ok := tr.ToCommit(5); !ok || off != 10 {
		t.Fatalf("toCommit(5) = %d %v, want 10", off, ok)
	}
	if off, ok := tr.ToCommit(8); !ok || off != 10 {
		t.Fatalf("toCommit(8) = %d %v, want 10 (records 10..19 need LSN 9)", off, ok)
	}
	// A failed commit offers the same offset again.
	if off, ok := tr.ToCommit(9); !ok || off != 20 {
		t.Fatalf("toCommit(9) = %d %v, want 20", off, ok)
	}
	tr.CommittedAt(20)
	if _, ok := tr.ToCommit(100); ok {
		t.Fatal("offset offered again after its commit")
	}
	// A range retried late needs at least the LSNs of those before it.
	c := tr.Add(20, 30)
	d := tr.Add(30, 40)
	tr.Done(d.Start, 12)
	tr.Done(c.Start, 15)
	if off, ok := tr.ToCommit(14); ok {
		t.Fatalf("toCommit(14) = %d, want nothing: records 20..29 need LSN 15", off)
	}
	if off, ok := tr.ToCommit(15); !ok || off != 40 {
		t.Fatalf("toCommit(15) = %d %v, want 40", off, ok)
	}
}
