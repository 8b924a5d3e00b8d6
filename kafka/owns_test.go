package kafka

import (
	"strconv"
	"testing"

	kafkago "github.com/segmentio/kafka-go"
)

// The partition an endpoint name hashes to is the one a record keyed by
// that name is produced to, and OwnsKey is true on the instance that owns
// it only: the members of a group agree on one probe owner per endpoint.
func TestOwnsKeyFollowsTheProducersPartitioner(t *testing.T) {
	const n = 6
	parts := []int{0, 1, 2, 3, 4, 5}
	members := [][]int{{0, 3}, {1, 4}, {2, 5}}
	groups := make([]*Group, len(members))
	for i, owned := range members {
		groups[i] = &Group{in: &ingest{current: owned}}
		groups[i].topicPartitions.Store(n)
	}
	for i := range 200 {
		key := "endpoint-" + strconv.Itoa(i)
		want := KeyBalancer{}.Balance(kafkago.Message{Key: []byte(key)}, parts...)
		if got := keyPartition(key, n); got != want {
			t.Fatalf("keyPartition(%q) = %d; the producer puts it on %d", key, got, want)
		}
		owners := 0
		for _, g := range groups {
			if g.OwnsKey(key) {
				owners++
			}
		}
		if owners != 1 {
			t.Fatalf("%q has %d owners; want one", key, owners)
		}
	}
	if (&Group{in: &ingest{current: parts}}).OwnsKey("orders") {
		t.Error("OwnsKey before the partition count is known: true; want false")
	}
}
