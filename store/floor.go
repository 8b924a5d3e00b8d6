package store

import (
	"time"

	bolt "go.etcd.io/bbolt"
)

// Floor writes events in the store's layout with bbolt alone and does
// nothing else: per event its record under its ID, a due index key, a
// per-endpoint due index key and a changelog entry, with the store's bbolt options and fill percents, one
// durable transaction per Write. It is a baseline for benchmarks: what the
// store adds to it (checks, counters, encoding, the group committer) is
// the store's own cost, and the rest is what any implementation of this
// layout in one bbolt file pays. A Floor's file has no counters or last
// LSN, so it is not a store file to open afterwards.
type Floor struct {
	db  *bolt.DB
	lsn uint64
}

// FloorEvent is one event as a Floor writes it.
type FloorEvent struct {
	ID     []byte // the key of its record and, after the due time, of its due entry
	Record []byte // its value in the events bucket (EncodeRecord)
	Entry  []byte // its changelog entry (EncodeEntry)
	// Endpoint names its run of the per-endpoint due index ("" when not
	// set). The floor keeps no endpoint heads: one per endpoint and
	// transaction, not per event.
	Endpoint string
}

// OpenFloor creates a new file at path as Open creates a store file, and
// opens it with the bbolt options Open uses.
func OpenFloor(path string) (*Floor, error) {
	opts := Options{}.withDefaults()
	if err := create(path, opts); err != nil {
		return nil, err
	}
	db, err := bolt.Open(path, 0o600, boltOptions(opts))
	if err != nil {
		return nil, mapOpenErr(err, opts.LockTimeout)
	}
	return &Floor{db: db}, nil
}

// Write puts events in one transaction and returns once it is durable:
// four puts per event. Due times are the commit's time plus the event's
// LSN in nanoseconds, so that due keys append at the right edge of their
// tree whatever the IDs: the floor is the cheapest the layout gets.
func (f *Floor) Write(events []FloorEvent) error {
	return f.db.Update(func(tx *bolt.Tx) error {
		rec, due, log := tx.Bucket(bucketEvents), tx.Bucket(bucketDue), tx.Bucket(bucketChangelog)
		byEP := tx.Bucket(bucketDueByEndpoint)
		rec.FillPercent, due.FillPercent, log.FillPercent = appendFill, appendFill, appendFill
		byEP.FillPercent = dueByEndpointFill
		now := time.Now()
		for _, ev := range events {
			f.lsn++
			if err := rec.Put(ev.ID, ev.Record); err != nil {
				return err
			}
			at := now.Add(time.Duration(f.lsn))
			if err := due.Put(dueKey(at, string(ev.ID)), nil); err != nil {
				return err
			}
			if err := byEP.Put(epDueKey(nil, ev.Endpoint, at, string(ev.ID)), nil); err != nil {
				return err
			}
			if err := log.Put(u64(f.lsn), ev.Entry); err != nil {
				return err
			}
		}
		return nil
	})
}

// Close closes the file.
func (f *Floor) Close() error { return f.db.Close() }
