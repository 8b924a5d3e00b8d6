package layoutfloor

import (
	"encoding/binary"
	"time"

	bolt "go.etcd.io/bbolt"
)

var (
	bucketEvents    = []byte("events")
	bucketDue       = []byte("due")
	bucketChangelog = []byte("changelog")
)

// File is a bbolt file written in the store's layout.
type File struct {
	db  *bolt.DB
	lsn uint64
}

// Event is one event as the floor writes it.
type Event struct {
	ID     []byte // the key of its record and, after the due time, of its due entry
	Record []byte // its value in the events bucket
	Entry  []byte // its changelog entry
}

// Open creates or opens the file at path with the bbolt options of the
// store's new files (no freelist sync, map freelist, 16 KiB pages, 1 GiB
// initial memory map).
func Open(path string) (*File, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{NoFreelistSync: true, FreelistType: bolt.FreelistMapType,
		PageSize: 16 << 10, InitialMmapSize: 1 << 30})
	if err != nil {
		return nil, err
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, name := range [][]byte{bucketEvents, bucketDue, bucketChangelog} {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, err
	}
	return &File{db: db}, nil
}

// Write puts events in one transaction and returns once it is durable:
// three puts per event. Due times are the commit's time plus the event's
// LSN in nanoseconds, so that due keys append at the right edge of their
// tree whatever the IDs: the floor is the cheapest the layout gets.
func (f *File) Write(events []Event) error {
	return f.db.Update(func(tx *bolt.Tx) error {
		rec, due, log := tx.Bucket(bucketEvents), tx.Bucket(bucketDue), tx.Bucket(bucketChangelog)
		rec.FillPercent, due.FillPercent, log.FillPercent = 1, 1, 1
		now := uint64(time.Now().UnixNano())
		for _, ev := range events {
			f.lsn++
			if err := rec.Put(ev.ID, ev.Record); err != nil {
				return err
			}
			if err := due.Put(append(binary.BigEndian.AppendUint64(nil, now+f.lsn), ev.ID...), nil); err != nil {
				return err
			}
			if err := log.Put(binary.BigEndian.AppendUint64(nil, f.lsn), ev.Entry); err != nil {
				return err
			}
		}
		return nil
	})
}

// Close closes the file.
func (f *File) Close() error { return f.db.Close() }
