//go:build linux

package powerfs

import (
	"context"
	"maps"
	"slices"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// fnode serves one node of the model on one mount (generation gen).
type fnode struct {
	fs.Inode
	fsys *FS
	n    *node
	gen  uint64
}

var (
	_ fs.NodeLookuper  = (*fnode)(nil)
	_ fs.NodeGetattrer = (*fnode)(nil)
	_ fs.NodeSetattrer = (*fnode)(nil)
	_ fs.NodeOpener    = (*fnode)(nil)
	_ fs.NodeReader    = (*fnode)(nil)
	_ fs.NodeWriter    = (*fnode)(nil)
	_ fs.NodeFsyncer   = (*fnode)(nil)
	_ fs.NodeFlusher   = (*fnode)(nil)
	_ fs.NodeReaddirer = (*fnode)(nil)
	_ fs.NodeCreater   = (*fnode)(nil)
	_ fs.NodeMkdirer   = (*fnode)(nil)
	_ fs.NodeUnlinker  = (*fnode)(nil)
	_ fs.NodeRmdirer   = (*fnode)(nil)
	_ fs.NodeRenamer   = (*fnode)(nil)
)

// lock takes the model's lock and reports whether this node's mount is
// still the current one.
func (fn *fnode) lock() bool {
	fn.fsys.mu.Lock()
	if fn.gen != fn.fsys.gen {
		fn.fsys.mu.Unlock()
		return false
	}
	return true
}

func (fn *fnode) unlock() { fn.fsys.mu.Unlock() }

func fillAttr(n *node, out *fuse.Attr) {
	out.Ino = n.ino
	out.Mode = n.mode
	out.Nlink = 1
	if n.isDir() {
		out.Nlink = 2
	}
	out.Size = uint64(n.size)
	out.Blocks = (out.Size + 511) / 512
	out.Blksize = pageSize
	out.SetTimes(nil, &n.mtime, &n.mtime)
}

// child makes the inode of model node c under fn.
func (fn *fnode) child(ctx context.Context, c *node, out *fuse.EntryOut) *fs.Inode {
	fillAttr(c, &out.Attr)
	return fn.NewInode(ctx, &fnode{fsys: fn.fsys, n: c, gen: fn.gen}, fs.StableAttr{Mode: c.mode & syscall.S_IFMT, Ino: c.ino})
}

func (fn *fnode) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if !fn.lock() {
		return nil, syscall.EIO
	}
	defer fn.unlock()
	c, ok := fn.n.live[name]
	if !ok {
		return nil, syscall.ENOENT
	}
	return fn.child(ctx, c, out), 0
}

func (fn *fnode) Getattr(ctx context.Context, _ fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	if !fn.lock() {
		return syscall.EIO
	}
	defer fn.unlock()
	fillAttr(fn.n, &out.Attr)
	return 0
}

func (fn *fnode) Setattr(ctx context.Context, _ fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if !fn.lock() {
		return syscall.EIO
	}
	defer fn.unlock()
	if size, ok := in.GetSize(); ok {
		if fn.n.isDir() {
			return syscall.EISDIR
		}
		fn.n.truncate(int64(size))
	}
	if mode, ok := in.GetMode(); ok {
		fn.n.mode = fn.n.mode&syscall.S_IFMT | mode&0o7777
	}
	fillAttr(fn.n, &out.Attr)
	return 0
}

func (fn *fnode) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	return nil, 0, 0
}

func (fn *fnode) Read(ctx context.Context, _ fs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	if !fn.lock() {
		return nil, syscall.EIO
	}
	defer fn.unlock()
	n, err := fn.n.read(dest, off)
	if err != nil {
		return nil, syscall.EIO
	}
	return fuse.ReadResultData(dest[:n]), 0
}

func (fn *fnode) Write(ctx context.Context, _ fs.FileHandle, data []byte, off int64) (uint32, syscall.Errno) {
	if !fn.lock() {
		return 0, syscall.EIO
	}
	defer fn.unlock()
	fn.n.write(data, off)
	return uint32(len(data)), 0
}

// Fsync serves fsync and fdatasync of files, and fsync of directories.
func (fn *fnode) Fsync(ctx context.Context, _ fs.FileHandle, flags uint32) syscall.Errno {
	if !fn.lock() {
		return syscall.EIO
	}
	defer fn.unlock()
	if err := fn.n.fsync(); err != nil {
		return syscall.EIO
	}
	return 0
}

func (fn *fnode) Flush(ctx context.Context, _ fs.FileHandle) syscall.Errno { return 0 }

func (fn *fnode) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	if !fn.lock() {
		return nil, syscall.EIO
	}
	defer fn.unlock()
	var list []fuse.DirEntry
	for _, name := range slices.Sorted(maps.Keys(fn.n.live)) {
		c := fn.n.live[name]
		list = append(list, fuse.DirEntry{Name: name, Ino: c.ino, Mode: c.mode & syscall.S_IFMT})
	}
	return fs.NewListDirStream(list), 0
}

func (fn *fnode) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	if !fn.lock() {
		return nil, nil, 0, syscall.EIO
	}
	defer fn.unlock()
	if _, ok := fn.n.live[name]; ok {
		return nil, nil, 0, syscall.EEXIST
	}
	c, err := fn.fsys.m.newFile(mode)
	if err != nil {
		return nil, nil, 0, syscall.EIO
	}
	fn.n.live[name] = c
	return fn.child(ctx, c, out), nil, 0, 0
}

func (fn *fnode) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if !fn.lock() {
		return nil, syscall.EIO
	}
	defer fn.unlock()
	if _, ok := fn.n.live[name]; ok {
		return nil, syscall.EEXIST
	}
	c := fn.fsys.m.newDir(mode)
	fn.n.live[name] = c
	return fn.child(ctx, c, out), 0
}

func (fn *fnode) Unlink(ctx context.Context, name string) syscall.Errno {
	return fn.remove(name, false)
}

func (fn *fnode) Rmdir(ctx context.Context, name string) syscall.Errno {
	return fn.remove(name, true)
}

func (fn *fnode) remove(name string, dir bool) syscall.Errno {
	if !fn.lock() {
		return syscall.EIO
	}
	defer fn.unlock()
	c, ok := fn.n.live[name]
	switch {
	case !ok:
		return syscall.ENOENT
	case dir && !c.isDir():
		return syscall.ENOTDIR
	case !dir && c.isDir():
		return syscall.EISDIR
	case dir && len(c.live) > 0:
		return syscall.ENOTEMPTY
	}
	delete(fn.n.live, name)
	return 0
}

// Rename supports plain renames and RENAME_NOREPLACE.
func (fn *fnode) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	if flags&^uint32(unix.RENAME_NOREPLACE) != 0 {
		return syscall.ENOTSUP
	}
	to, ok := newParent.(*fnode)
	if !ok {
		return syscall.EXDEV
	}
	if !fn.lock() {
		return syscall.EIO
	}
	defer fn.unlock()
	c, ok := fn.n.live[name]
	if !ok {
		return syscall.ENOENT
	}
	if old, ok := to.n.live[newName]; ok {
		switch {
		case flags&uint32(unix.RENAME_NOREPLACE) != 0:
			return syscall.EEXIST
		case old.isDir() != c.isDir():
			return syscall.EISDIR
		case old.isDir() && len(old.live) > 0:
			return syscall.ENOTEMPTY
		}
	}
	delete(fn.n.live, name)
	to.n.live[newName] = c
	return 0
}
