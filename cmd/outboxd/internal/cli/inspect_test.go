package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/outboxd/outbox/outbox"
	"github.com/outboxd/outbox/store"
)

// inspect --id tells an event an operator deleted from a delivered one.
func TestInspectEventSaysDeletedOrDelivered(t *testing.T) {
	ro := inspectFile(t, []*store.Record{{ID: "gone", Destination: "orders", Method: "POST"}, {ID: "sent", Destination: "orders", Method: "POST"}},
		func(ctx context.Context, st *store.Store, recs []*store.Record) error {
			if err := st.Drop(ctx, "gone", "dropped by operator"); err != nil {
				return err
			}
			_, err := st.Apply(ctx, []store.Outcome{{Kind: store.OutcomeDelete, ID: "sent", Version: recs[1].Version}}, nil)
			return err
		})
	for id, want := range map[string]string{"gone": "deleted by an operator", "sent": "delivered"} {
		var text bytes.Buffer
		if err := inspectEvent(&text, ro, id, false); err != nil {
			t.Fatal(err)
		}
		if first, _, _ := strings.Cut(text.String(), "\n"); !strings.HasPrefix(first, "event "+id+": "+want) {
			t.Errorf("inspect --id %s: %q, want it to say %q", id, first, want)
		}
		var js bytes.Buffer
		if err := inspectEvent(&js, ro, id, true); err != nil {
			t.Fatal(err)
		}
		var v struct{ State string }
		if err := json.Unmarshal(js.Bytes(), &v); err != nil || !strings.HasPrefix(v.State, want) {
			t.Errorf("inspect --id %s --json: state %q (%v), want it to say %q", id, v.State, err, want)
		}
	}
}

// inspectFile stores recs in a new file, lets change (nil: none) change the
// store, closes it and opens the file read-only, as inspect does; the
// outbox is stopped at the test's end.
func inspectFile(t *testing.T, recs []*store.Record, change func(ctx context.Context, st *store.Store, recs []*store.Record) error) *outbox.Outbox {
	t.Helper()
	path := filepath.Join(t.TempDir(), "outbox.db")
	st, err := store.Open(path, store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Insert(t.Context(), recs); err != nil {
		t.Fatal(err)
	}
	if change != nil {
		if err := change(t.Context(), st, recs); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	return openReadOnly(t, path)
}

// openReadOnly opens the file at path read-only, as inspect does; the
// outbox is stopped at the test's end.
func openReadOnly(t *testing.T, path string) *outbox.Outbox {
	t.Helper()
	ro, err := outbox.Open(path, outbox.Config{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ro.Stop(context.Background()) })
	return ro
}
