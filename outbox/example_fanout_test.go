package outbox_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"

	"github.com/outboxd/outbox/httpsink"
	"github.com/outboxd/outbox/outbox"
)

// An event published on a topic reaches every endpoint subscribed to it,
// each delivery with the event's ID as webhook-id; each endpoint's delivery
// has its own state.
func Example_topics() {
	received := make(chan string, 8) // room for redeliveries (at-least-once)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		received <- r.URL.Path + " " + r.Header.Get("webhook-id")
	}))
	defer receiver.Close()

	sink, err := httpsink.New(httpsink.Config{Endpoints: []httpsink.Endpoint{
		{Name: "billing", URL: receiver.URL + "/billing", AllowPrivate: true},
		{Name: "shipping", URL: receiver.URL + "/shipping", AllowPrivate: true},
		{Name: "audit", URL: receiver.URL + "/audit", AllowPrivate: true},
	}})
	if err != nil {
		log.Fatal(err)
	}
	defer sink.Close()
	dir, _ := os.MkdirTemp("", "outbox-example")
	defer os.RemoveAll(dir)
	o, err := outbox.Open(filepath.Join(dir, "outbox.db"), outbox.Config{
		Sink: sink,
		Subscriptions: []outbox.Subscription{
			{Endpoint: "billing", Topics: []string{"order.paid"}},
			{Endpoint: "shipping", Topics: []string{"order.*"}, Headers: map[string]string{"X-Region": "eu"}},
			{Endpoint: "audit", Topics: []string{"*"}},
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer o.Stop(context.Background())
	ctx := context.Background()
	if _, err := o.Enqueue(ctx, outbox.Event{ID: "order-7-paid", Topic: "order.paid",
		Headers: map[string]string{"X-Region": "us"}, Payload: []byte(`{"order":7}`)}); err != nil {
		log.Fatal(err)
	}
	ev, err := o.Get(ctx, "order-7-paid")
	if err != nil {
		log.Fatal(err)
	}
	for _, d := range ev.DeliveryStates {
		fmt.Println(d.Endpoint, d.State)
	}

	if err := o.Start(); err != nil {
		log.Fatal(err)
	}
	got := []string{<-received, <-received}
	sort.Strings(got)
	fmt.Println(got)
	// Output:
	// audit pending
	// billing pending
	// [/audit order-7-paid /billing order-7-paid]
}
