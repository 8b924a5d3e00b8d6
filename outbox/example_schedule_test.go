package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/outboxd/outbox/httpsink"
	"github.com/outboxd/outbox/outbox"
)

// An event with a DeliverAt is stored pending and first attempted at that
// time: here a reminder an hour from now.
func ExampleEvent_deliverAt() {
	sink, err := httpsink.New(httpsink.Config{
		Endpoints: []httpsink.Endpoint{{Name: "reminders", URL: "https://reminders.example.com/hook"}},
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

	at := time.Now().Add(time.Hour)
	if _, err := o.Enqueue(context.Background(), outbox.Event{
		ID: "reminder-7", Destination: "reminders", Payload: []byte(`{"user":7}`), DeliverAt: at,
	}); err != nil {
		log.Fatal(err)
	}
	ev, err := o.Get(context.Background(), "reminder-7")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(ev.State, ev.NextAttemptAt.Equal(at.UTC().Round(0)))

	// Past the horizon (Config.MaxSchedule, 30 days) it is refused.
	_, err = o.Enqueue(context.Background(), outbox.Event{
		Destination: "reminders", DeliverAt: time.Now().Add(365 * 24 * time.Hour),
	})
	var ve *outbox.ValidationError
	if errors.As(err, &ve) {
		fmt.Println("refused:", ve.Field)
	}
	// Output:
	// pending true
	// refused: deliver_at
}
