package partition

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// checkpoint says how far a partition store's changelog partition was
// applied to it when the store was closed cleanly: every changelog record
// below Offset is in the store, and the store then held LastLSN entries of
// its own, all shipped. It is written after a clean hand-over and removed
// as soon as the store is opened for an ownership, so a store left by a
// crash has none and is rebuilt (its unshipped writes may differ from what
// the next owner wrote).
type checkpoint struct {
	// Version is checkpointVersion.
	Version int `json:"version"`
	// Topic and ChangelogTopic name the ingest topic and the changelog
	// topic of the store; Partition its partition.
	Topic          string `json:"topic"`
	ChangelogTopic string `json:"changelog_topic"`
	Partition      int    `json:"partition"`
	// Offset is the changelog partition's end offset at the close.
	Offset int64 `json:"offset"`
	// Epoch is the highest epoch applied to or written by the store.
	Epoch int64 `json:"epoch"`
	// LastLSN is the store's last changelog LSN at the close.
	LastLSN uint64 `json:"last_lsn"`
}

const checkpointVersion = 1

// readCheckpoint reads the checkpoint at path; a missing file is (nil, nil).
// A file that does not decode is an error (the caller rebuilds).
func readCheckpoint(path string) (*checkpoint, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var cp checkpoint
	if err := json.Unmarshal(b, &cp); err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", path, err)
	}
	if cp.Version != checkpointVersion || cp.Offset < 0 {
		return nil, fmt.Errorf("checkpoint %s: unknown version %d or bad offset %d", path, cp.Version, cp.Offset)
	}
	return &cp, nil
}

// writeCheckpoint writes cp to path durably: a temporary file, fsynced,
// renamed over path, and the directory fsynced.
func writeCheckpoint(path string, cp checkpoint) error {
	cp.Version = checkpointVersion
	b, err := json.Marshal(cp)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	return syncDir(filepath.Dir(path))
}

// removeDurably removes the files (missing ones are fine) and fsyncs their
// directory, so that the removal survives a crash.
func removeDurably(paths ...string) error {
	var dirs []string
	for _, p := range paths {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		dirs = append(dirs, filepath.Dir(p))
	}
	for _, d := range dirs {
		if err := syncDir(d); err != nil {
			return err
		}
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
