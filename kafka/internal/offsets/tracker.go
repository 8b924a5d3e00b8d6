package offsets

import "sync"

// Tracker keeps, for one partition, which consumed offset ranges are durable
// in the store, and from that the offset that may be committed: the highest
// offset below which every consumed record is durable. A range that failed to
// enqueue holds the committable offset below it, however many later ranges
// are durable, until it is retried successfully.
type Tracker struct {
	mu sync.Mutex
	// base is the committable offset: every record below it is durable
	// (or was never ours). -1 until the first range is added when the
	// partition started from a logical offset (earliest/latest).
	base int64
	// spans are the consumed ranges at and above base, contiguous and in
	// offset order: spans[0].Start == base.
	spans []Span
	// committed is the last offset committed to the group.
	committed int64
	// marks are the offsets base advanced to, each with the highest store
	// LSN written by the records below it, in offset order. In group mode
	// an offset may be committed only once its records' changelog entries
	// are shipped: ToCommit(shipped) takes the last mark at or below it.
	marks []mark
}

// Span is a range of consumed offsets, [Start, End).
type Span struct {
	// Start is the first offset of the range, End the offset after it.
	Start, End int64
	done       bool
	lsn        uint64 // the store's last LSN once the range was durable
}

// mark is an offset base reached and the LSN its records need shipped.
type mark struct {
	offset int64
	lsn    uint64
}

// New returns a Tracker that starts at the offset the partition was
// assigned at; a negative (logical) offset means "unknown until the first
// record".
func New(start int64) *Tracker {
	if start < 0 {
		start = -1
	}
	return &Tracker{base: start, committed: start}
}

// Add registers consumed records up to (excluding) end, starting where the
// previous range ended, or at first when nothing was consumed yet. The range
// spans gaps in the offsets (compaction, transaction markers).
func (t *Tracker) Add(first, end int64) Span {
	t.mu.Lock()
	defer t.mu.Unlock()
	start := first
	if n := len(t.spans); n > 0 {
		start = t.spans[n-1].End
	} else if t.base >= 0 {
		start = t.base
	} else {
		// Started from a logical offset: the first record fixes the
		// position, which needs no commit of its own.
		t.base, t.committed = first, first
	}
	if start > first {
		start = first // a rewind (never expected from one reader); stay safe
	}
	s := Span{Start: start, End: end}
	t.spans = append(t.spans, s)
	return s
}

// Done marks the range starting at start as durable, its entries in the
// store's changelog up to lsn (0 when the changelog does not matter).
func (t *Tracker) Done(start int64, lsn uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i := range t.spans {
		if t.spans[i].Start == start {
			t.spans[i].done = true
			t.spans[i].lsn = lsn
			break
		}
	}
	n := 0
	for n < len(t.spans) && t.spans[n].done {
		t.base = t.spans[n].End
		need := t.spans[n].lsn
		if k := len(t.marks); k > 0 {
			need = max(need, t.marks[k-1].lsn)
		}
		t.marks = append(t.marks, mark{offset: t.base, lsn: need})
		n++
	}
	if n > 0 {
		t.spans = append(t.spans[:0], t.spans[n:]...)
	}
}

// ToCommit returns the committable offset when it is past the last commit:
// the highest offset below which every record is durable and, with shipped
// > 0, whose changelog entries are shipped up to shipped. Pass ^uint64(0)
// when shipping does not matter.
func (t *Tracker) ToCommit(shipped uint64) (int64, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	off := int64(-1)
	for _, m := range t.marks {
		if m.lsn > shipped {
			break
		}
		off = m.offset
	}
	if off < 0 || off <= t.committed {
		return 0, false
	}
	return off, true
}

// CommittedAt records a successful commit of offset.
func (t *Tracker) CommittedAt(offset int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if offset > t.committed {
		t.committed = offset
	}
	n := 0
	for n < len(t.marks) && t.marks[n].offset <= t.committed {
		n++
	}
	t.marks = append(t.marks[:0], t.marks[n:]...)
}

// Durable returns the committable offset (-1 when unknown) and the number of
// ranges still waiting to become durable.
func (t *Tracker) Durable() (offset int64, waiting int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.base, len(t.spans)
}
