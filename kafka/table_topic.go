package kafka

import (
	"context"
	"errors"
	"fmt"

	kafkago "github.com/segmentio/kafka-go"

	"github.com/outboxd/outbox/kafka/internal/changelog"
)

// ensureTopic creates the table's topic when it is missing and checks it
// as the changelog topic is checked: compacted, and here one partition.
func (t *Table) ensureTopic(ctx context.Context) error {
	md, err := t.client.Metadata(ctx, &kafkago.MetadataRequest{Topics: []string{t.topic}})
	if err != nil {
		return fmt.Errorf("kafka: metadata of table topic %s: %w", t.topic, err)
	}
	parts := -1
	for _, tp := range md.Topics {
		switch {
		case tp.Name != t.topic:
		case tp.Error != nil && !errors.Is(tp.Error, kafkago.UnknownTopicOrPartition):
			return fmt.Errorf("kafka: metadata of table topic %s: %w", t.topic, tp.Error)
		case tp.Error == nil:
			parts = len(tp.Partitions)
		}
	}
	if parts < 0 {
		if err := t.createTopic(ctx); err != nil {
			return err
		}
		parts = 1
	}
	if parts != 1 {
		return &TopicError{Topic: t.topic, Partition: -1, Reason: fmt.Sprintf(
			"has %d partitions: a table topic must have one, so that every member applies its records in one order; "+
				"delete it to have it created with one, or name another with endpoints_topic", parts)}
	}
	lim, err := changelog.Describe(ctx, t.client, t.topic, DefaultChangelogMaxBytes)
	if err != nil {
		t.log.Debug("kafka: describe table topic", "err", err)
		return nil
	}
	if !lim.Compacted {
		return &TopicError{Topic: t.topic, Partition: -1, Reason: fmt.Sprintf(
			"is not compacted (cleanup.policy=%s): a table topic must be compacted, or deletion by time loses its records; "+
				"set cleanup.policy=compact", lim.Policy)}
	}
	return nil
}

// createTopic creates the table's topic: compacted, one partition,
// replicated as the changelog topic is.
func (t *Table) createTopic(ctx context.Context) error {
	if err := createCompacted(ctx, t.client, t.topic, 1, t.cfg.ChangelogReplication); err != nil {
		return err
	}
	t.log.Info("kafka: created the table topic, compacted", "topic", t.topic)
	return nil
}

// endOffset returns the end offset of the table's partition now.
func (t *Table) endOffset(ctx context.Context) (int64, error) {
	lo, err := t.client.ListOffsets(ctx, &kafkago.ListOffsetsRequest{Topics: map[string][]kafkago.OffsetRequest{
		t.topic: {kafkago.LastOffsetOf(0)}}})
	if err != nil {
		return 0, fmt.Errorf("kafka: end offset of table topic %s: %w", t.topic, err)
	}
	for _, po := range lo.Topics[t.topic] {
		if po.Partition == 0 {
			if po.Error != nil {
				return 0, fmt.Errorf("kafka: end offset of table topic %s: %w", t.topic, po.Error)
			}
			return po.LastOffset, nil
		}
	}
	return 0, fmt.Errorf("kafka: no end offset for table topic %s", t.topic)
}
