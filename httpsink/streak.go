package httpsink

import (
	"hash/maphash"
	"math"
	"sync/atomic"
)

// streak is an endpoint's recent failure streak: how many deliveries in a
// row got no answer (a transport failure or a timeout) or a 502, 503 or
// 504 that the policy retries. Any other answer sets it back to zero: the
// receiver is up, even if it answered 500 or 429. Inline retries depend on
// it (see call.mayRetryInline).
//
// The counter lives in one atomic word: the high 32 bits are a tag, the low
// 32 bits the count. A named endpoint has a word of its own (tag 0); the
// raw-URL origins share a fixed table of words (streakTable), where the tag
// tells whose streak a word holds, so a colliding origin reads zero instead
// of another's streak.
type streak struct {
	word *atomic.Uint64
	tag  uint32
}

func newStreak() streak { return streak{word: new(atomic.Uint64)} }

// load returns the streak. It only reads, so the healthy path shares the
// word's cache line.
func (s streak) load() uint32 {
	v := s.word.Load()
	if uint32(v>>32) != s.tag {
		return 0
	}
	return uint32(v)
}

// fail counts one more failed delivery and returns the new streak. In a
// shared word another origin's streak is replaced.
func (s streak) fail() uint32 {
	for {
		v := s.word.Load()
		n := uint32(1)
		if uint32(v>>32) == s.tag {
			n = uint32(v)
			if n < math.MaxUint32 {
				n++
			}
		}
		if s.word.CompareAndSwap(v, uint64(s.tag)<<32|uint64(n)) {
			return n
		}
	}
}

// reset sets the streak to zero. It writes only when the streak is not zero
// already.
func (s streak) reset() {
	for {
		v := s.word.Load()
		if uint32(v>>32) != s.tag || uint32(v) == 0 {
			return
		}
		if s.word.CompareAndSwap(v, uint64(s.tag)<<32) {
			return
		}
	}
}

// streakSlots is the size of a streakTable: 8 KiB, whatever the number of
// origins raw URLs name.
const streakSlots = 1024

// streakTable holds the streaks of raw-URL origins, which have no
// per-endpoint structure to keep one in. Its memory is fixed: an origin
// hashes to a slot and a tag. Two failing origins in one slot take it from
// each other, which at worst gives one of them an inline retry it would not
// otherwise get; a healthy origin in a failing one's slot reads zero.
type streakTable struct {
	seed  maphash.Seed
	slots [streakSlots]atomic.Uint64
}

func newStreakTable() *streakTable { return &streakTable{seed: maphash.MakeSeed()} }

// get returns the streak of the origin key (scheme://host:port).
func (t *streakTable) get(key string) streak {
	h := maphash.String(t.seed, key)
	return streak{word: &t.slots[h%streakSlots], tag: uint32(h >> 32)}
}
