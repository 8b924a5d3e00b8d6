package store

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/outboxd/outbox/internal/testkit"
)

func TestMain(m *testing.M) {
	if os.Getenv(crashChildEnv) != "" {
		os.Exit(crashChild())
	}
	goleak.VerifyTestMain(m, goleak.Cleanup(func(int) { removeBenchFixtures() }))
}

// openTest opens a store in a fresh temporary directory, closed at cleanup.
func openTest(t testing.TB, opts Options) *Store {
	t.Helper()
	return openAt(t, filepath.Join(t.TempDir(), "outbox.db"), opts)
}

func openAt(t testing.TB, path string, opts Options) *Store {
	t.Helper()
	s, err := Open(path, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// newClock is a manual clock for tests that need to control time.
func newClock() *testkit.Clock { return testkit.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)) }

func ctxT(t testing.TB) context.Context { return t.Context() }
func rec(id string, payload string) *Record {
	return &Record{ID: id, Destination: "orders", Endpoint: "orders", Method: "POST", Payload: []byte(payload)}
}

func mustInsert(t testing.TB, s *Store, recs ...*Record) []InsertStatus {
	t.Helper()
	st, err := s.Insert(ctxT(t), recs)
	if err != nil {
		t.Fatalf("Insert: %v", err)
	}
	return st
}
