package kafka

import (
	"testing"

	"github.com/outboxd/outbox/outbox"
)

// KeyPartition names the partition the Producer sends an event with that
// key to, for printable and binary keys, so that a GET with ?key= goes to
// the member that holds the event; a key no record can carry names none.
func TestKeyPartitionIsWhereTheProducerSendsTheKey(t *testing.T) {
	m := newMapper(Config{Destination: "orders"}.WithDefaults())
	parts := []int{0, 1, 2, 3, 4, 5}
	seen := map[int]bool{}
	for _, key := range []string{"customer-1", "customer-2", "customer-3", "order 7", "é", "base64:AP8=", "x"} {
		ev := outbox.Event{ID: "id-" + key, Key: key, Destination: "orders", Payload: []byte(`{}`)}
		msg, err := m.record(0, &ev)
		if err != nil {
			t.Fatalf("key %q: %v", key, err)
		}
		want := KeyBalancer{}.Balance(msg, parts...)
		got, ok := KeyPartition(key, len(parts))
		if !ok || got != want {
			t.Errorf("KeyPartition(%q, 6) = %d, %v; the Producer sends it to %d", key, got, ok, want)
		}
		seen[got] = true
	}
	if len(seen) < 2 {
		t.Errorf("every key on one partition %v: the test tells nothing", seen)
	}
	for _, tc := range []struct {
		key   string
		parts int
	}{{"", 6}, {"base64:not base64", 6}, {"base64:aGVsbG8=", 6}, {"k", 0}} {
		if p, ok := KeyPartition(tc.key, tc.parts); ok {
			t.Errorf("KeyPartition(%q, %d) = %d, true; want none", tc.key, tc.parts, p)
		}
	}
}
