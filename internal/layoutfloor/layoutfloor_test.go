package layoutfloor_test

import (
	"fmt"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/outboxd/outbox/internal/layoutfloor"
)

// TestWriteLaysOutThreeKeysPerEvent: every event written is in the file
// after a reopen, once in each of the three buckets, and the changelog
// holds the entries in order.
func TestWriteLaysOutThreeKeysPerEvent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "floor.db")
	f, err := layoutfloor.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	for c := range 3 {
		var evs []layoutfloor.Event
		for i := range 5 {
			id := fmt.Appendf(nil, "ev-%d-%d", c, i)
			evs = append(evs, layoutfloor.Event{ID: id, Record: append([]byte("rec:"), id...), Entry: append([]byte("log:"), id...)})
		}
		if err := f.Write(evs); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.View(func(tx *bolt.Tx) error {
		for _, name := range []string{"events", "due", "changelog"} {
			if n := tx.Bucket([]byte(name)).Stats().KeyN; n != 15 {
				t.Errorf("%s holds %d keys, want 15", name, n)
			}
		}
		if v := tx.Bucket([]byte("events")).Get([]byte("ev-1-2")); string(v) != "rec:ev-1-2" {
			t.Errorf("record of ev-1-2 = %q", v)
		}
		_, last := tx.Bucket([]byte("changelog")).Cursor().Last()
		if string(last) != "log:ev-2-4" {
			t.Errorf("last changelog entry = %q, want the last event written", last)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
