package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// uncleanImage returns the bytes of a store holding n records as a crash
// leaves it: copied while the store was open, so its meta page says the
// freelist was not written and the next writer rebuilds it by walking the
// pages.
func uncleanImage(t testing.TB, n int, noKeyIndex bool) []byte {
	t.Helper()
	s := openTest(t, Options{NoSync: true, NoKeyIndex: noKeyIndex})
	recs := make([]*Record, n)
	for i := range recs {
		recs[i] = rec(fmt.Sprintf("evt-%05d", i), strings.Repeat("p", 500))
		recs[i].Key = fmt.Sprintf("key-%d", i%7)
	}
	mustInsert(t, s, recs...)
	img, err := os.ReadFile(s.Path())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return img
}

// newestMeta returns the newest valid meta page of img.
func newestMeta(t testing.TB, img []byte) *boltMeta {
	t.Helper()
	f := byteFile(img)
	m0, _ := readMeta(f, 0)
	if m0 == nil {
		t.Fatal("meta page 0 is not valid")
	}
	m1, _ := readMeta(f, int64(m0.pageSize))
	if m1 != nil && m1.txid > m0.txid {
		return m1
	}
	return m0
}

// byteFile is an io.ReaderAt over bytes.
type byteFile []byte

func (b byteFile) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 || off+int64(len(p)) > int64(len(b)) {
		return 0, errors.New("read past the end")
	}
	return copy(p, b[off:]), nil
}

// A crash leaves a file whose freelist bbolt rebuilds by walking every page
// on the next open; a damaged page met by that walk is an *OpenError
// wrapping ErrCorrupt that names the page, not a crash of the process (which
// is what bbolt's own walk does with such a page).
func TestOpenDamagedPageAfterCrash(t *testing.T) {
	img := uncleanImage(t, 3000, false)
	meta := newestMeta(t, img)
	if meta.freelist != noFreelist {
		t.Fatal("the copy of an open store has a freelist; the test needs one without")
	}
	ps := int(meta.pageSize)
	le := binary.LittleEndian

	// The pages to damage: the events bucket's root (a branch page with
	// this many records), its first two children (leaves), and the root
	// bucket's own page.
	path := filepath.Join(t.TempDir(), "clean.db")
	if err := os.WriteFile(path, img, 0o600); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	var branch int
	_ = db.View(func(tx *bolt.Tx) error { branch = int(tx.Bucket(bucketEvents).Root()); return nil })
	db.Close()
	page := func(b []byte, id int) []byte { return b[id*ps : (id+1)*ps] }
	if le.Uint16(page(img, branch)[8:]) != branchPageFlag || le.Uint16(page(img, branch)[10:]) < 2 {
		t.Fatalf("events root page %d is not a branch with two children", branch)
	}
	child := func(b []byte, i int) int { return int(le.Uint64(page(b, branch)[pageHeaderSize+i*pageElemSize+8:])) }
	leaf0, leaf1 := child(img, 0), child(img, 1)
	rootLeaf := int(meta.root)

	for _, tc := range []struct {
		name, want string
		damage     func(b []byte)
	}{
		{"a page names another", "identifies itself as page", func(b []byte) {
			le.PutUint64(page(b, leaf0), uint64(leaf1))
		}},
		{"a page of no known type", "type flags", func(b []byte) {
			le.PutUint16(page(b, leaf0)[8:], 0x20)
		}},
		{"more elements than fit", "more than fit", func(b []byte) {
			le.PutUint16(page(b, leaf0)[10:], 0xffff)
		}},
		{"an element past the page", "outside the page", func(b []byte) {
			le.PutUint32(page(b, leaf0)[pageHeaderSize+4:], 1<<30)
		}},
		{"a child past the pages in use", "outside the pages in use", func(b []byte) {
			le.PutUint64(page(b, branch)[pageHeaderSize+8:], meta.pgid+10)
		}},
		{"a child referenced twice", "referenced twice", func(b []byte) {
			le.PutUint64(page(b, branch)[pageHeaderSize+pageElemSize+8:], uint64(leaf0))
		}},
		{"a page that is its own child", "referenced twice", func(b []byte) {
			le.PutUint64(page(b, branch)[pageHeaderSize+8:], uint64(branch))
		}},
		{"keys out of order", "not above the key before it", func(b []byte) {
			// The first element's key becomes the second's.
			p := page(b, leaf0)
			e1 := p[pageHeaderSize+pageElemSize:]
			le.PutUint32(p[pageHeaderSize+4:], le.Uint32(e1[4:])+pageElemSize)
			le.PutUint32(p[pageHeaderSize+8:], le.Uint32(e1[8:]))
		}},
		{"a bucket header cut short", "-byte header", func(b []byte) {
			le.PutUint32(page(b, rootLeaf)[pageHeaderSize+12:], 3)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := append([]byte(nil), img...)
			tc.damage(b)
			p := filepath.Join(t.TempDir(), "damaged.db")
			if err := os.WriteFile(p, b, 0o600); err != nil {
				t.Fatal(err)
			}
			badOpen(t, p, ErrCorrupt)
			_, err := Open(p, Options{})
			if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "page") {
				t.Fatalf("error %q does not say %q about a page", err, tc.want)
			}
			after, _ := os.ReadFile(p)
			if string(after) != string(b) {
				t.Fatal("a refused open changed the file")
			}
		})
	}

	// The undamaged copy opens, with every record, and a clean close writes
	// the freelist so the next open has nothing to walk.
	s := openAt(t, path, Options{})
	if st, err := s.Stats(); err != nil || st.Pending != 3000 {
		t.Fatalf("Stats = %+v, %v; want 3000 pending", st, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	if newestMeta(t, b).freelist == noFreelist {
		t.Fatal("a clean close left no freelist")
	}
}

// The walk runs under the file's lock: a store that a running process holds
// is reported as locked, not walked while it changes.
func TestOpenLockedUncleanFileIsNotWalked(t *testing.T) {
	s := openTest(t, Options{})
	mustInsert(t, s, rec("a", "1"))
	b, _ := os.ReadFile(s.Path())
	if newestMeta(t, b).freelist != noFreelist {
		t.Fatal("an open store's file has a freelist")
	}
	start := time.Now()
	badOpen(t, s.Path(), ErrLocked)
	if time.Since(start) > 10*time.Second {
		t.Fatal("the second open did not give up after its lock timeout")
	}
}

// FuzzOpenAfterCrash damages bytes of a crashed store's file and opens it:
// Open returns a store or an error, and never crashes the process, whatever
// the pages hold. A store that opens serves reads and closes.
func FuzzOpenAfterCrash(f *testing.F) {
	// Two files: one that keeps the key index, one without it. Opening
	// either the other way empties or rebuilds the index in Open's first
	// transaction, over whatever the damage left.
	imgs := [2][]byte{uncleanImage(f, 300, false), uncleanImage(f, 300, true)}
	img := imgs[0]
	ps := int(newestMeta(f, img).pageSize)
	f.Add(uint32(2*ps), []byte{0xff, 0xff})
	f.Add(uint32(2*ps+8), []byte{0x20})
	f.Add(uint32(3*ps+10), []byte{0xff, 0xff})
	f.Add(uint32(4*ps+16), []byte{0, 0, 0, 0x40})
	f.Add(uint32(5*ps+24), []byte{1, 2, 3, 4, 5, 6, 7, 8})
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, off uint32, data []byte) {
		b := append([]byte(nil), imgs[off&1]...)
		// Leave the meta pages alone: they are checksummed and have tests
		// of their own; the pages behind them are not.
		start := 2*ps + int(off)%(len(b)-2*ps)
		copy(b[start:], data)
		p := filepath.Join(dir, "fuzz.db")
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		s, err := Open(p, Options{LockTimeout: 50 * time.Millisecond, NoKeyIndex: len(data)%2 == 1})
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrNotDatabase) {
				t.Fatalf("Open: %v, want ErrCorrupt or ErrNotDatabase", err)
			}
			return
		}
		_, _ = s.Stats()
		_, _, _ = s.List(ListQuery{State: StatePending})
		_, _ = s.Due(DueQuery{Now: time.Now().Add(time.Hour)})
		_ = s.Close()
	})
}
