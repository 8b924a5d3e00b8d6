package cputime_test

import (
	"testing"
	"time"

	"github.com/outboxd/outbox/internal/cputime"
)

// TestProcessCountsWork: spinning a loop shows up as CPU time, and the
// reading never goes backwards.
func TestProcessCountsWork(t *testing.T) {
	before := cputime.Process()
	deadline := time.Now().Add(50 * time.Millisecond)
	x := 0
	for time.Now().Before(deadline) {
		x++
	}
	after := cputime.Process()
	if after <= before {
		t.Fatalf("CPU time went from %v to %v over 50 ms of spinning (%d loops)", before, after, x)
	}
}
