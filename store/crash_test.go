package store

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/outboxd/outbox/internal/testkit"
)

const (
	crashChildEnv = "OUTBOX_STORE_CRASH_CHILD"
	crashPathEnv  = "OUTBOX_STORE_CRASH_PATH"
)

// crashChild is the child process of TestCrashSafety: it writes in a loop
// from several goroutines and prints one line per write that returned nil,
// until it is killed.
func crashChild() int {
	s, err := Open(os.Getenv(crashPathEnv), Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child open:", err)
		return 2
	}
	round := os.Getenv(crashChildEnv)
	var mu sync.Mutex
	ack := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(os.Stdout, format+"\n", args...)
	}
	ctx := context.Background()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := 0; ; i++ {
				r := rec(fmt.Sprintf("%s-%d-%06d", round, g, i), "v1")
				r.Key = fmt.Sprintf("k%d", i%4)
				if _, err := s.Insert(ctx, []*Record{r}); err != nil {
					fmt.Fprintln(os.Stderr, "child insert:", err)
					os.Exit(3)
				}
				ack("I %s", r.ID)
				switch i % 3 {
				case 1:
					res, err := s.Apply(ctx, []Outcome{{Kind: OutcomeDelete, ID: r.ID, Version: r.Version}}, nil)
					if err != nil || res[0] != Applied {
						fmt.Fprintln(os.Stderr, "child apply:", err, res)
						os.Exit(3)
					}
					ack("D %s", r.ID)
				case 2:
					if _, err := s.Update(ctx, r.ID, func(r *Record) error { r.Payload = []byte("v2"); return nil }); err != nil {
						fmt.Fprintln(os.Stderr, "child update:", err)
						os.Exit(3)
					}
					ack("U %s", r.ID)
				}
			}
		})
	}
	wg.Wait()
	return 0
}

// TestCrashSafety kills a writing child process with SIGKILL at random
// moments, several times, and checks after each kill that the file passes
// bbolt's consistency check and that every write the child saw succeed is
// there.
func TestCrashSafety(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	path := filepath.Join(t.TempDir(), "crash.db")
	rng := rand.New(rand.NewPCG(uint64(os.Getpid()), 7))
	want := map[string]string{} // ID -> "I" (pending v1), "U" (pending v2), "D" (delivered)
	for round := range 5 {
		cmd := testkit.TestBinary(crashChildEnv+"="+fmt.Sprintf("r%d", round), crashPathEnv+"="+path)
		stderr := &testkit.Buffer{}
		cmd.Stderr = stderr
		p, lines := testkit.StartLines(t, cmd)
		killAfter := 30 + rng.IntN(400)
		acks := 0
		for line := range lines {
			op, id, _ := strings.Cut(line, " ")
			want[id] = op
			if acks++; acks == killAfter {
				if err := p.Kill(); err != nil {
					t.Fatal(err)
				}
			}
		}
		err := p.Err()
		if acks < killAfter {
			t.Fatalf("round %d: child exited after %d acks (%v): %s", round, acks, err, stderr.String())
		}
		checkCrashed(t, path, want)
		t.Logf("round %d: killed after %d acknowledged writes", round, acks)
	}
}

func checkCrashed(t *testing.T, path string, want map[string]string) {
	t.Helper()
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatalf("reopen after kill: %v", err)
	}
	defer s.Close()
	pending := 0
	err = s.db.View(func(tx *bolt.Tx) error {
		for err := range tx.Check() {
			t.Errorf("tx.Check: %v", err)
		}
		pending = tx.Bucket(bucketEvents).Stats().KeyN
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	st, err := s.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.Pending != pending {
		t.Errorf("Stats.Pending = %d, events bucket holds %d", st.Pending, pending)
	}
	for id, op := range want {
		r, state, err := s.Get(id)
		switch {
		case err != nil:
			t.Fatalf("acknowledged %s %s: %v", op, id, err)
		case op == "D" && state != StateDelivered:
			t.Fatalf("delete of %s was acknowledged, state is %v", id, state)
		case op == "I" && state == StatePending && string(r.Payload) != "v1" && string(r.Payload) != "v2":
			t.Fatalf("insert of %s was acknowledged, payload is %q", id, r.Payload)
		case op == "I" && state != StatePending && state != StateDelivered:
			// A delete that followed may have committed before its
			// acknowledgement was printed.
			t.Fatalf("insert of %s was acknowledged, state %v", id, state)
		case op == "U" && (state != StatePending || string(r.Payload) != "v2"):
			t.Fatalf("update of %s was acknowledged, state %v payload %q", id, state, r.Payload)
		}
	}
}
