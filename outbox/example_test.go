package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"time"

	"github.com/outboxd/outbox/httpsink"
	"github.com/outboxd/outbox/outbox"
)

// Open an outbox, enqueue an event in the request path, and let the outbox
// deliver it to a webhook receiver.
func Example() {
	received := make(chan string, 1)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		select { // a redelivery (at-least-once) is not printed twice
		case received <- fmt.Sprintf("%s %s %s (Idempotency-Key %s)", r.Method, r.URL.Path, body, r.Header.Get("Idempotency-Key")):
		default:
		}
	}))
	defer receiver.Close()

	sink, err := httpsink.New(httpsink.Config{
		Endpoints: []httpsink.Endpoint{{Name: "orders", URL: receiver.URL + "/hooks/orders", AllowPrivate: true}},
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
	if err := o.Start(); err != nil {
		log.Fatal(err)
	}

	// Durable when Enqueue returns: the event survives a crash from here on.
	ids, err := o.Enqueue(context.Background(), outbox.Event{
		ID:          "order-42-created",
		Destination: "orders",
		Payload:     []byte(`{"order":42}`),
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("enqueued", ids[0])
	fmt.Println("received", <-received)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := o.Stop(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// enqueued order-42-created
	// received POST /hooks/orders {"order":42} (Idempotency-Key order-42-created)
}

// Upsert coalesces the pending state of a key: the latest state wins and no
// concurrent update is lost.
func ExampleOutbox_Upsert() {
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
	for _, members := range []string{"alice,bob", "alice", ""} {
		ev, err := o.Upsert(ctx, "room-7", func(cur *outbox.Event) (outbox.Event, error) {
			if cur == nil {
				return outbox.Event{Destination: "rooms", Payload: []byte(members)}, nil
			}
			next := *cur
			next.Payload = []byte(members)
			return next, nil
		})
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("room-7 pending state: %q\n", ev.Payload)
	}
	fmt.Println("pending events:", o.Stats().Pending)
	// Output:
	// room-7 pending state: "alice,bob"
	// room-7 pending state: "alice"
	// room-7 pending state: ""
	// pending events: 1
}

// A validation error names the event and the field.
func ExampleValidationError() {
	sink, _ := httpsink.New(httpsink.Config{})
	defer sink.Close()
	dir, _ := os.MkdirTemp("", "outbox-example")
	defer os.RemoveAll(dir)
	o, err := outbox.Open(filepath.Join(dir, "outbox.db"), outbox.Config{Sink: sink})
	if err != nil {
		log.Fatal(err)
	}
	defer o.Stop(context.Background())

	_, err = o.Enqueue(context.Background(), outbox.Event{Destination: "nowhere"})
	fmt.Println(err != nil)
	var ve *outbox.ValidationError
	if errors.As(err, &ve) {
		fmt.Println(ve.Index, ve.Field)
	}
	// Output:
	// true
	// 0 destination
}
