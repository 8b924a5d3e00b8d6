package httpapi

import (
	"errors"
	"fmt"
	"io/fs"
	"syscall"
	"testing"
)

// A full filesystem and an exhausted quota are both "out of disk space",
// however deeply the store and the outbox wrapped them; other I/O errors
// are not.
func TestIsStorageFull(t *testing.T) {
	wrap := func(errno syscall.Errno) error {
		return fmt.Errorf("outbox: enqueue: %w", &fs.PathError{Op: "write", Path: "/var/lib/outboxd/outboxd.db", Err: errno})
	}
	for _, c := range []struct {
		err  error
		want bool
	}{
		{wrap(syscall.ENOSPC), true},
		{wrap(syscall.EDQUOT), true},
		{syscall.ENOSPC, true},
		{wrap(syscall.EIO), false},
		{errors.New("no space left on device"), false}, // text alone is not the errno
	} {
		if got := isStorageFull(c.err); got != c.want {
			t.Errorf("isStorageFull(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
