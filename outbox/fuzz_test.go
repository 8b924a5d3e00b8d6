package outbox_test

import (
	"bytes"
	"context"
	"errors"
	"maps"
	"testing"

	"github.com/outboxd/outbox/outbox"
)

// FuzzEnqueue feeds arbitrary caller input to Enqueue: it is stored and read
// back unchanged, or refused with a ValidationError; it never panics.
func FuzzEnqueue(f *testing.F) {
	f.Add("id-1", "key", "http://example.com/hook", "POST", "X-Tenant", "t1", []byte(`{"a":1}`))
	f.Add("", "", "http://example.com/a/b?c=d", "", "", "", []byte{})
	f.Add("a\x00b", "k\n", "ftp://x", "GET /", "Bad Name", "v\r\nX: y", []byte{0xff})
	f.Add("\u00e9\u00e9", "\xff", "http://[::1]:80/", "PATCH", "X-A", "\t ok", bytes.Repeat([]byte("x"), 100))
	cfg := testConfig(newWebSink())
	o, _ := open(f, cfg)
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, id, key, dest, method, hname, hval string, payload []byte) {
		ev := outbox.Event{ID: id, Key: key, Destination: dest, Method: method, Payload: payload}
		if hname != "" {
			ev.Headers = map[string]string{hname: hval}
		}
		ids, err := o.Enqueue(ctx, ev)
		if err != nil {
			var ve *outbox.ValidationError
			if errors.As(err, &ve) || errors.Is(err, outbox.ErrConflict) || errors.Is(err, outbox.ErrDeleted) {
				return // ErrDeleted: an ID deleted by an earlier input
			}
			t.Fatalf("Enqueue(%+v): unexpected error %v", ev, err)
		}
		got, err := o.Get(ctx, ids[0])
		if err != nil {
			t.Fatalf("Get(%q): %v", ids[0], err)
		}
		if got.State == outbox.StateDelivered {
			return // an ID seen and dropped before
		}
		wantMethod := method
		if wantMethod == "" {
			wantMethod = "POST"
		}
		if got.Key != key || got.Destination != dest || got.Method != wantMethod ||
			!bytes.Equal(got.Payload, payload) || (len(got.Headers) > 0 || len(ev.Headers) > 0) && !maps.Equal(got.Headers, ev.Headers) {
			t.Fatalf("stored %+v, enqueued %+v", got, ev)
		}
		if err := o.Delete(ctx, ids[0]); err != nil {
			t.Fatal(err)
		}
	})
}
