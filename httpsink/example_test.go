package httpsink_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/outboxd/outbox/httpsink"
	"github.com/outboxd/outbox/outbox"
)

// A sink with one signed endpoint. In a service, the sink goes into the
// outbox's Config.Sink and the outbox calls Deliver; here it is called
// directly.
func Example() {
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Println("received", r.Method, r.URL.Path, r.Header.Get("webhook-id"), r.Header.Get("webhook-signature") != "")
		w.WriteHeader(http.StatusNoContent)
	}))
	defer receiver.Close()

	sink, err := httpsink.New(httpsink.Config{
		Endpoints: []httpsink.Endpoint{{
			Name:         "orders",
			URL:          receiver.URL + "/hooks/orders",
			Secrets:      []string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"},
			AllowPrivate: true, // the test receiver listens on loopback
		}},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sink.Close()

	endpoint, err := sink.ResolveEndpoint("orders")
	fmt.Println("endpoint", endpoint, err)
	_, err = sink.ResolveEndpoint("https://example.com/hook")
	fmt.Println(err)

	res := sink.Deliver(context.Background(), &outbox.Delivery{
		ID:          "evt_01J9",
		Destination: "orders",
		Endpoint:    endpoint,
		Method:      http.MethodPost,
		Payload:     []byte(`{"order":42,"status":"paid"}`),
		Attempt:     1,
	})
	fmt.Println(res.Action, res.Status, res.Err)
	// Output:
	// endpoint orders <nil>
	// httpsink: raw URL destinations are not allowed: "https://example.com/hook": name a configured endpoint, or enable raw URLs
	// received POST /hooks/orders evt_01J9 true
	// success 204 <nil>
}

// Overriding rows of the status policy table, as an operator would in the
// sidecar's configuration.
func ExampleParsePolicy() {
	p, err := httpsink.ParsePolicy("404=dead", "5xx=throttle", "error=throttle")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(p.Action(404), p.Action(410), p.Action(501), p.Action(503), p.ErrorAction())

	_, err = httpsink.ParsePolicy("404=later")
	fmt.Println(err)
	// Output:
	// dead disable throttle retry throttle
	// httpsink: invalid policy rule "404=later": unknown action "later" (want success, retry, park, throttle, disable or dead)
}
