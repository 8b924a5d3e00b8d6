package httpsink_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

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

// An endpoint added to a running sink, then given a new secret while the
// old one keeps signing for a grace period: receivers holding either
// secret verify the deliveries until the grace ends.
func ExampleSink_PutEndpoint() {
	const oldSecret, newSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_c2VjcmV0LXR3by0zMi1ieXRlcy1sb25nLXh5eno="
	oldV, _ := httpsink.NewVerifier([]string{oldSecret}, 0)
	newV, _ := httpsink.NewVerifier([]string{newSecret}, 0)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		fmt.Println("old secret verifies:", oldV.Verify(r.Header, body, time.Now()) == nil,
			"new secret verifies:", newV.Verify(r.Header, body, time.Now()) == nil)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer receiver.Close()

	sink, err := httpsink.New(httpsink.Config{AllowPrivateNetworks: true}) // the test receiver is on loopback
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sink.Close()
	deliver := func() {
		sink.Deliver(context.Background(), &outbox.Delivery{ID: "evt_1", Destination: "billing", Payload: []byte(`{}`)})
	}

	err = sink.PutEndpoint(httpsink.Endpoint{Name: "billing", URL: receiver.URL, Secrets: []string{oldSecret}})
	fmt.Println("added:", err)
	deliver()

	// Rotate: the new secret signs from now on, the old one for a day more.
	err = sink.PutEndpoint(httpsink.Endpoint{Name: "billing", URL: receiver.URL, Secrets: []string{newSecret},
		RetiringSecrets: []httpsink.RetiringSecret{{Secret: oldSecret, Until: time.Now().Add(24 * time.Hour)}}})
	fmt.Println("rotated:", err)
	deliver()

	fmt.Println("removed:", sink.RemoveEndpoint("billing"))
	// Output:
	// added: <nil>
	// old secret verifies: true new secret verifies: false
	// rotated: <nil>
	// old secret verifies: true new secret verifies: true
	// removed: true
}
