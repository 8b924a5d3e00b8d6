package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"path/filepath"

	bolt "go.etcd.io/bbolt"
)

// bbolt's on-disk meta page, read here before bbolt opens a file: bbolt
// trusts an intact meta page and can crash (in a goroutine the caller cannot
// recover) when the pages it points to lie past the end of a truncated file.
const (
	boltMagic       = 0xED0CDAED
	boltVersion     = 2
	pageHeaderSize  = 16
	metaChecksumOff = 56
	metaSize        = 64
	noFreelist      = ^uint64(0)
)

type boltMeta struct {
	pageSize uint32
	root     uint64
	freelist uint64
	pgid     uint64
	txid     uint64
}

// readMeta parses the meta page at off. It returns nil, cause when the page
// is not a valid bbolt meta page.
func readMeta(f io.ReaderAt, off int64) (*boltMeta, error) {
	var b [pageHeaderSize + metaSize]byte
	if _, err := f.ReadAt(b[:], off); err != nil {
		return nil, fmt.Errorf("%w: cannot read meta page at %d: %v", ErrNotDatabase, off, err)
	}
	m := b[pageHeaderSize:]
	le := binary.LittleEndian
	if le.Uint32(m[0:]) != boltMagic {
		return nil, fmt.Errorf("%w: no bbolt magic", ErrNotDatabase)
	}
	if v := le.Uint32(m[4:]); v != boltVersion {
		return nil, fmt.Errorf("%w: bbolt file format version %d (want %d)", ErrNotDatabase, v, boltVersion)
	}
	h := fnv.New64a()
	h.Write(m[:metaChecksumOff])
	if h.Sum64() != le.Uint64(m[metaChecksumOff:]) {
		return nil, fmt.Errorf("%w: meta page checksum mismatch", ErrCorrupt)
	}
	meta := &boltMeta{
		pageSize: le.Uint32(m[8:]),
		root:     le.Uint64(m[16:]),
		freelist: le.Uint64(m[32:]),
		pgid:     le.Uint64(m[40:]),
		txid:     le.Uint64(m[48:]),
	}
	if meta.pageSize < 512 || meta.pageSize > 1<<20 || meta.pageSize&(meta.pageSize-1) != 0 {
		return nil, fmt.Errorf("%w: meta page has page size %d", ErrCorrupt, meta.pageSize)
	}
	if meta.root >= meta.pgid || (meta.freelist >= meta.pgid && meta.freelist != noFreelist) {
		return nil, fmt.Errorf("%w: meta page points past its high water mark", ErrCorrupt)
	}
	return meta, nil
}

// checkFile classifies an existing file before bbolt opens it: empty, not a
// bbolt file, both meta pages bad, or shorter than the newest valid meta page
// says (truncated). The file is memory mapped only after it passes.
//
// When the newest meta page says the freelist was not written (the last
// process stopped without closing the store) and the file is to be opened
// for writing, bbolt will rebuild the freelist by walking every page, so
// checkFile walks them first (checkLocked), under the file's lock so that a
// running writer is not mistaken for damage; when another process holds the
// lock, the walk is left out and bbolt's open reports ErrLocked.
func checkFile(path string, size int64, forWrite bool) error {
	if size == 0 {
		return fmt.Errorf("%w: the file is empty (stores are created whole, so this is not a store)", ErrNotDatabase)
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	m0, err0 := readMeta(f, 0)
	var m1 *boltMeta
	var err1 error
	if m0 != nil {
		m1, err1 = readMeta(f, int64(m0.pageSize))
	} else {
		// Meta page 0 is unreadable; find meta page 1 at a common page size.
		err1 = err0
		for _, ps := range []int64{4096, 8192, 16384, 32768, 65536} {
			if m1, err1 = readMeta(f, ps); m1 != nil && int64(m1.pageSize) == ps {
				break
			}
			m1 = nil
		}
	}
	best := m0
	if best == nil || (m1 != nil && m1.txid > best.txid) {
		best = m1
	}
	if best == nil {
		// Prefer "corrupt" over "not a database" when a page had the magic.
		if errors.Is(err0, ErrCorrupt) {
			return err0
		}
		if errors.Is(err1, ErrCorrupt) {
			return err1
		}
		return err0
	}
	if need := int64(best.pgid) * int64(best.pageSize); size < need {
		return fmt.Errorf("%w: the file is %d bytes but its meta page covers %d (truncated)", ErrCorrupt, size, need)
	}
	if !forWrite || best.freelist != noFreelist {
		return nil
	}
	return checkLocked(f, best)
}

// Compact rewrites the closed store at path into a compact copy
// (path+".compact", via bbolt's Compact), fsyncs it and renames it over path.
// It holds the file's lock while it works, so it fails with ErrLocked (in an
// *OpenError) when a process has the store open. It is an offline tool: do
// not start a process on the same path while it runs.
//
// A damaged file is refused before anything is written, with Check's error
// (matching ErrCorrupt): the copy would carry the damage over the original,
// and bbolt's copy stops (panics) at a damaged page.
func Compact(path string) error {
	fail := func(err error) error { return &OpenError{Path: path, Err: err} }
	info, err := os.Stat(path)
	if err != nil {
		return fail(err)
	}
	if _, err := Check(path, CheckOptions{}); err != nil {
		var oe *OpenError
		if errors.As(err, &oe) {
			return err
		}
		return fail(err)
	}
	if err := checkFile(path, info.Size(), true); err != nil {
		return fail(err)
	}
	opts := Options{}.withDefaults()
	src, err := bolt.Open(path, 0o600, boltOptions(opts))
	if err != nil {
		return fail(mapOpenErr(err, opts.LockTimeout))
	}
	defer src.Close()
	s := &Store{db: src, path: path, opts: opts}
	if _, _, err := s.validate(); err != nil {
		return fail(err)
	}
	tmp := path + ".compact"
	_ = os.Remove(tmp)
	dstOpts := boltOptions(opts)
	dstOpts.NoFreelistSync = false // written whole, opened fast
	dst, err := bolt.Open(tmp, 0o600, dstOpts)
	if err != nil {
		return fail(err)
	}
	err = bolt.Compact(dst, src, 64<<20)
	var used int64
	if err == nil {
		err = dst.View(func(tx *bolt.Tx) error { used = tx.Size(); return nil })
	}
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		// bbolt grows files in steps; drop the unused tail.
		err = os.Truncate(tmp, used)
	}
	if err == nil {
		err = syncFile(tmp)
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("store: compact %s: %w", path, err)
	}
	return syncDir(filepath.Dir(path))
}

func syncFile(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
