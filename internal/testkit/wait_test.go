package testkit

import (
	"context"
	"errors"
	"testing"
	"time"
)

// Poll returns once the condition holds, with the condition's own error, or
// with the context's error when it ends first.
func TestPoll(t *testing.T) {
	n := 0
	if err := Poll(context.Background(), time.Millisecond, func() (bool, error) { n++; return n == 3, nil }); err != nil || n != 3 {
		t.Fatalf("Poll = %v after %d checks, want nil after 3", err, n)
	}
	boom := errors.New("boom")
	if err := Poll(context.Background(), time.Millisecond, func() (bool, error) { return false, boom }); err != boom {
		t.Fatalf("Poll = %v, want the condition's error", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := Poll(ctx, time.Millisecond, func() (bool, error) { return false, nil }); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Poll = %v, want the context's deadline", err)
	}
}

// WaitFor returns as soon as the condition holds.
func TestWaitFor(t *testing.T) {
	n := 0
	WaitFor(t, time.Minute, "three checks", func() bool { n++; return n == 3 })
	if n != 3 {
		t.Fatalf("%d checks, want 3", n)
	}
}
