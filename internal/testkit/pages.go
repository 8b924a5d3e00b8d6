package testkit

import (
	"encoding/binary"
	"os"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// bbolt's page layout: a 16-byte header (page id 8 bytes, flags 2, element
// count 2, overflow 4) followed by 16-byte elements. A branch element ends
// with its child's page id; a leaf element is flags, the distance from the
// element to its key, key size and value size (4 bytes each), and the key
// is followed by the value.
const (
	pageHeaderSize = 16
	pageElemSize   = 16
	leafPageFlag   = 0x02
)

var le = binary.LittleEndian

// LeafPages returns the page size of the bbolt file at path and the leaf
// pages of its top-level bucket in key order, read from the file's page
// layout. The file is opened read-only (waiting at most a second for its
// lock) and closed before the pages are read.
func LeafPages(t testing.TB, path, bucket string) (pageSize int, leaves []uint64) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var root uint64
	found := false
	_ = db.View(func(tx *bolt.Tx) error {
		if b := tx.Bucket([]byte(bucket)); b != nil {
			root, found = uint64(b.Root()), true
		}
		return nil
	})
	pageSize = db.Info().PageSize
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if !found {
		t.Fatalf("%s has no bucket %q", path, bucket)
	}
	img := readFile(t, path)
	var walk func(id uint64)
	walk = func(id uint64) {
		p := page(t, img, pageSize, id)
		if le.Uint16(p[8:]) == leafPageFlag {
			leaves = append(leaves, id)
			return
		}
		for i := range int(le.Uint16(p[10:])) {
			walk(le.Uint64(p[pageHeaderSize+i*pageElemSize+8:]))
		}
	}
	walk(root)
	return pageSize, leaves
}

// MiddleValueOffset returns the offset, in leaf page id of the file at path,
// of the middle of the value of the page's middle element, less 16: 32 bytes
// written there fall inside that value. It stops the test if the value is
// shorter than 64 bytes (not a record).
func MiddleValueOffset(t testing.TB, path string, pageSize int, id uint64) int {
	t.Helper()
	p := page(t, readFile(t, path), pageSize, id)
	i := int(le.Uint16(p[10:])) / 2
	e := p[pageHeaderSize+i*pageElemSize:]
	pos, ksize, vsize := int(le.Uint32(e[4:])), int(le.Uint32(e[8:])), int(le.Uint32(e[12:]))
	if vsize < 64 {
		t.Fatalf("page %d: element %d has a %d-byte value; want a record", id, i, vsize)
	}
	return pageHeaderSize + i*pageElemSize + pos + ksize + vsize/2 - 16
}

// LastValueEnd returns the offset, in leaf page id of the file at path,
// where the value of its last element ends: after it the page is unused.
func LastValueEnd(t testing.TB, path string, pageSize int, id uint64) int {
	t.Helper()
	p := page(t, readFile(t, path), pageSize, id)
	n := int(le.Uint16(p[10:]))
	if n == 0 {
		t.Fatalf("page %d has no elements", id)
	}
	e := p[pageHeaderSize+(n-1)*pageElemSize:]
	return pageHeaderSize + (n-1)*pageElemSize + int(le.Uint32(e[4:])+le.Uint32(e[8:])+le.Uint32(e[12:]))
}

// Overwrite writes b at offset off of page id of the file at path, whose
// pages are pageSize bytes, in place.
func Overwrite(t testing.TB, path string, pageSize int, id uint64, off int, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.WriteAt(b, int64(id)*int64(pageSize)+int64(off))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
}

// Junk returns n bytes of a fixed pattern, the same in every run, to
// overwrite part of a page with: 0xA5, 0xA6, … (wrapping after 0xFF).
func Junk(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(0xA5 + i)
	}
	return b
}

func readFile(t testing.TB, path string) []byte {
	t.Helper()
	img, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// page returns page id of img and what follows it, stopping the test if the
// page lies beyond the end of the file.
func page(t testing.TB, img []byte, pageSize int, id uint64) []byte {
	t.Helper()
	if id >= uint64(len(img)/pageSize) {
		t.Fatalf("page %d is beyond the end of the file (%d pages)", id, len(img)/pageSize)
	}
	return img[int(id)*pageSize:]
}
