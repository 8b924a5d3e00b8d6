package store

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"
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

// fakeClock is a manual clock for tests that need to control time.
type fakeClock struct{ t time.Time }

func (c *fakeClock) Now() time.Time      { return c.t }
func (c *fakeClock) Add(d time.Duration) { c.t = c.t.Add(d) }
func newClock() *fakeClock               { return &fakeClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)} }
func ctxT(t testing.TB) context.Context  { return t.Context() }
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
