package httpsink_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/outboxd/outbox/httpsink"
	"github.com/outboxd/outbox/outbox"
)

const (
	logSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	logToken  = "Bearer tok-0123456789abcdef"
)

// A receiver that echoes the request's credentials gets them cut out of
// the attempt log's excerpt and headers, also where the excerpt's end
// splits one; without LogResponse a success keeps no body, as before.
func TestAttemptLogRedactsSecrets(t *testing.T) {
	var pad int
	rc := newReceiver(t, func(w http.ResponseWriter, r *http.Request) {
		echo := r.Header.Get("Authorization") + " | " + r.Header.Get("Webhook-Signature") + " | " + r.Header.Get("X-Api-Key")
		w.Header().Set("Location", "/x?token="+strings.TrimPrefix(logToken, "Bearer "))
		fmt.Fprintf(w, "%s%s", strings.Repeat(".", pad), echo)
	})
	s := newSink(t, httpsink.Config{Endpoints: []httpsink.Endpoint{{Name: "e", URL: rc.URL, AllowPrivate: true,
		Secrets: []string{logSecret}, Headers: map[string]string{"Authorization": logToken}}}})
	for _, p := range []int{0, 10} {
		pad = p
		d := &outbox.Delivery{ID: "evt-1", Destination: "e", Method: "POST", Attempt: 1,
			Headers: map[string]string{"X-Api-Key": "event-key-0123456789"}, LogResponse: true, ExcerptBytes: 20}
		res := s.Deliver(context.Background(), d)
		all := res.Body + fmt.Sprint(res.Header)
		for _, secret := range []string{"tok-0123", "event-key", strings.TrimPrefix(logSecret, "whsec_")[:8], "v1,"} {
			if strings.Contains(all, secret) {
				t.Errorf("pad %d: attempt log holds %q: body %q, headers %v", p, secret, res.Body, res.Header)
			}
		}
		if res.Action != outbox.ActionSuccess || len(res.Body) == 0 || res.Header["Location"] == "" {
			t.Errorf("pad %d: %+v", p, res)
		}
	}
	res := deliver(s, "e", "")
	if res.Body != "" || res.Header != nil {
		t.Errorf("without LogResponse: body %q, headers %v; want none for a success", res.Body, res.Header)
	}
}
