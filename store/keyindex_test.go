package store

import (
	"errors"
	"path/filepath"
	"slices"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// keyEntries returns the key index entries of the file, as strings.
func keyEntries(t *testing.T, s *Store) []string {
	t.Helper()
	var out []string
	err := s.view(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketKeys).ForEach(func(k, _ []byte) error {
			out = append(out, string(k))
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// schemaOf returns the schema version recorded in the file.
func schemaOf(t *testing.T, s *Store) uint64 {
	t.Helper()
	var v uint64
	if err := s.view(func(tx *bolt.Tx) error { v = getU64(tx.Bucket(bucketMeta), metaSchema); return nil }); err != nil {
		t.Fatal(err)
	}
	return v
}

// headIDs returns the IDs Due returns with HeadOfKeyOnly, sorted.
func headIDs(t *testing.T, s *Store) []string {
	t.Helper()
	due, err := s.Due(DueQuery{Now: time.Now().Add(time.Hour), Limit: 100, HeadOfKeyOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range due {
		ids = append(ids, r.ID)
	}
	slices.Sort(ids)
	return ids
}

func keyed(id, key string) *Record {
	r := rec(id, "x")
	r.Key = key
	return r
}

// TestNoKeyIndex: a store opened with NoKeyIndex writes no key index
// entries and refuses the calls that need them; reopening it with the index
// rebuilds the index from the records pending then (including those stored
// and removed while it was off), and reopening with NoKeyIndex empties it
// again. A file without its index carries a schema version that builds
// without this option refuse.
func TestNoKeyIndex(t *testing.T) {
	path := filepath.Join(t.TempDir(), "outbox.db")
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	mustInsert(t, s, keyed("evt-1", "a"), keyed("evt-2", "a"))
	if got := keyEntries(t, s); len(got) != 2 || schemaOf(t, s) != schemaEndpointDue {
		t.Fatalf("with the index: entries %q, schema %d", got, schemaOf(t, s))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// Without the index: opening empties it; keyed inserts add no entry.
	s, err = Open(path, Options{NoKeyIndex: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := keyEntries(t, s); len(got) != 0 || schemaOf(t, s) != schemaEndpointDueNoKeyIndex {
		t.Fatalf("opened with NoKeyIndex: entries %q, schema %d; want none and %d", got, schemaOf(t, s), schemaEndpointDueNoKeyIndex)
	}
	if st, err := s.Stats(); err != nil || st.KeyIndex {
		t.Fatalf("Stats without the index = %+v, %v; want KeyIndex false", st, err)
	}
	mustInsert(t, s, keyed("evt-3", "a"), keyed("evt-4", "b"), keyed("evt-5", "b"), rec("evt-6", "x"))
	if got := keyEntries(t, s); len(got) != 0 {
		t.Fatalf("keyed inserts without the index wrote entries %q", got)
	}
	// The oldest of key a is delivered (deleted) while the index is off.
	r1, _, err := s.Get("evt-1")
	if err != nil {
		t.Fatal(err)
	}
	if res, err := s.Apply(t.Context(), []Outcome{{Kind: OutcomeDelete, ID: r1.ID, Version: r1.Version}}, nil); err != nil || res[0] != Applied {
		t.Fatalf("Apply = %v, %v", res, err)
	}
	called := false
	if _, err := s.UpsertKey(t.Context(), "a", func(*Record) (*Record, error) { called = true; return nil, nil }); !errors.Is(err, ErrNoKeyIndex) || called {
		t.Fatalf("UpsertKey without the index = %v (fn called: %v), want ErrNoKeyIndex before fn", err, called)
	}
	if _, err := s.Due(DueQuery{Now: time.Now().Add(time.Hour), HeadOfKeyOnly: true}); !errors.Is(err, ErrNoKeyIndex) {
		t.Fatalf("Due(HeadOfKeyOnly) without the index = %v, want ErrNoKeyIndex", err)
	}
	if due, err := s.Due(DueQuery{Now: time.Now().Add(time.Hour)}); err != nil || len(due) != 5 {
		t.Fatalf("Due without HeadOfKeyOnly = %d records, %v; want 5", len(due), err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// A read-only view of it (outboxd inspect) says the same.
	ro, err := Open(path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ro.Due(DueQuery{Now: time.Now().Add(time.Hour), HeadOfKeyOnly: true}); !errors.Is(err, ErrNoKeyIndex) {
		t.Fatalf("read-only Due(HeadOfKeyOnly) = %v, want ErrNoKeyIndex", err)
	}
	if err := ro.Close(); err != nil {
		t.Fatal(err)
	}

	// With the index again: rebuilt from what is pending now.
	s = openAt(t, path, Options{})
	if schemaOf(t, s) != schemaEndpointDue {
		t.Fatalf("schema after the rebuild = %d, want %d", schemaOf(t, s), schemaEndpointDue)
	}
	if st, err := s.Stats(); err != nil || !st.KeyIndex {
		t.Fatalf("Stats after the rebuild = %+v, %v; want KeyIndex true", st, err)
	}
	if got, want := headIDs(t, s), []string{"evt-2", "evt-4", "evt-6"}; !slices.Equal(got, want) {
		t.Fatalf("heads of keys after the rebuild = %q, want %q", got, want)
	}
	if got := keyEntries(t, s); len(got) != 4 {
		t.Fatalf("rebuilt index has %d entries, want 4 (evt-2..5)", len(got))
	}
	cur := ""
	if _, err := s.UpsertKey(t.Context(), "b", func(c *Record) (*Record, error) {
		if c != nil {
			cur = c.ID
		}
		return nil, errors.New("look only")
	}); err == nil || cur != "evt-4" {
		t.Fatalf("UpsertKey(b) saw %q (err %v), want the oldest, evt-4", cur, err)
	}
	// Inserts keep the rebuilt index.
	mustInsert(t, s, keyed("evt-7", "c"))
	if got := keyEntries(t, s); len(got) != 5 {
		t.Fatalf("index after an insert has %d entries, want 5", len(got))
	}
}

// TestNoKeyIndexFileIsRefusedByOlderBuilds: the schema version that marks
// a file without its key index is above what builds before the option
// understand (schemaVersion 1), so they refuse it rather than treat the
// missing entries as "no record of that key".
func TestNoKeyIndexFileIsRefusedByOlderBuilds(t *testing.T) {
	if schemaNoKeyIndex <= schemaVersion {
		t.Fatalf("schemaNoKeyIndex = %d must be above schemaVersion = %d", schemaNoKeyIndex, schemaVersion)
	}
	s := openTest(t, Options{NoKeyIndex: true})
	if v := schemaOf(t, s); v != schemaEndpointDueNoKeyIndex {
		t.Fatalf("a new file opened with NoKeyIndex has schema %d, want %d", v, schemaEndpointDueNoKeyIndex)
	}
}
