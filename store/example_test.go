package store_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/outboxd/outbox/store"
)

// A punctuation's round trip: enqueue durably, take a snapshot of what is
// due, deliver (not shown), and commit the outcomes by compare-and-set on the
// versions that were delivered.
func Example() {
	dir, err := os.MkdirTemp("", "store-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	s, err := store.Open(filepath.Join(dir, "outbox.db"), store.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()

	now := time.Now()
	recs := []*store.Record{
		{ID: "evt-1", Destination: "orders", Method: "POST", Payload: []byte(`{"id":1}`), NextAttemptAt: now},
		{ID: "evt-2", Destination: "orders", Method: "POST", Payload: []byte(`{"id":2}`), NextAttemptAt: now},
	}
	if _, err := s.Insert(ctx, recs); err != nil { // committed and fsynced on return
		log.Fatal(err)
	}

	due, err := s.Due(store.DueQuery{Now: now, Limit: 100})
	if err != nil {
		log.Fatal(err)
	}
	// ... deliver each record with no transaction open; evt-1 succeeded,
	// evt-2 answered 503 ...
	res, err := s.Apply(ctx, []store.Outcome{
		{Kind: store.OutcomeDelete, ID: due[0].ID, Version: due[0].Version},
		{Kind: store.OutcomeReschedule, ID: due[1].ID, Version: due[1].Version,
			Attempts: 1, Deliveries: 1, NextAttemptAt: now.Add(time.Minute), LastStatus: 503},
	}, nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res)

	_, state, _ := s.Get("evt-1")
	fmt.Println("evt-1:", state)
	st, _ := s.Stats()
	fmt.Println("pending:", st.Pending, "tombstones:", st.Tombstones, "changelog:", st.ChangelogEntries)
	// Output:
	// [applied applied]
	// evt-1: delivered
	// pending: 1 tombstones: 1 changelog: 4
}

// Update is a read-modify-write inside the serialized write transaction:
// concurrent updates of one record never overwrite each other.
func ExampleStore_Update() {
	dir, _ := os.MkdirTemp("", "store-example-")
	defer os.RemoveAll(dir)
	s, err := store.Open(filepath.Join(dir, "outbox.db"), store.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if _, err := s.Insert(ctx, []*store.Record{{ID: "room-1", Destination: "rooms", Payload: []byte("ann,bob")}}); err != nil {
		log.Fatal(err)
	}
	r, err := s.Update(ctx, "room-1", func(r *store.Record) error {
		r.Payload = []byte("bob") // ann left
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s version %d\n", r.Payload, r.Version)
	// Output: bob version 2
}

// The changelog is the ordered history of the store; Restore rebuilds a
// store from it.
func ExampleStore_Changelog() {
	dir, _ := os.MkdirTemp("", "store-example-")
	defer os.RemoveAll(dir)
	s, err := store.Open(filepath.Join(dir, "a.db"), store.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	rec := &store.Record{ID: "evt-1", Destination: "orders"}
	if _, err := s.Insert(ctx, []*store.Record{rec}); err != nil {
		log.Fatal(err)
	}
	if _, err := s.Apply(ctx, []store.Outcome{{Kind: store.OutcomeDelete, ID: rec.ID, Version: rec.Version}}, nil); err != nil {
		log.Fatal(err)
	}
	entries, _ := s.Changelog(0, 100)
	for _, e := range entries {
		fmt.Println(e.LSN, e.Op, e.ID, e.Reason, e.Record != nil)
	}

	b, err := store.Open(filepath.Join(dir, "b.db"), store.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	if err := b.Restore(ctx, entries); err != nil {
		log.Fatal(err)
	}
	_, state, _ := b.Get("evt-1")
	fmt.Println("restored:", state)
	// Output:
	// 1 enqueue evt-1  true
	// 2 delete evt-1 delivered false
	// restored: delivered
}
