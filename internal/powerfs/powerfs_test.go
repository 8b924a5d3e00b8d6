//go:build linux

package powerfs

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	bolt "go.etcd.io/bbolt"
	"go.uber.org/goleak"
)

// childEnv, when set, makes the test binary run one of the child jobs
// below on a file of a mount that its parent serves. A process must not
// page-fault on a FUSE mount that it serves itself: the fault is not a
// system call, so the Go runtime cannot stop that thread for a garbage
// collection, and the collection waits forever on the server it stopped.
// So everything that maps a file of the mount (bbolt does) runs in a child.
const childEnv = "POWERFS_TEST_CHILD"

func TestMain(m *testing.M) {
	if job := os.Getenv(childEnv); job != "" {
		os.Exit(runChild(job))
	}
	goleak.VerifyTestMain(m)
}

// runChild runs job "name:path[:arg]" and returns the exit status; it
// prints each problem on a line of its own.
func runChild(job string) int {
	name, rest, _ := strings.Cut(job, ":")
	path, arg, _ := strings.Cut(rest, ":")
	var err error
	switch name {
	case "mmap":
		err = mmapSeesWrites(path)
	case "bolt-write":
		err = boltWrite(path, arg == "nosync")
	case "bolt-read":
		err = boltRead(path)
	default:
		err = fmt.Errorf("unknown child job %q", job)
	}
	if err != nil {
		fmt.Println(err)
		return 1
	}
	return 0
}

// child runs job in a child process and returns its output.
func child(t *testing.T, job string) (string, error) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+job)
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// writeFile creates (or truncates) name with data, syncing the file when
// syncFile and its directory when syncDir.
func writeFile(t *testing.T, path string, data []byte, syncFile, syncDir bool) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if syncFile {
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if syncDir {
		syncDirOf(t, path)
	}
}

func syncDirOf(t *testing.T, path string) {
	t.Helper()
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
}

func cut(t *testing.T, f *FS, opts CutOptions) CutStats {
	t.Helper()
	st, err := f.Cut(opts)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func readOrMissing(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return "<missing>"
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A write that was never synced is gone after a cut; a synced one stays.
func TestUnsyncedWriteLostAtCut(t *testing.T) {
	f := MountTest(t)
	synced, unsynced := f.Path("synced"), f.Path("unsynced")
	writeFile(t, synced, []byte("kept"), true, true)
	writeFile(t, unsynced, []byte("before"), true, true)
	fh, err := os.OpenFile(unsynced, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fh.WriteAt([]byte("AFTER!"), 0); err != nil {
		t.Fatal(err)
	}
	fh.Close()
	if got := readOrMissing(t, unsynced); got != "AFTER!" {
		t.Fatalf("before the cut the file reads %q, want the pending write", got)
	}
	st := cut(t, f, CutOptions{})
	if got := readOrMissing(t, synced); got != "kept" {
		t.Errorf("synced file after the cut: %q, want %q", got, "kept")
	}
	if got := readOrMissing(t, unsynced); got != "before" {
		t.Errorf("file with an unsynced write after the cut: %q, want its synced content %q", got, "before")
	}
	if st.Dropped != 1 || st.Kept != 0 {
		t.Errorf("cut stats %+v, want one write dropped", st)
	}
}

// A truncation is a change like a write: pending until the file is synced.
func TestUnsyncedTruncateLostAtCut(t *testing.T) {
	f := MountTest(t)
	p := f.Path("file")
	writeFile(t, p, []byte("0123456789"), true, true)
	if err := os.Truncate(p, 3); err != nil {
		t.Fatal(err)
	}
	cut(t, f, CutOptions{})
	if got := readOrMissing(t, p); got != "0123456789" {
		t.Errorf("after the cut: %q, want the length before the unsynced truncation", got)
	}
}

// A file whose data was synced but whose directory was not is gone; with
// the directory synced it stays, and so does a new subdirectory's.
func TestCreateWithoutDirSyncLost(t *testing.T) {
	f := MountTest(t)
	if err := os.Mkdir(f.Path("sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	syncDirOf(t, f.Path("sub")) // the root, which names sub
	writeFile(t, f.Path("sub/named"), []byte("data"), true, true)
	writeFile(t, f.Path("orphan"), []byte("data"), true, false)
	st := cut(t, f, CutOptions{})
	if got := readOrMissing(t, f.Path("orphan")); got != "<missing>" {
		t.Errorf("a file created without syncing its directory reads %q after the cut, want it gone", got)
	}
	if got := readOrMissing(t, f.Path("sub/named")); got != "data" {
		t.Errorf("a file in a synced new directory reads %q after the cut, want %q", got, "data")
	}
	if st.Removed != 1 {
		t.Errorf("cut removed %d nodes, want the orphan only", st.Removed)
	}
}

// A rename is undone by a cut unless its directory was synced.
func TestRenameWithoutDirSyncLost(t *testing.T) {
	f := MountTest(t)
	writeFile(t, f.Path("a.tmp"), []byte("one"), true, true)
	if err := os.Rename(f.Path("a.tmp"), f.Path("a")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, f.Path("b.tmp"), []byte("two"), true, true)
	if err := os.Rename(f.Path("b.tmp"), f.Path("b")); err != nil {
		t.Fatal(err)
	}
	// Only b's rename is followed by a sync of the directory, which makes
	// every name in it durable: a's rename too. So rename a back first.
	syncDirOf(t, f.Path("b"))
	if err := os.Rename(f.Path("a"), f.Path("a.moved")); err != nil {
		t.Fatal(err)
	}
	cut(t, f, CutOptions{})
	for name, want := range map[string]string{"a": "one", "a.moved": "<missing>", "b": "two", "b.tmp": "<missing>", "a.tmp": "<missing>"} {
		if got := readOrMissing(t, f.Path(name)); got != want {
			t.Errorf("%s after the cut: %q, want %q", name, got, want)
		}
	}
}

// An unlink whose directory was not synced is undone.
func TestUnlinkWithoutDirSyncComesBack(t *testing.T) {
	f := MountTest(t)
	writeFile(t, f.Path("x"), []byte("still here"), true, true)
	if err := os.Remove(f.Path("x")); err != nil {
		t.Fatal(err)
	}
	cut(t, f, CutOptions{})
	if got := readOrMissing(t, f.Path("x")); got != "still here" {
		t.Errorf("after the cut: %q, want the unlinked file back", got)
	}
}

// With Tear, the first dropped write lands in part: whole up to its last
// page, cut inside that page.
func TestTornPage(t *testing.T) {
	f := MountTest(t)
	p := f.Path("file")
	writeFile(t, p, make([]byte, 3*pageSize), true, true)
	fh, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fh.WriteAt(bytes.Repeat([]byte{'x'}, 3*pageSize), 0); err != nil {
		t.Fatal(err)
	}
	fh.Close()
	st := cut(t, f, CutOptions{Tear: true, Rand: rand.New(rand.NewPCG(1, 2))})
	got, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	landed := bytes.IndexByte(got, 0)
	if len(got) != 3*pageSize || landed < 2*pageSize || landed >= 3*pageSize || bytes.ContainsRune(got[landed:], 'x') {
		t.Fatalf("torn write: %d bytes, %d of them written before the first zero; want the write cut inside its last page", len(got), landed)
	}
	if st.Torn != 1 {
		t.Errorf("cut stats %+v, want one torn write", st)
	}
}

// pendingWrites syncs an empty file, then writes n pending 100-byte
// records of distinct bytes, and returns the file's path.
func pendingWrites(t *testing.T, f *FS, n int) string {
	t.Helper()
	p := f.Path("log")
	writeFile(t, p, nil, true, true)
	fh, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	for i := range n {
		if _, err := fh.WriteAt(bytes.Repeat([]byte{byte('A' + i%26)}, 100), int64(i*100)); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

// KeepPrefix keeps an in-order prefix of the pending writes, and the same
// seed keeps the same prefix and tears the same bytes.
func TestKeepPrefixSeedReproducible(t *testing.T) {
	const writes = 40
	results := make(map[string]int)
	for seed := range uint64(6) {
		var runs [2]string
		for i := range runs {
			f := MountTest(t)
			p := pendingWrites(t, f, writes)
			cut(t, f, CutOptions{KeepPrefix: true, Tear: true, Rand: rand.New(rand.NewPCG(seed, 0))})
			got, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			runs[i] = string(got)
			// An in-order prefix: records 0..k-1 whole, then at most one torn.
			for j := 0; j*100 < len(got); j++ {
				rec := got[j*100 : min(j*100+100, len(got))]
				want := bytes.Repeat([]byte{byte('A' + j%26)}, len(rec))
				if !bytes.Equal(rec, want) {
					t.Fatalf("seed %d: record %d after the cut is %q, not a prefix of the writes", seed, j, rec)
				}
			}
		}
		if runs[0] != runs[1] {
			t.Fatalf("seed %d: two cuts of the same history kept %d and %d bytes", seed, len(runs[0]), len(runs[1]))
		}
		results[runs[0]]++
	}
	if len(results) < 2 {
		t.Errorf("six seeds all kept the same prefix; the draw does not depend on the seed")
	}
}

// Reads through a shared mmap see what was written with pwrite through the
// mount, before and after a sync, in a map made before the write and in
// one made after it (bbolt reads its file this way).
func TestMmapSeesWrites(t *testing.T) {
	f := MountTest(t)
	if out, err := child(t, "mmap:"+f.Path("mapped")); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
}

func mmapSeesWrites(path string) error {
	fh, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	defer fh.Close()
	const size = 64 << 10
	if err := fh.Truncate(size); err != nil {
		return err
	}
	before, err := syscall.Mmap(int(fh.Fd()), 0, size, syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return err
	}
	defer syscall.Munmap(before)
	_ = before[5000] // the page is in the cache before the write
	var problems []error
	for i, off := range []int64{5000, 40000, 5000 + pageSize - 2} {
		msg := fmt.Appendf(nil, "write %d", i)
		if _, err := syscall.Pwrite(int(fh.Fd()), msg, off); err != nil {
			return err
		}
		if got := before[off : off+int64(len(msg))]; !bytes.Equal(got, msg) {
			problems = append(problems, fmt.Errorf("write %d at %d: a map made before it reads %q", i, off, got))
		}
		after, err := syscall.Mmap(int(fh.Fd()), 0, size, syscall.PROT_READ, syscall.MAP_SHARED)
		if err != nil {
			return err
		}
		if got := after[off : off+int64(len(msg))]; !bytes.Equal(got, msg) {
			problems = append(problems, fmt.Errorf("write %d at %d: a map made after it reads %q", i, off, got))
		}
		syscall.Munmap(after)
		if i == 0 {
			if err := fh.Sync(); err != nil {
				return err
			}
		}
	}
	return errors.Join(problems...)
}

// bbolt on the mount: what it committed survives a cut and the file
// passes bbolt's check; with NoSync (commits that never fsync) the same
// commits are lost. This is the loss the fault suite must detect.
func TestBoltSurvivesCut(t *testing.T) {
	for _, noSync := range []bool{false, true} {
		t.Run(fmt.Sprintf("NoSync=%v", noSync), func(t *testing.T) {
			f := MountTest(t)
			job := "bolt-write:" + f.Path("bolt.db")
			if noSync {
				job += ":nosync"
			}
			if out, err := child(t, job); err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			cut(t, f, CutOptions{KeepPrefix: true, Tear: true, Rand: rand.New(rand.NewPCG(3, 4))})
			out, err := child(t, "bolt-read:"+f.Path("bolt.db"))
			if err != nil {
				t.Fatalf("after the cut: %v: %s", err, out)
			}
			found, err := strconv.Atoi(out)
			if err != nil {
				t.Fatalf("bolt-read printed %q", out)
			}
			if !noSync && found != 50 {
				t.Errorf("%d of 50 committed keys after the cut", found)
			}
			if noSync && found == 50 {
				t.Errorf("all 50 keys committed without fsync survived the cut; the cut dropped nothing")
			}
		})
	}
}

// boltWrite commits 50 keys in 50 transactions, then closes the file
// without any further sync.
func boltWrite(path string, noSync bool) error {
	db, err := bolt.Open(path, 0o600, &bolt.Options{NoSync: noSync})
	if err != nil {
		return err
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	err = d.Sync()
	d.Close()
	if err != nil {
		return err
	}
	for i := range 50 {
		err := db.Update(func(tx *bolt.Tx) error {
			b, err := tx.CreateBucketIfNotExists([]byte("b"))
			if err != nil {
				return err
			}
			return b.Put(fmt.Appendf(nil, "key-%03d", i), bytes.Repeat([]byte{'v'}, 3000))
		})
		if err != nil {
			return err
		}
	}
	return db.Close()
}

// boltRead runs bbolt's check and prints the number of keys.
func boltRead(path string) error {
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		return err
	}
	defer db.Close()
	return db.View(func(tx *bolt.Tx) error {
		var problems []error
		for err := range tx.Check() {
			problems = append(problems, err)
		}
		if len(problems) > 0 {
			return fmt.Errorf("bbolt check: %w", errors.Join(problems...))
		}
		n := 0
		if b := tx.Bucket([]byte("b")); b != nil {
			n = b.Stats().KeyN
		}
		fmt.Println(n)
		return nil
	})
}
