//go:build linux

package testkit

import (
	"os"
	"sync"
	"syscall"
	"testing"
)

// RedirectFD points file descriptor fd of this process at the file name
// opened with flag, so that what is written through fd fails the way the
// test chooses: /dev/full with os.O_WRONLY makes every write fail with
// ENOSPC, as on a full disk; the same file opened os.O_RDONLY makes writes
// fail with EBADF, as a broken disk would. The returned restore points fd
// back at its own file; it is safe to call more than once and is also run
// at the test's cleanup (before the cleanups registered earlier, such as
// closing what owns fd).
//
// If name cannot be opened here the test is skipped; any other failure
// stops it.
func RedirectFD(t testing.TB, fd int, name string, flag int) (restore func()) {
	t.Helper()
	saved, err := syscall.Dup(fd)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(name, flag, 0)
	if err != nil {
		syscall.Close(saved)
		t.Skipf("cannot open %s here: %v", name, err)
	}
	defer f.Close()
	if err := syscall.Dup3(int(f.Fd()), fd, syscall.O_CLOEXEC); err != nil {
		syscall.Close(saved)
		t.Fatal(err)
	}
	var once sync.Once
	restore = func() {
		once.Do(func() {
			if err := syscall.Dup3(saved, fd, syscall.O_CLOEXEC); err != nil {
				t.Errorf("pointing descriptor %d back at its file: %v", fd, err)
			}
			syscall.Close(saved)
		})
	}
	t.Cleanup(restore)
	return restore
}
