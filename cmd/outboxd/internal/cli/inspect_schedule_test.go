package cli

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/outboxd/outbox/store"
)

// inspect --id shows a scheduled event's not-before time, in the text, in
// the JSON and in the history's enqueue line.
func TestInspectEventShowsDeliverAt(t *testing.T) {
	at := time.Date(2031, 2, 3, 4, 5, 6, 0, time.UTC)
	ro := inspectFile(t, []*store.Record{{ID: "s", Destination: "orders", Method: "POST", DeliverAt: at}}, nil)

	var text bytes.Buffer
	if err := inspectEvent(&text, ro, "s", false); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"deliver at    2031-02-03T04:05:06.000Z", "to deliver at 2031-02-03T04:05:06.000Z"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("inspect --id s does not say %q:\n%s", want, text.String())
		}
	}
	var js bytes.Buffer
	if err := inspectEvent(&js, ro, "s", true); err != nil {
		t.Fatal(err)
	}
	var v struct {
		Event struct {
			DeliverAt     string `json:"deliver_at"`
			NextAttemptAt string `json:"next_attempt_at"`
		}
	}
	if err := json.Unmarshal(js.Bytes(), &v); err != nil || v.Event.DeliverAt != "2031-02-03T04:05:06Z" || v.Event.NextAttemptAt != v.Event.DeliverAt {
		t.Errorf("inspect --id s --json: %+v (%v)\n%s", v, err, js.String())
	}
}
