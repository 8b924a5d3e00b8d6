package store

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// TestFloorLaysOutThreeKeysPerEvent: every event a Floor writes is in the
// file after a reopen, once in each of the events, due and changelog
// buckets, under the keys the store itself uses (the ID; due time ‖ ID;
// the LSN), and the changelog holds the entries in order.
func TestFloorLaysOutThreeKeysPerEvent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "floor.db")
	f, err := OpenFloor(path)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for c := range 3 {
		var evs []FloorEvent
		for i := range 5 {
			id := fmt.Appendf(nil, "ev-%d-%d", c, i)
			evs = append(evs, FloorEvent{ID: id, Record: append([]byte("rec:"), id...), Entry: append([]byte("log:"), id...)})
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
	if got := db.Info().PageSize; got != newFilePageSize {
		t.Errorf("page size %d, want the store's %d", got, newFilePageSize)
	}
	err = db.View(func(tx *bolt.Tx) error {
		for _, name := range [][]byte{bucketEvents, bucketDue, bucketDueByEndpoint, bucketChangelog} {
			if n := tx.Bucket(name).Stats().KeyN; n != 15 {
				t.Errorf("%s holds %d keys, want 15", name, n)
			}
		}
		if v := tx.Bucket(bucketEvents).Get([]byte("ev-1-2")); string(v) != "rec:ev-1-2" {
			t.Errorf("record of ev-1-2 = %q", v)
		}
		k, _ := tx.Bucket(bucketDue).Cursor().First()
		if due := fromNanos(binary.BigEndian.Uint64(k)); !bytes.Equal(k[8:], []byte("ev-0-0")) ||
			due.Before(start.Add(-time.Second)) || due.After(time.Now().Add(time.Second)) {
			t.Errorf("first due key = %q (due %v), want the store's key of ev-0-0 due about now", k, due)
		}
		k, last := tx.Bucket(bucketChangelog).Cursor().Last()
		if !bytes.Equal(k, u64(15)) || string(last) != "log:ev-2-4" {
			t.Errorf("last changelog entry = %x: %q, want LSN 15: the last event written", k, last)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
