package partition

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/outboxd/outbox/internal/powerfs"
)

// TestPowerCutKeepsPartitionStoreDirectory is the regression test of the
// Kafka power-loss scenario (faults: TestPowerLossKafka), which found every
// partition store and checkpoint gone after a power cut: the directory that
// holds them was created without syncing the directory that names it, so
// the files, synced as they were, had no durable name.
func TestPowerCutKeepsPartitionStoreDirectory(t *testing.T) {
	f := powerfs.MountTest(t)
	dir := f.Path("data/outboxd.db.partitions")
	if err := MkdirDurably(dir); err != nil {
		t.Fatal(err)
	}
	// A file made durable as the stores and checkpoints are: synced, and
	// its directory synced.
	path := filepath.Join(dir, "events-0.checkpoint")
	if err := os.WriteFile(path, []byte("checkpoint"), 0o600); err != nil {
		t.Fatal(err)
	}
	fh, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := fh.Sync(); err != nil {
		t.Fatal(err)
	}
	fh.Close()
	if err := syncDir(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Cut(powerfs.CutOptions{}); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "checkpoint" {
		t.Fatalf("after a power cut the checkpoint reads %q, %v; want it kept with its directory", b, err)
	}
	// Again on the directory that now exists: MkdirDurably is idempotent.
	if err := MkdirDurably(dir); err != nil {
		t.Fatal(err)
	}
}
