package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"

	"github.com/outboxd/outbox/httpsink"
	"github.com/outboxd/outbox/outbox"
)

// Update is the outbox pattern: the application's own state and the event
// announcing its change commit in one transaction, or neither does. Here a
// user leaves a room: read the room, remove the user, write the room and
// enqueue its snapshot.
func ExampleOutbox_Update() {
	sink, err := httpsink.New(httpsink.Config{
		Endpoints: []httpsink.Endpoint{{Name: "rooms", URL: "https://rooms.example.com/state"}},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer sink.Close()
	dir, _ := os.MkdirTemp("", "outbox-example")
	defer os.RemoveAll(dir)
	o, err := outbox.Open(filepath.Join(dir, "outbox.db"), outbox.Config{Sink: sink})
	if err != nil {
		log.Fatal(err)
	}
	defer o.Stop(context.Background())
	ctx := context.Background()
	rooms := []byte("rooms")

	err = o.Update(ctx, func(tx *outbox.Tx) error {
		b, err := tx.CreateBucketIfNotExists(rooms)
		if err != nil {
			return err
		}
		return b.Put([]byte("room-7"), []byte("alice,bob"))
	})
	if err != nil {
		log.Fatal(err)
	}

	leave := func(user string) error {
		return o.Update(ctx, func(tx *outbox.Tx) error {
			b := tx.Bucket(rooms)
			var left []string
			for _, u := range strings.Split(string(b.Get([]byte("room-7"))), ",") {
				if u != user && u != "" {
					left = append(left, u)
				}
			}
			state := []byte(strings.Join(left, ","))
			if err := b.Put([]byte("room-7"), state); err != nil {
				return err
			}
			_, err := tx.Enqueue(outbox.Event{Key: "room-7", Destination: "rooms", Payload: state})
			return err // an error here (or a panic) stores neither the room nor the event
		})
	}
	for _, user := range []string{"bob", "alice"} {
		if err := leave(user); err != nil {
			log.Fatal(err)
		}
	}

	// The outbox's own buckets are not the application's.
	err = o.Update(ctx, func(tx *outbox.Tx) error {
		_, err := tx.CreateBucketIfNotExists([]byte("events"))
		return err
	})
	fmt.Println("events bucket refused:", errors.Is(err, outbox.ErrReservedBucket))
	fmt.Println("snapshots pending:", o.Stats().Pending)
	// Output:
	// events bucket refused: true
	// snapshots pending: 2
}

// View reads the application's buckets in a read-only transaction; it works
// on an outbox opened read-only as well.
func ExampleOutbox_View() {
	dir, _ := os.MkdirTemp("", "outbox-example")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "outbox.db")
	sink, err := httpsink.New(httpsink.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer sink.Close()
	o, err := outbox.Open(path, outbox.Config{Sink: sink})
	if err != nil {
		log.Fatal(err)
	}
	err = o.Update(context.Background(), func(tx *outbox.Tx) error {
		b, err := tx.CreateBucketIfNotExists([]byte("orders"))
		if err != nil {
			return err
		}
		return b.Put([]byte("order-42"), []byte("paid"))
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := o.Stop(context.Background()); err != nil {
		log.Fatal(err)
	}

	ro, err := outbox.Open(path, outbox.Config{ReadOnly: true})
	if err != nil {
		log.Fatal(err)
	}
	defer ro.Stop(context.Background())
	err = ro.View(context.Background(), func(tx *outbox.ViewTx) error {
		b := tx.Bucket([]byte("orders"))
		if b == nil {
			return errors.New("no orders yet")
		}
		fmt.Printf("order-42: %s\n", b.Get([]byte("order-42")))
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	// Output:
	// order-42: paid
}
