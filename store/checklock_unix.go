//go:build unix

package store

import (
	"os"
	"syscall"
)

// checkLocked runs checkTree on f under the file's exclusive lock, through a
// read-only memory map of its own. When another process holds the lock it
// checks nothing: bbolt's open then waits for that lock and fails with
// ErrLocked, or finds a freelist the other process wrote when it closed.
func checkLocked(f *os.File, best *boltMeta) error {
	fd := int(f.Fd())
	if err := syscall.Flock(fd, syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return nil
	}
	defer syscall.Flock(fd, syscall.LOCK_UN) //nolint:errcheck // closing the file unlocks too
	// The file may have changed between the first meta read and the lock.
	for _, off := range []int64{0, int64(best.pageSize)} {
		if m, _ := readMeta(f, off); m != nil && m.txid > best.txid {
			best = m
		}
	}
	if best.freelist != noFreelist {
		return nil
	}
	info, err := f.Stat()
	if err != nil {
		return err
	}
	size := min(info.Size(), int64(best.pgid)*int64(best.pageSize))
	if size <= 0 {
		return checkTree(nil, best)
	}
	data, err := syscall.Mmap(fd, 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED|mapPopulate)
	if err != nil {
		return err
	}
	defer syscall.Munmap(data) //nolint:errcheck // nothing to do about it
	return checkTree(data, best)
}
