//go:build linux

package powerfs

import (
	"os"
	"path/filepath"
	"testing"
)

// MountTest mounts a power-loss filesystem on a temporary directory of t,
// unmounted when t ends. Where it cannot mount (no /dev/fuse, no
// permission, no fusermount3), it skips t saying why, unless the CI
// environment variable is set: there it fails t, so that a CI machine
// without FUSE does not pass by skipping.
func MountTest(t testing.TB) *FS {
	t.Helper()
	dir := t.TempDir()
	mnt, backing := filepath.Join(dir, "mnt"), filepath.Join(dir, "backing")
	for _, d := range []string{mnt, backing} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	f, err := Mount(mnt, backing)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("cannot mount the power-loss filesystem (FUSE: /dev/fuse and root or fusermount3 from the fuse3 package): %v", err)
		}
		t.Skipf("SKIP: cannot mount the power-loss filesystem (FUSE: /dev/fuse and root or fusermount3 from the fuse3 package): %v", err)
	}
	t.Cleanup(func() {
		if err := f.Close(); err != nil {
			t.Errorf("unmounting the power-loss filesystem: %v", err)
		}
	})
	return f
}
