package httpapi

import (
	"errors"
	"net/http"
	"testing"
)

// FuzzDecodeEvents: whatever the body, decodeEvents never panics; it either
// returns events that satisfy the limits or a 400/413 *apiError.
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
	} {
		f.Add([]byte(seed))
	}
	lim := limits{maxBatch: 5, maxPayload: 64, maxID: 16}
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
		for _, ev := range evs {
			if ev.Destination == "" || !isToken(ev.Method) || len(ev.Payload) > lim.maxPayload || len(ev.ID) > lim.maxID {
				t.Fatalf("accepted an invalid event %+v", ev)
			}
		}
	})
}
