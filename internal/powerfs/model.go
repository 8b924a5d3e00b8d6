//go:build linux

package powerfs

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"time"
)

// pageSize is the unit a torn write is cut within.
const pageSize = 4096

// change is one pending change to a file: a write of data at off, or a
// truncation to size when data is nil.
type change struct {
	off  int64
	data []byte
	size int64
}

// node is a file or a directory of the model.
type node struct {
	ino   uint64
	mode  uint32 // file type and permissions
	mtime time.Time

	// Regular files: the durable content is the backing file object, of
	// durableSize bytes; the current content is that with pending applied
	// in order, of size bytes.
	object      string
	durableSize int64
	size        int64
	pending     []change

	// Directories: the current names, and the durable ones (as of the
	// directory's last sync).
	live, durable map[string]*node
}

func (n *node) isDir() bool { return n.mode&syscall.S_IFMT == syscall.S_IFDIR }

// model is the state behind the mount. Its caller holds FS.mu.
type model struct {
	backing string
	nextIno uint64
	nodes   map[uint64]*node
	root    *node
}

func newModel(backing string) *model {
	m := &model{backing: backing, nextIno: 1, nodes: make(map[uint64]*node)}
	m.root = m.newDir(0o755)
	return m
}

func (m *model) newDir(perm uint32) *node {
	n := &node{ino: m.nextIno, mode: syscall.S_IFDIR | perm&0o7777, mtime: time.Now(),
		live: make(map[string]*node), durable: make(map[string]*node)}
	m.nextIno++
	m.nodes[n.ino] = n
	return n
}

// newFile makes a file node with an empty backing file.
func (m *model) newFile(perm uint32) (*node, error) {
	n := &node{ino: m.nextIno, mode: syscall.S_IFREG | perm&0o7777, mtime: time.Now(),
		object: filepath.Join(m.backing, strconv.FormatUint(m.nextIno, 10))}
	f, err := os.OpenFile(n.object, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, err
	}
	if err := f.Close(); err != nil {
		return nil, err
	}
	m.nextIno++
	m.nodes[n.ino] = n
	return n, nil
}

// read fills dest with the current content at off and returns how many
// bytes the file has there.
func (n *node) read(dest []byte, off int64) (int, error) {
	if off >= n.size {
		return 0, nil
	}
	buf := dest[:min(int64(len(dest)), n.size-off)]
	clear(buf)
	if off < n.durableSize {
		f, err := os.Open(n.object)
		if err != nil {
			return 0, err
		}
		_, err = f.ReadAt(buf[:min(int64(len(buf)), n.durableSize-off)], off)
		f.Close()
		if err != nil {
			return 0, err
		}
	}
	for _, c := range n.pending {
		c.overlay(buf, off)
	}
	return len(buf), nil
}

// overlay applies c to buf, which holds the file's bytes from off.
func (c change) overlay(buf []byte, off int64) {
	end := off + int64(len(buf))
	if c.data == nil {
		if c.size < end {
			clear(buf[max(c.size-off, 0):])
		}
		return
	}
	from, to := max(c.off, off), min(c.off+int64(len(c.data)), end)
	if from < to {
		copy(buf[from-off:to-off], c.data[from-c.off:to-c.off])
	}
}

func (n *node) write(data []byte, off int64) {
	n.pending = append(n.pending, change{off: off, data: slices.Clone(data)})
	n.size = max(n.size, off+int64(len(data)))
	n.mtime = time.Now()
}

func (n *node) truncate(size int64) {
	n.pending = append(n.pending, change{data: nil, size: size})
	n.size = size
	n.mtime = time.Now()
}

// sync makes the first k pending changes of a file durable, the last of
// them cut to its first torn bytes when torn >= 0, and drops the pending
// list.
func (n *node) sync(k, torn int) error {
	if len(n.pending) == 0 {
		return nil
	}
	f, err := os.OpenFile(n.object, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	size := n.durableSize
	for i, c := range n.pending[:k] {
		if c.data == nil {
			err = f.Truncate(c.size)
			size = c.size
		} else {
			data := c.data
			if i == k-1 && torn >= 0 {
				data = data[:torn]
			}
			_, err = f.WriteAt(data, c.off)
			size = max(size, c.off+int64(len(data)))
		}
		if err != nil {
			f.Close()
			return err
		}
	}
	if err := f.Close(); err != nil {
		return err
	}
	n.durableSize, n.pending = size, nil
	return nil
}

// fsync is a file's or a directory's sync: all of it becomes durable.
func (n *node) fsync() error {
	if n.isDir() {
		n.durable = maps.Clone(n.live)
		return nil
	}
	if err := n.sync(len(n.pending), -1); err != nil {
		return err
	}
	n.size = n.durableSize
	return nil
}

// CutOptions say what a cut keeps of the pending writes. The zero value
// drops them all.
type CutOptions struct {
	// Rand draws what KeepPrefix and Tear keep; required with either.
	Rand *rand.Rand
	// KeepPrefix keeps, for each file, a prefix of its pending writes and
	// truncations, of a length drawn uniformly from zero to all of them,
	// as a disk that wrote some of them in order before the power went.
	KeepPrefix bool
	// Tear lets part of the first pending write a file drops land: its
	// bytes up to a point drawn inside the write's last 4 KiB page (file
	// offsets), as a disk whose power went in the middle of a page.
	Tear bool
}

// CutStats count what one cut did.
type CutStats struct {
	// Files is the number of files with pending changes.
	Files int
	// Kept and Dropped count pending writes and truncations.
	Kept, Dropped int
	// Torn counts the writes that landed in part.
	Torn int
	// Names counts the directories whose names went back to their last
	// sync, Removed the files and directories no durable name reaches.
	Names, Removed int
}

// cut drops what is pending, keeping what opts allow, and the nodes no
// durable name reaches.
func (m *model) cut(opts CutOptions) (CutStats, error) {
	var st CutStats
	if (opts.KeepPrefix || opts.Tear) && opts.Rand == nil {
		return st, fmt.Errorf("powerfs: CutOptions.Rand is required with KeepPrefix or Tear")
	}
	for _, ino := range slices.Sorted(maps.Keys(m.nodes)) {
		n := m.nodes[ino]
		if n.isDir() {
			if !maps.Equal(n.live, n.durable) {
				st.Names++
			}
			n.live = maps.Clone(n.durable)
			continue
		}
		if len(n.pending) == 0 {
			continue
		}
		st.Files++
		k, torn := 0, -1
		if opts.KeepPrefix {
			k = opts.Rand.IntN(len(n.pending) + 1)
		}
		if opts.Tear && k < len(n.pending) && n.pending[k].data != nil {
			if torn = tearAt(n.pending[k], opts.Rand); torn > 0 {
				k++
				st.Torn++
			} else {
				torn = -1
			}
		}
		st.Kept += k
		st.Dropped += len(n.pending) - k
		if err := n.sync(k, torn); err != nil {
			return st, err
		}
		n.size = n.durableSize
	}
	removed, err := m.collect()
	st.Removed = removed
	return st, err
}

// tearAt draws how many leading bytes of c land: a point inside c's last
// page, never all of it.
func tearAt(c change, r *rand.Rand) int {
	end := c.off + int64(len(c.data))
	last := max((end-1)/pageSize*pageSize, c.off)
	return int(last-c.off) + r.IntN(int(end-last))
}

// collect removes the nodes that no durable name reaches from the root,
// with their backing files.
func (m *model) collect() (int, error) {
	reached := map[uint64]bool{m.root.ino: true}
	queue := []*node{m.root}
	for len(queue) > 0 {
		d := queue[0]
		queue = queue[1:]
		for _, c := range d.durable {
			if !reached[c.ino] {
				reached[c.ino] = true
				if c.isDir() {
					queue = append(queue, c)
				}
			}
		}
	}
	removed := 0
	for ino, n := range m.nodes {
		if reached[ino] {
			continue
		}
		delete(m.nodes, ino)
		removed++
		if n.object != "" {
			if err := os.Remove(n.object); err != nil {
				return removed, err
			}
		}
	}
	return removed, nil
}
