package store

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"runtime/debug"
)

// bbolt's page layout, as far as checkTree reads it.
const (
	branchPageFlag = 0x01
	leafPageFlag   = 0x02
	bucketLeafFlag = 0x01
	pageElemSize   = 16 // both branch and leaf elements
	bucketHdrSize  = 16 // root page id, sequence
)

// treeChecker walks every page reachable from a meta page, reading the file
// through a read-only memory map, and reports the first inconsistency as ErrCorrupt.
//
// It exists for one bbolt behaviour: after an unclean stop (the freelist was
// not written), bbolt.Open rebuilds the freelist by walking the same pages,
// and a damaged page there panics in a goroutine no caller can recover, or
// sends the walk past the end of the memory map. checkTree makes every check
// that walk relies on (page identity and type, elements inside their page,
// child pages below the high water mark, each page referenced once, bucket
// headers whole) and the key-order checks it reports, with the same rules, so
// a file it accepts is one bbolt's rebuild walks without a fault, and a file
// it refuses is one bbolt would have crashed or panicked on.
type treeChecker struct {
	data     []byte // the file, memory mapped read-only
	pageSize uint64
	hwm      uint64   // pages below this id are in use
	seen     []uint64 // bit set of the pages met

	// visit, when set, is called with every key and value of the leaves
	// walked that is not a nested bucket, and the page holding it (Check).
	visit func(page uint64, key, value []byte)
	// keepGoing, when set, is given the error of a damaged subtree under a
	// branch page, and the walk goes on with the next one (Check); without
	// it the first error ends the walk.
	keepGoing func(error)
}

// bucketRef is a bucket met in a leaf: its name, the page that holds its
// header, its root page (0 for an inline bucket) and, inline, its page bytes.
type bucketRef struct {
	name   []byte
	page   uint64
	root   uint64
	inline []byte
}

// checkTree checks the page tree of meta in data, the file's bytes from its
// start to at least its high water mark. Memory faults while reading data
// (a mapped file that shrank) are turned into ErrCorrupt.
func checkTree(data []byte, meta *boltMeta) (err error) {
	if uint64(len(data))/uint64(meta.pageSize) < meta.pgid {
		return fmt.Errorf("%w: the file is %d bytes but its meta page covers %d (truncated)", ErrCorrupt, len(data), meta.pgid*uint64(meta.pageSize))
	}
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: reading the pages: %v", ErrCorrupt, p)
		}
	}()
	c := &treeChecker{data: data, pageSize: uint64(meta.pageSize), hwm: meta.pgid, seen: make([]uint64, (meta.pgid+63)/64)}
	return c.bucket(meta.root, "root bucket")
}

// bucket checks the tree of the bucket whose root page is root, then the
// buckets nested in it. Inline buckets (root 0) live inside their parent's
// leaf and are not walked, as bbolt's rebuild does not walk them.
func (c *treeChecker) bucket(root uint64, name string) error {
	if root == 0 {
		return nil
	}
	var children []bucketRef
	if _, err := c.page(root, nil, nil, name, &children); err != nil {
		return err
	}
	for _, child := range children {
		if err := c.bucket(child.root, name+" > nested bucket"); err != nil {
			return err
		}
	}
	return nil
}

// read returns page id whole (with its overflow pages), after checking its
// header: that it names itself, has one page type, and ends below the high
// water mark.
func (c *treeChecker) read(id uint64, where string) ([]byte, error) {
	if id < 2 || id >= c.hwm {
		return nil, pageErr(id, "%s: page %d is outside the pages in use (2 to %d)", where, id, c.hwm-1)
	}
	hdr := c.data[id*c.pageSize:]
	le := binary.LittleEndian
	if self := le.Uint64(hdr[0:]); self != id {
		return nil, pageErr(id, "%s: page %d identifies itself as page %d", where, id, self)
	}
	flags := le.Uint16(hdr[8:])
	if flags != branchPageFlag && flags != leafPageFlag {
		return nil, pageErr(id, "%s: page %d has type flags %#x, want a branch or leaf page", where, id, flags)
	}
	overflow := uint64(le.Uint32(hdr[12:]))
	if id+overflow >= c.hwm {
		return nil, pageErr(id, "%s: page %d runs %d pages past the pages in use", where, id, id+overflow-c.hwm+1)
	}
	for i := id; i <= id+overflow; i++ {
		if c.seen[i/64]&(1<<(i%64)) != 0 {
			return nil, pageErr(i, "%s: page %d is referenced twice", where, i)
		}
		c.seen[i/64] |= 1 << (i % 64)
	}
	return c.data[id*c.pageSize : (id+overflow+1)*c.pageSize], nil
}

// page checks page id and the subtree under it; every key must be at least
// minClosed (when not nil) and below maxOpen (when not nil). It returns the
// largest key of the subtree and appends the buckets found in its leaves to
// children.
func (c *treeChecker) page(id uint64, minClosed, maxOpen []byte, where string, children *[]bucketRef) ([]byte, error) {
	p, err := c.read(id, where)
	if err != nil {
		return nil, err
	}
	le := binary.LittleEndian
	isBranch := le.Uint16(p[8:]) == branchPageFlag
	count := int(le.Uint16(p[10:]))
	if pageHeaderSize+count*pageElemSize > len(p) {
		return nil, pageErr(id, "%s: page %d claims %d elements, more than fit in it", where, id, count)
	}
	// slice returns n bytes at off from element i's address, or false
	// when they do not lie inside the page.
	slice := func(i int, off uint32, n uint64) ([]byte, bool) {
		start := uint64(pageHeaderSize+i*pageElemSize) + uint64(off)
		end := start + n
		if end > uint64(len(p)) {
			return nil, false
		}
		return p[start:end], true
	}
	running := minClosed
	var maxInSubtree []byte
	for i := range count {
		e := p[pageHeaderSize+i*pageElemSize:]
		var key, value []byte
		var ok bool
		if isBranch {
			key, ok = slice(i, le.Uint32(e[0:]), uint64(le.Uint32(e[4:])))
		} else {
			var kv []byte
			ksize := le.Uint32(e[8:])
			if kv, ok = slice(i, le.Uint32(e[4:]), uint64(ksize)+uint64(le.Uint32(e[12:]))); ok {
				key, value = kv[:ksize], kv[ksize:]
			}
		}
		if !ok {
			return nil, pageErr(id, "%s: page %d: element %d lies outside the page", where, id, i)
		}
		if err := checkKeyOrder(i, key, running, maxOpen); err != nil {
			return nil, pageErr(id, "%s: page %d: %v", where, id, err)
		}
		if isBranch {
			next := maxOpen
			if i+1 < count {
				n := p[pageHeaderSize+(i+1)*pageElemSize:]
				if next, ok = slice(i+1, le.Uint32(n[0:]), uint64(le.Uint32(n[4:]))); !ok {
					return nil, pageErr(id, "%s: page %d: element %d lies outside the page", where, id, i+1)
				}
			}
			maxInSubtree, err = c.page(le.Uint64(e[8:]), key, next, where, children)
			if err != nil {
				if c.keepGoing == nil {
					return nil, err
				}
				c.keepGoing(err)
				maxInSubtree = key
			}
			running = maxInSubtree
			continue
		}
		running = key
		maxInSubtree = key
		if le.Uint32(e[0:])&bucketLeafFlag != 0 {
			if len(value) < bucketHdrSize {
				return nil, pageErr(id, "%s: page %d: bucket %q has a %d-byte header", where, id, key, len(value))
			}
			ref := bucketRef{name: key, page: id, root: le.Uint64(value)}
			if ref.root == 0 {
				ref.inline = value[bucketHdrSize:]
			}
			*children = append(*children, ref)
		} else if c.visit != nil {
			c.visit(id, key, value)
		}
	}
	return maxInSubtree, nil
}

// pageError is damage found on one page. It matches ErrCorrupt; Check
// reads the page from it.
type pageError struct {
	page uint64
	msg  string
}

func pageErr(page uint64, format string, args ...any) error {
	return &pageError{page: page, msg: fmt.Sprintf(format, args...)}
}

// Error implements error.
func (e *pageError) Error() string { return ErrCorrupt.Error() + ": " + e.msg }

// Unwrap returns ErrCorrupt.
func (e *pageError) Unwrap() error { return ErrCorrupt }

// checkKeyOrder applies bbolt's key-order rules to the key of element i: not
// below the smallest key its parent allows (first element) or the previous
// key (the others), not equal to the previous key, and below maxOpen.
func checkKeyOrder(i int, key, prev, maxOpen []byte) error {
	if i == 0 && prev != nil && bytes.Compare(prev, key) > 0 {
		return fmt.Errorf("first key %x is below its parent's key %x", key, prev)
	}
	if i > 0 && bytes.Compare(prev, key) >= 0 {
		return fmt.Errorf("key %d (%x) is not above the key before it (%x)", i, key, prev)
	}
	if maxOpen != nil && bytes.Compare(key, maxOpen) >= 0 {
		return fmt.Errorf("key %d (%x) is not below its parent's next key (%x)", i, key, maxOpen)
	}
	return nil
}
