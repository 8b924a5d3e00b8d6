package testkit

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// values returns every key and value of bucket in the file at path.
func values(t *testing.T, path, bucket string) map[string]string {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	m := map[string]string{}
	_ = db.View(func(tx *bolt.Tx) error {
		return tx.Bucket([]byte(bucket)).ForEach(func(k, v []byte) error { m[string(k)] = string(v); return nil })
	})
	return m
}

// Junk written at MiddleValueOffset or just before LastValueEnd of each
// leaf LeafPages lists lands inside exactly one value of the bucket (in its
// middle, or at its end), in key order from one leaf to the next; every key
// and every other value bbolt reads is unchanged.
func TestDamageLandsInsideOneValue(t *testing.T) {
	path := filepath.Join(t.TempDir(), "test.db")
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucket([]byte("events"))
		if err != nil {
			return err
		}
		for i := range 300 {
			if err := b.Put(fmt.Appendf(nil, "evt-%05d", i), []byte(strings.Repeat("v", 300))); err != nil {
				return err
			}
		}
		return nil
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	clean := values(t, path, "events")

	ps, leaves := LeafPages(t, path, "events")
	if ps <= 0 || len(leaves) < 5 {
		t.Fatalf("page size %d, %d leaves; want a bucket of several leaves", ps, len(leaves))
	}
	for _, at := range []struct {
		name string
		off  func(id uint64) int
	}{
		{"middle value", func(id uint64) int { return MiddleValueOffset(t, path, ps, id) }},
		{"last value", func(id uint64) int { return LastValueEnd(t, path, ps, id) - 32 }},
	} {
		last := ""
		for _, id := range leaves {
			Overwrite(t, path, ps, id, at.off(id), Junk(32))
			var changed []string
			now := values(t, path, "events")
			if len(now) != len(clean) {
				t.Fatalf("%s of page %d: %d keys, want %d (a key was damaged)", at.name, id, len(now), len(clean))
			}
			for k, v := range now {
				if v != clean[k] {
					changed = append(changed, k)
					if !bytes.Contains([]byte(v), Junk(32)) {
						t.Errorf("%s of page %d: value of %s changed but does not hold the junk", at.name, id, k)
					}
					if at.name == "last value" && !strings.HasSuffix(v, string(Junk(32))) {
						t.Errorf("last value of page %d: the junk is not at the end of %s's value", id, k)
					}
					if at.name == "middle value" && v[len(v)/2-16:len(v)/2+16] != string(Junk(32)) {
						t.Errorf("middle value of page %d: the junk is not in the middle of %s's value", id, k)
					}
				}
			}
			if len(changed) != 1 {
				t.Fatalf("%s of page %d: values of %v changed, want exactly one", at.name, id, changed)
			}
			if changed[0] <= last {
				t.Errorf("%s of page %d changed %s, after %s on the leaf before: leaves out of key order", at.name, id, changed[0], last)
			}
			last = changed[0]
			clean[changed[0]] = now[changed[0]]
		}
	}
}

// Buffer keeps every write of concurrent writers.
func TestBufferConcurrentWrites(t *testing.T) {
	var b Buffer
	done := make(chan struct{})
	for range 4 {
		go func() {
			defer func() { done <- struct{}{} }()
			for range 100 {
				_, _ = b.Write([]byte("x"))
				_ = b.String()
			}
		}()
	}
	for range 4 {
		<-done
	}
	if got := b.String(); got != strings.Repeat("x", 400) {
		t.Errorf("buffer holds %d bytes, want 400", len(got))
	}
}
