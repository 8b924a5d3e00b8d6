package partition

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Files names the files of a group's partitions: the store of partition p
// of Topic is <Dir>/<Topic>-<p>.db, its checkpoint
// <Dir>/<Topic>-<p>.checkpoint.
type Files struct {
	// Dir is the directory of the partitions' files.
	Dir string
	// Topic is the ingest topic, ChangelogTopic the changelog topic that
	// a checkpoint must name.
	Topic, ChangelogTopic string
}

// Store returns the path of partition p's store.
func (f Files) Store(p int) string {
	return filepath.Join(f.Dir, f.Topic+"-"+strconv.Itoa(p)+".db")
}

// Checkpoint returns the path of partition p's checkpoint.
func (f Files) Checkpoint(p int) string {
	return filepath.Join(f.Dir, f.Topic+"-"+strconv.Itoa(p)+".checkpoint")
}

// Warm returns the partitions with a store and a checkpoint of these
// topics in Dir, each with the changelog offset of its checkpoint.
func (f Files) Warm() map[int]int64 {
	warm := map[int]int64{}
	prefix := f.Topic + "-"
	paths, _ := filepath.Glob(filepath.Join(f.Dir, "*.checkpoint"))
	for _, path := range paths {
		name := strings.TrimSuffix(filepath.Base(path), ".checkpoint")
		p, err := strconv.Atoi(strings.TrimPrefix(name, prefix))
		if !strings.HasPrefix(name, prefix) || err != nil || p < 0 {
			continue
		}
		cp, err := readCheckpoint(path)
		if err != nil || !f.matches(cp, p) {
			continue
		}
		if _, err := os.Stat(f.Store(p)); err != nil {
			continue
		}
		warm[p] = cp.Offset
	}
	return warm
}

// MkdirDurably creates dir and its missing parents, and syncs the
// directory that names dir and each one it created: a directory whose
// name was never synced is gone after a power failure, with every store
// and checkpoint in it. dir's own parent is synced even when dir existed,
// since an earlier run may have created it and crashed before any sync.
func MkdirDurably(dir string) error {
	dir = filepath.Clean(dir)
	names := []string{filepath.Dir(dir)}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(d); err == nil || filepath.Dir(d) == d {
			break
		}
		names = append(names, filepath.Dir(d))
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	for _, d := range names {
		if err := syncDir(d); err != nil {
			return err
		}
	}
	return nil
}
