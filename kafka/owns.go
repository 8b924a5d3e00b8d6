package kafka

import (
	"slices"

	kafkago "github.com/segmentio/kafka-go"
)

// OwnsKey reports whether this instance owns, in the current generation,
// the partition of Config.Topic that a record keyed by key goes to
// (see keyPartition). The members of a group that ask it of the same key agree
// on one owner while the group is stable: outboxd has the owner of an
// endpoint name's partition send the probes of that endpoint's breaker
// (outbox.SharedEndpointsConfig.Probes). It is false before the topic's
// partition count is known and while no partition is assigned.
func (g *Group) OwnsKey(key string) bool {
	n := int(g.topicPartitions.Load())
	if n <= 0 {
		return false
	}
	return slices.Contains(g.in.partitions(), keyPartition(key, n))
}

// keyPartition returns the partition, of a topic with n partitions (n >=
// 1), that a record keyed by key goes to: the murmur2 hash of the key's
// bytes modulo n, as KeyBalancer and Kafka's default partitioner place it.
func keyPartition(key string, n int) int {
	parts := make([]int, n)
	for i := range parts {
		parts[i] = i
	}
	return kafkago.Murmur2Balancer{Consistent: true}.Balance(kafkago.Message{Key: []byte(key)}, parts...)
}
