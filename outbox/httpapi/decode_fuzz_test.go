package httpapi

import (
	"bytes"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/outboxd/outbox/outbox"
)

// FuzzDecodeEvents: whatever the body, decodeEvents never panics; it either
// returns events that satisfy the limits, each with a destination or a
// valid topic (never both), none of whose texts was rewritten
// to U+FFFD, with their not-before times in UTC, or a 400/413 *apiError. (Methods and headers are Enqueue's to
// check.)
func FuzzDecodeEvents(f *testing.F) {
	for _, seed := range []string{
		`{"destination":"orders"}`,
		`{"id":"a","key":"k","destination":"orders","method":"PUT","headers":{"X-A":"1"},"payload":{"n":[1,2,3]}}`,
		`[{"destination":"a"},{"destination":"b","payload_base64":"AAEC"}]`,
		`[{"destination":"a"},7]`,
		`{"destination":"a","payload":null}`,
		`{"destination":"a","payload":1,"payload_base64":"AA=="}`,
		`{"destination":"a","headers":{"a b":"c"}}`,
		`  [ ]  `,
		`{"destination":"a"} {}`,
		`"x"`,
		`{"destination":"\u0000"}`,
		"{\"id\":\"k\xfe\",\"destination\":\"a\"}",
		`{"id":"k\ud800","destination":"a","headers":{"X":"\ud83d\ude00"}}`,
		`{"id":"a","ID":"b","destination":"a"}`,
		`[{"destination":"a","headers":{"X-A":"1","x-a":"2"}}]`,
		`{"destination":"a","payload":{"k":1,"k":2}}`,
		`{"destination":"a","deliver_at":"2026-01-02T15:04:05.5+02:00"}`,
		`[{"destination":"a","delay":"90s"},{"destination":"b","delay":"-1s"}]`,
		`{"destination":"a","delay":"2s","deliver_at":"2026-01-02T15:04:05Z"}`,
		`{"destination":"a","deliver_at":"tomorrow","delay":null}`,
		`{"destination":"a","delay":3}`,
		`{"topic":"order.paid","key":"k","payload":{}}`,
		`[{"topic":"order.paid"},{"destination":"a"}]`,
		`{"topic":"order.paid","destination":"a"}`,
		`{"topic":""}`,
		`{"topic":null,"destination":"a"}`,
		`{"topic":"order..paid"}`,
		`{"topic":"order.*"}`,
		`{"topic":"ab"}`,
	} {
		f.Add([]byte(seed))
	}
	lim := limits{maxBatch: 5, maxPayload: 64, maxID: 16, now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	f.Fuzz(func(t *testing.T, body []byte) {
		evs, err := decodeEvents(body, lim)
		if err != nil {
			var ae *apiError
			if !errors.As(err, &ae) || (ae.status != http.StatusBadRequest && ae.status != http.StatusRequestEntityTooLarge) || ae.msg == "" {
				t.Fatalf("error %v is not a 400/413 with a message", err)
			}
			return
		}
		if len(evs) == 0 || len(evs) > lim.maxBatch {
			t.Fatalf("%d events accepted, limit %d", len(evs), lim.maxBatch)
		}
		givenFFFD := bytes.Contains(body, []byte("\uFFFD")) || bytes.Contains(bytes.ToLower(body), []byte(`\ufffd`))
		for _, ev := range evs {
			if (ev.Destination == "") == (ev.Topic == "") || (ev.Topic != "" && outbox.ValidateTopic(ev.Topic) != nil) ||
				ev.Method == "" || len(ev.Payload) > lim.maxPayload || len(ev.ID) > lim.maxID {
				t.Fatalf("accepted an invalid event %+v", ev)
			}
			if !ev.DeliverAt.IsZero() && ev.DeliverAt.Location() != time.UTC {
				t.Fatalf("accepted a DeliverAt %v not in UTC", ev.DeliverAt)
			}
			texts := []string{ev.ID, ev.Key, ev.Destination, ev.Topic}
			for k, v := range ev.Headers {
				texts = append(texts, k, v)
			}
			for _, s := range texts {
				if !utf8.ValidString(s) || (strings.ContainsRune(s, utf8.RuneError) && !givenFFFD) {
					t.Fatalf("accepted %q, rewritten from invalid UTF-8", s)
				}
			}
		}
	})
}
