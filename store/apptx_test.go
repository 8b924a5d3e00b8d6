package store

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
)

var errApp = errors.New("application refused")

// Application transactions that fail after writing share commits with other
// writes: each failing one leaves nothing, each other one is stored whole,
// the other callers' functions run once (UpsertKey says so), and only
// AppUpdate's functions run again.
func TestAppUpdateFailuresInSharedCommits(t *testing.T) {
	s := openTest(t, Options{})
	ctx := t.Context()
	var upsertCalls atomic.Int64
	var wg sync.WaitGroup
	const n = 48
	for i := range n {
		wg.Go(func() {
			id := fmt.Sprintf("a-%02d", i)
			err := s.AppUpdate(ctx, func(tx *AppTx) error {
				b, err := tx.CreateBucketIfNotExists([]byte("app"))
				if err != nil {
					return err
				}
				if err := b.Put([]byte(id), []byte("x")); err != nil {
					return err
				}
				if _, err := tx.InsertWith([]*Record{rec(id, "p")}, InsertOptions{}); err != nil {
					return err
				}
				if i%2 == 1 {
					return errApp
				}
				return nil
			})
			if want := map[bool]error{true: errApp, false: nil}[i%2 == 1]; err != want {
				t.Errorf("%s: %v, want %v", id, err, want)
			}
		})
		wg.Go(func() {
			_, err := s.UpsertKey(ctx, fmt.Sprintf("k-%02d", i), func(*Record) (*Record, error) {
				upsertCalls.Add(1)
				return rec(fmt.Sprintf("u-%02d", i), "p"), nil
			})
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if got := upsertCalls.Load(); got != n {
		t.Errorf("UpsertKey functions ran %d times for %d calls", got, n)
	}
	for i := range n {
		id := fmt.Sprintf("a-%02d", i)
		var wrote bool
		if err := s.AppView(func(tx *AppTx) error {
			wrote = tx.Bucket([]byte("app")).Get([]byte(id)) != nil
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		_, _, err := s.Get(id)
		stored := err == nil
		if good := i%2 == 0; wrote != good || stored != good {
			t.Errorf("%s: write %v, record %v, want both %v", id, wrote, stored, good)
		}
	}
	if st, _ := s.Stats(); st.Pending != n+n/2 {
		t.Errorf("pending %d, want %d", st.Pending, n+n/2)
	}
	if cs := s.CommitStats(); cs.Failed != 0 {
		t.Errorf("%d commits failed: a failing application function must fail only itself", cs.Failed)
	}
}

// The store's own buckets are refused, and a read-only transaction inserts
// nothing.
func TestAppTxRefusesTheStoresBuckets(t *testing.T) {
	s := openTest(t, Options{})
	for _, name := range append(allBuckets, bucketAttempts) {
		err := s.AppUpdate(t.Context(), func(tx *AppTx) error {
			_ = tx.Bucket(name)
			return nil
		})
		if !errors.Is(err, ErrReservedBucket) {
			t.Errorf("Bucket(%q): %v", name, err)
		}
	}
	err := s.AppView(func(tx *AppTx) error {
		_, err := tx.InsertWith([]*Record{rec("r", "p")}, InsertOptions{})
		return err
	})
	if !errors.Is(err, ErrReadOnly) {
		t.Fatalf("insert in a view: %v", err)
	}
}
