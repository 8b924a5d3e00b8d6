package store

import (
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// badOpen opens path and checks that it fails with an *OpenError naming the
// file and matching want.
func badOpen(t *testing.T, path string, want error) {
	t.Helper()
	s, err := Open(path, Options{LockTimeout: 50 * time.Millisecond})
	if err == nil {
		s.Close()
		t.Fatalf("Open succeeded, want %v", want)
	}
	var oe *OpenError
	if !errors.As(err, &oe) || oe.Path != path {
		t.Fatalf("err = %v (%T), want an *OpenError for %s", err, err, path)
	}
	if !errors.Is(err, want) {
		t.Fatalf("err = %v, want %v", err, want)
	}
	if !strings.Contains(err.Error(), path) {
		t.Fatalf("error %q does not name the file", err)
	}
}

func TestOpenLockedFile(t *testing.T) {
	s := openTest(t, Options{})
	badOpen(t, s.Path(), ErrLocked)
	s.Close()
	s2 := openAt(t, s.Path(), Options{})
	s2.Close()
}

func TestOpenEmptyFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "empty.db")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	badOpen(t, path, ErrNotDatabase)
	if fi, _ := os.Stat(path); fi.Size() != 0 {
		t.Fatalf("a failed open wrote %d bytes into the file", fi.Size())
	}
}

func TestOpenRandomBytes(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{1, 100, 4096, 5000, 64 << 10} {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		path := filepath.Join(t.TempDir(), "random.db")
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		badOpen(t, path, ErrNotDatabase)
	}
}

// filledStore returns the path of a closed store holding n records.
func filledStore(t *testing.T, n int) string {
	t.Helper()
	s := openTest(t, Options{NoSync: true})
	recs := make([]*Record, n)
	for i := range recs {
		recs[i] = rec(string(rune('a'+i%26))+strings.Repeat("x", i%50)+string(rune('0'+i/26%10))+string(rune('A'+i/260%26)), strings.Repeat("p", 500))
	}
	mustInsert(t, s, recs...)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return s.Path()
}

func TestOpenTruncatedFile(t *testing.T) {
	path := filledStore(t, 2000)
	used := highWater(t, path)
	for _, size := range []int64{used - 4096, used / 2, 3 * 4096, 4096 + 100, 1000} {
		cut := filepath.Join(t.TempDir(), "cut.db")
		b, _ := os.ReadFile(path)
		if err := os.WriteFile(cut, b[:size], 0o600); err != nil {
			t.Fatal(err)
		}
		s, err := Open(cut, Options{})
		if err == nil {
			s.Close()
			t.Fatalf("truncated to %d: Open succeeded", size)
		}
		if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrNotDatabase) {
			t.Fatalf("truncated to %d: err = %v, want ErrCorrupt or ErrNotDatabase", size, err)
		}
	}
}

func TestOpenDamagedMetaPages(t *testing.T) {
	path := filledStore(t, 10)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pageSize := int(binary.LittleEndian.Uint32(b[16+8:])) // meta page 0: header, magic, version, page size
	b[16+20] ^= 0xFF                                      // inside meta page 0, covered by its checksum
	b[pageSize+16+20] ^= 0xFF
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	badOpen(t, path, ErrCorrupt)
}

func TestOpenNewerSchema(t *testing.T) {
	s := openTest(t, Options{})
	path := s.Path()
	s.Close()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketMeta).Put(metaSchema, u64(maxSchema+1))
	}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	badOpen(t, path, ErrSchemaTooNew)
}

func TestOpenForeignBoltFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "other.db")
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucket([]byte("widgets")); return err }); err != nil {
		t.Fatal(err)
	}
	db.Close()
	badOpen(t, path, ErrNotDatabase)
}

func TestOpenDirectory(t *testing.T) {
	badOpen(t, t.TempDir(), ErrNotDatabase)
}

func TestOpenReadOnly(t *testing.T) {
	path := filledStore(t, 3)
	a := openAt(t, path, Options{ReadOnly: true})
	b := openAt(t, path, Options{ReadOnly: true}) // shared lock
	if st, err := b.Stats(); err != nil || st.Pending != 3 {
		t.Fatalf("Stats = %+v, %v", st, err)
	}
	if _, err := a.Insert(t.Context(), []*Record{rec("new", "")}); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("Insert on read-only store: %v, want ErrReadOnly", err)
	}
	if _, err := Open(filepath.Join(t.TempDir(), "missing.db"), Options{ReadOnly: true}); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("read-only open of a missing file: %v", err)
	}
}

func TestCompact(t *testing.T) {
	path := filledStore(t, 3000)
	s := openAt(t, path, Options{})
	recs, _, err := s.List(ListQuery{State: StatePending, Limit: 3000})
	if err != nil {
		t.Fatal(err)
	}
	outs := make([]Outcome, 0, len(recs))
	for _, r := range recs[:2900] {
		outs = append(outs, Outcome{Kind: OutcomeDelete, ID: r.ID, Version: r.Version})
	}
	if _, err := s.Apply(t.Context(), outs, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.TrimChangelog(t.Context(), TrimPolicy{MaxEntries: 10}); err != nil {
		t.Fatal(err)
	}
	if err := Compact(path); !errors.Is(err, ErrLocked) {
		t.Fatalf("Compact of an open store: %v, want ErrLocked", err)
	}
	s.Close()
	before, _ := os.Stat(path)
	if err := Compact(path); err != nil {
		t.Fatal(err)
	}
	after, _ := os.Stat(path)
	if after.Size() >= before.Size() {
		t.Errorf("compaction did not shrink the file: %d -> %d bytes", before.Size(), after.Size())
	}
	s = openAt(t, path, Options{})
	st, err := s.Stats()
	if err != nil || st.Pending != 100 || st.Tombstones != 2900 {
		t.Fatalf("after compaction: %+v, %v", st, err)
	}
	if _, state, err := s.Get(recs[2950].ID); err != nil || state != StatePending {
		t.Fatalf("Get after compaction: %v %v", state, err)
	}
}

// highWater returns the bytes of path that bbolt's meta page says are in use.
func highWater(t *testing.T, path string) int64 {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int64
	_ = db.View(func(tx *bolt.Tx) error { n = tx.Size(); return nil })
	return n
}

// A damaged value, or a value under another record's key, is reported as
// ErrCorrupt by every read and write that meets it, and never decoded.
func TestDamagedValues(t *testing.T) {
	s := openTest(t, Options{})
	mustInsert(t, s, rec("a", "1"), rec("b", "2"))
	path := s.Path()
	s.Close()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		ev := tx.Bucket(bucketEvents)
		torn := ev.Get([]byte("a"))
		if err := ev.Put([]byte("a"), append([]byte(nil), torn[:len(torn)-3]...)); err != nil {
			return err
		}
		return ev.Put([]byte("b"), EncodeRecord(&Record{ID: "c"}))
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	s = openAt(t, path, Options{})
	for _, id := range []string{"a", "b"} {
		if _, _, err := s.Get(id); !errors.Is(err, ErrCorrupt) {
			t.Errorf("Get(%s): %v, want ErrCorrupt", id, err)
		}
		if _, err := s.Update(t.Context(), id, func(*Record) error { return nil }); !errors.Is(err, ErrCorrupt) {
			t.Errorf("Update(%s): %v, want ErrCorrupt", id, err)
		}
	}
	if _, err := s.Due(DueQuery{Now: time.Now().Add(time.Hour)}); !errors.Is(err, ErrCorrupt) {
		t.Errorf("Due: %v, want ErrCorrupt", err)
	}
	if _, _, err := s.List(ListQuery{State: StatePending}); !errors.Is(err, ErrCorrupt) {
		t.Errorf("List: %v, want ErrCorrupt", err)
	}
	// The store keeps working for everything else.
	mustInsert(t, s, rec("d", "4"))
}
