package testkit

import (
	"context"
	"testing"
	"time"
)

// pollInterval is how often WaitFor checks its condition: short next to any
// timeout a test gives, long enough not to keep a core busy.
const pollInterval = 5 * time.Millisecond

// WaitFor checks cond every few milliseconds until it holds, and stops the
// test with "timed out after <timeout> waiting for <what>" if timeout passes
// first. cond runs on the test's goroutine.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	err := Poll(ctx, pollInterval, func() (bool, error) { return cond(), nil })
	if err != nil {
		t.Fatalf("timed out after %s waiting for %s", timeout, what)
	}
}

// Poll checks cond every interval, the first time at once, until it reports
// true (Poll returns nil), returns an error (Poll returns it) or ctx ends
// (Poll returns ctx's error). It is for waits whose caller decides what a
// timeout means, such as a harness that adds the process's output.
func Poll(ctx context.Context, interval time.Duration, cond func() (bool, error)) error {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		ok, err := cond()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}
