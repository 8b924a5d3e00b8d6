//go:build linux

package powerfs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// FS is a mounted power-loss filesystem. Its methods are safe for
// concurrent use; the mount serves any process meanwhile.
type FS struct {
	dir string

	mu     sync.Mutex // guards everything below, and the model
	m      *model
	gen    uint64 // which mount the nodes of the current server belong to
	server *fuse.Server
}

// Mount mounts an empty power-loss filesystem on the directory mountpoint,
// keeping the durable contents of its files in backing, an empty
// directory that nothing else writes.
func Mount(mountpoint, backing string) (*FS, error) {
	entries, err := os.ReadDir(backing)
	if err != nil {
		return nil, err
	}
	if len(entries) > 0 {
		return nil, fmt.Errorf("powerfs: backing directory %s is not empty", backing)
	}
	f := &FS{dir: mountpoint, m: newModel(backing)}
	if err := f.mount(); err != nil {
		return nil, err
	}
	return f, nil
}

// Dir is the mount point.
func (f *FS) Dir() string { return f.dir }

// Path is name (slash-separated) under the mount point.
func (f *FS) Path(name string) string { return filepath.Join(f.dir, filepath.FromSlash(name)) }

// mount serves the model on the mount point as a new generation.
func (f *FS) mount() error {
	f.mu.Lock()
	f.gen++
	root := &fnode{fsys: f, n: f.m.root, gen: f.gen}
	f.mu.Unlock()
	timeout := time.Second
	server, err := fs.Mount(f.dir, root, &fs.Options{
		EntryTimeout: &timeout,
		AttrTimeout:  &timeout,
		MountOptions: fuse.MountOptions{
			FsName:        "powerfs",
			Name:          "powerfs",
			DirectMount:   true,
			MaxWrite:      1 << 20,
			DisableXAttrs: true,
		},
	})
	if err != nil {
		return fmt.Errorf("powerfs: mounting on %s: %w", f.dir, err)
	}
	f.mu.Lock()
	f.server = server
	f.mu.Unlock()
	return nil
}

// Cut is a power failure: every pending change is dropped, except what
// opts keep, and the mount is reopened on the durable state. No process
// may hold a file open on the mount (kill them first); a request that
// reaches the old mount meanwhile fails with EIO and changes nothing.
func (f *FS) Cut(opts CutOptions) (CutStats, error) {
	f.mu.Lock()
	f.gen++ // the old mount's nodes stop answering
	st, err := f.m.cut(opts)
	server := f.server
	f.server = nil
	f.mu.Unlock()
	if err != nil {
		return st, fmt.Errorf("powerfs: cut: %w", err)
	}
	if server != nil {
		if err := server.Unmount(); err != nil {
			return st, fmt.Errorf("powerfs: unmounting %s for the cut (is a file still open?): %w", f.dir, err)
		}
	}
	return st, f.mount()
}

// Close unmounts the filesystem. The backing directory stays.
func (f *FS) Close() error {
	f.mu.Lock()
	server := f.server
	f.server = nil
	f.gen++
	f.mu.Unlock()
	if server == nil {
		return nil
	}
	if err := server.Unmount(); err != nil {
		return errors.Join(fmt.Errorf("powerfs: unmounting %s", f.dir), err)
	}
	return nil
}
