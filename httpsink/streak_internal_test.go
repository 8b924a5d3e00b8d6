package httpsink

import "testing"

// TestStreakTableSharedSlot: two origins in one slot of the table never
// read each other's streak; the latest to fail holds the slot.
func TestStreakTableSharedSlot(t *testing.T) {
	tab := newStreakTable()
	a := tab.get("http://a.example:80")
	b := streak{word: a.word, tag: a.tag + 1} // the same slot, another origin
	a.fail()
	a.fail()
	if a.load() != 2 || b.load() != 0 {
		t.Fatalf("a=%d b=%d, want 2 and 0", a.load(), b.load())
	}
	b.reset() // not b's streak: leaves a's alone
	if a.load() != 2 {
		t.Fatalf("b's reset changed a's streak to %d", a.load())
	}
	if n := b.fail(); n != 1 || a.load() != 0 {
		t.Fatalf("b.fail()=%d a=%d, want 1 and 0", n, a.load())
	}
	b.reset()
	if b.load() != 0 || b.word.Load() != uint64(b.tag)<<32 {
		t.Fatalf("after reset b=%d word=%#x", b.load(), b.word.Load())
	}
	if c := tab.get("http://a.example:80"); c != a {
		t.Fatal("one origin maps to two streaks")
	}
}
