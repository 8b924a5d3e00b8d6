package changelog

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	kafkago "github.com/segmentio/kafka-go"
)

// Limits is what a changelog topic's configuration says.
type Limits struct {
	// MaxBytes is the largest batch it accepts, at most the maxBytes
	// Describe was given.
	MaxBytes int
	// Policy is its cleanup.policy ("" when not described).
	Policy string
	// Compacted reports whether the policy compacts (true when not
	// described).
	Compacted bool
}

// Describe reads a changelog topic's cleanup.policy and max.message.bytes,
// capped at maxBytes. On an error it returns the defaults (1 MiB,
// compacted): brokers that do not describe topics are taken at their word.
func Describe(ctx context.Context, cl *kafkago.Client, topic string, maxBytes int) (Limits, error) {
	lim := Limits{MaxBytes: 1 << 20, Compacted: true}
	dc, err := cl.DescribeConfigs(ctx, &kafkago.DescribeConfigsRequest{Resources: []kafkago.DescribeConfigRequestResource{{
		ResourceType: kafkago.ResourceTypeTopic, ResourceName: topic,
		ConfigNames: []string{"cleanup.policy", "max.message.bytes"},
	}}})
	if err != nil {
		return lim, err
	}
	for _, res := range dc.Resources {
		for _, ce := range res.ConfigEntries {
			switch ce.ConfigName {
			case "cleanup.policy":
				lim.Policy = ce.ConfigValue
				lim.Compacted = strings.Contains(ce.ConfigValue, "compact")
			case "max.message.bytes":
				if n, err := strconv.Atoi(ce.ConfigValue); err == nil && n > 0 {
					lim.MaxBytes = min(n, maxBytes)
				}
			}
		}
	}
	return lim, nil
}

// CreateCompacted creates a compacted topic of that many partitions and
// replicas whose records may be up to maxBytes. A topic that already
// exists is not an error; the caller checks its configuration with
// Describe.
func CreateCompacted(ctx context.Context, cl *kafkago.Client, topic string, partitions, replication, maxBytes int) error {
	resp, err := cl.CreateTopics(ctx, &kafkago.CreateTopicsRequest{Topics: []kafkago.TopicConfig{{
		Topic:             topic,
		NumPartitions:     partitions,
		ReplicationFactor: replication,
		ConfigEntries: []kafkago.ConfigEntry{
			{ConfigName: "cleanup.policy", ConfigValue: "compact"},
			{ConfigName: "max.message.bytes", ConfigValue: strconv.Itoa(maxBytes)},
		},
	}}})
	if err != nil {
		return fmt.Errorf("create topic %s: %w", topic, err)
	}
	if err := resp.Errors[topic]; err != nil && !errors.Is(err, kafkago.TopicAlreadyExists) {
		return fmt.Errorf("create topic %s: %w", topic, err)
	}
	return nil
}
