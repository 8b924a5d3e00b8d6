package outbox_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/outboxd/outbox/httpsink"
	"github.com/outboxd/outbox/outbox"
)

// Read the attempt log of an event whose receiver answered "not yet" (404)
// before it took it.
func ExampleOutbox_Attempts() {
	var calls atomic.Int32
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			http.Error(w, "no such order yet", http.StatusNotFound)
			return
		}
		fmt.Fprint(w, "stored")
	}))
	defer receiver.Close()
	sink, err := httpsink.New(httpsink.Config{
		Endpoints: []httpsink.Endpoint{{Name: "orders", URL: receiver.URL, AllowPrivate: true}},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer sink.Close()
	dir, _ := os.MkdirTemp("", "outbox-example")
	defer os.RemoveAll(dir)
	delivered := make(chan struct{})
	cfg := outbox.Config{Sink: sink, ParkInterval: 10 * time.Millisecond}
	cfg.Hooks.OnDelivery = func(d outbox.DeliveryInfo) { // after the outcome's commit
		if d.Action == outbox.ActionSuccess {
			close(delivered)
		}
	}
	o, err := outbox.Open(filepath.Join(dir, "outbox.db"), cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer o.Stop(context.Background())
	if err := o.Start(); err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	if _, err := o.Enqueue(ctx, outbox.Event{ID: "order-7", Destination: "orders"}); err != nil {
		log.Fatal(err)
	}
	<-delivered
	attempts, err := o.Attempts(ctx, "order-7")
	if err != nil {
		log.Fatal(err)
	}
	for _, a := range attempts {
		fmt.Printf("#%d %s %d %q\n", a.Seq, a.Action, a.Status, a.Body)
	}
	// Output:
	// #1 park 404 "no such order yet\n"
	// #2 success 200 "stored"
}
