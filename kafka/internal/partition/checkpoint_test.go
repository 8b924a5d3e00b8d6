package partition

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestCheckpointRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "in-3.checkpoint")
	if cp, err := readCheckpoint(path); cp != nil || err != nil {
		t.Fatalf("missing checkpoint: %v %v, want nil, nil", cp, err)
	}
	want := checkpoint{Topic: "in", ChangelogTopic: "in-changelog", Partition: 3, Offset: 120, Epoch: 7, LastLSN: 99}
	if err := writeCheckpoint(path, want); err != nil {
		t.Fatal(err)
	}
	got, err := readCheckpoint(path)
	want.Version = checkpointVersion
	if err != nil || *got != want {
		t.Fatalf("read %+v %v, want %+v", got, err, want)
	}
	if err := removeDurably(path); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("checkpoint still there: %v", err)
	}
}

// FuzzReadCheckpoint feeds arbitrary bytes as a checkpoint file: it must
// never panic, and what it accepts has a known version and an offset that
// is not negative (anything else is rebuilt from the changelog).
func FuzzReadCheckpoint(f *testing.F) {
	f.Add([]byte(`{"version":1,"topic":"in","changelog_topic":"c","partition":0,"offset":5,"epoch":2,"last_lsn":9}`))
	f.Add([]byte(`{"version":2}`))
	f.Add([]byte(`{"version":1,"offset":-1}`))
	f.Add([]byte(`not json`))
	f.Add([]byte{})
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, b []byte) {
		path := filepath.Join(dir, "cp")
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		cp, err := readCheckpoint(path)
		if err != nil {
			if cp != nil {
				t.Fatalf("a checkpoint and an error: %+v %v", cp, err)
			}
			return
		}
		if cp.Version != checkpointVersion || cp.Offset < 0 {
			t.Fatalf("accepted %+v", cp)
		}
	})
}
