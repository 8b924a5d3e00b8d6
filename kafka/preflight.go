package kafka

import (
	"context"
	"errors"
	"fmt"

	"github.com/cenkalti/backoff/v4"
	kafkago "github.com/segmentio/kafka-go"

	"github.com/outboxd/outbox/kafka/internal/changelog"
	"github.com/outboxd/outbox/kafka/internal/retry"
)

// newBackoff is the package's retry backoff: from RetryBackoff doubling
// up to RetryBackoffMax, forever.
func newBackoff(cfg Config) *backoff.ExponentialBackOff {
	return retry.Backoff(cfg.RetryBackoff, cfg.RetryBackoffMax)
}

// preflight checks the group's topics and records the outcome for Health:
// the ingest topic must exist; the changelog topic is created compacted
// with the ingest topic's partition count when missing, and otherwise must
// have that count and be compacted. It returns the largest batch the
// changelog topic accepts. A topic that is there but unfit, or that the
// brokers refuse to create, is a *TopicError; other errors (brokers that
// cannot be reached) are worth retrying.
func (g *Group) preflight(ctx context.Context) (int, error) {
	maxBytes, err := g.checkTopics(ctx)
	g.mu.Lock()
	g.preflightErr = err
	g.mu.Unlock()
	return maxBytes, err
}

func (g *Group) checkTopics(ctx context.Context) (int, error) {
	cl := &kafkago.Client{Addr: kafkago.TCP(g.cfg.brokers()...), Transport: g.conns.transport, Timeout: g.cfg.DialTimeout}
	in, cl0 := g.cfg.Topic, g.cfg.ChangelogTopic
	md, err := cl.Metadata(ctx, &kafkago.MetadataRequest{Topics: []string{in, cl0}})
	if err != nil {
		return 0, fmt.Errorf("kafka: metadata of %s and %s: %w", in, cl0, err)
	}
	inParts, clParts := -1, -1
	for _, t := range md.Topics {
		switch {
		case t.Error != nil && !errors.Is(t.Error, kafkago.UnknownTopicOrPartition):
			return 0, fmt.Errorf("kafka: metadata of topic %s: %w", t.Name, t.Error)
		case t.Error != nil:
		case t.Name == in:
			inParts = len(t.Partitions)
		case t.Name == cl0:
			clParts = len(t.Partitions)
		}
	}
	if inParts <= 0 {
		return 0, fmt.Errorf("kafka: the ingest topic %s does not exist (yet)", in)
	}
	g.topicPartitions.Store(int32(inParts))
	if clParts < 0 {
		if err := g.createChangelog(ctx, cl, inParts); err != nil {
			return 0, err
		}
		clParts = inParts
	}
	if clParts != inParts {
		return 0, &TopicError{Topic: cl0, Partition: -1, Reason: fmt.Sprintf(
			"has %d partitions, the ingest topic %s has %d: a changelog topic must have the ingest topic's partition count "+
				"(store p ships to changelog partition p); delete it to have it created with %d, or give the group another changelog topic",
			clParts, in, inParts, inParts)}
	}
	return g.changelogLimits(ctx, cl)
}

func (g *Group) createChangelog(ctx context.Context, cl *kafkago.Client, partitions int) error {
	if err := createCompacted(ctx, cl, g.cfg.ChangelogTopic, partitions, g.cfg.ChangelogReplication); err != nil {
		return err
	}
	g.log.Info("kafka: created the changelog topic, compacted", "topic", g.cfg.ChangelogTopic, "partitions", partitions)
	return nil
}

// createCompacted creates a compacted topic of that many partitions and
// replicas, taking batches up to DefaultChangelogMaxBytes; a topic that
// exists already is no error. A refusal by the brokers is a *TopicError.
func createCompacted(ctx context.Context, cl *kafkago.Client, topic string, partitions, replication int) error {
	err := changelog.CreateCompacted(ctx, cl, topic, partitions, replication, DefaultChangelogMaxBytes)
	var ke kafkago.Error
	if errors.As(err, &ke) {
		return &TopicError{Topic: topic, Partition: -1, Reason: "the brokers refuse to create it: " + ke.Error()}
	}
	if err != nil {
		return fmt.Errorf("kafka: %w", err)
	}
	return nil
}

// changelogLimits checks that the changelog topic is compacted and returns
// the largest batch it accepts. Brokers that do not describe topic
// configurations are taken at their word.
func (g *Group) changelogLimits(ctx context.Context, cl *kafkago.Client) (int, error) {
	topic := g.cfg.ChangelogTopic
	lim, err := changelog.Describe(ctx, cl, topic, DefaultChangelogMaxBytes)
	if err != nil {
		g.log.Debug("kafka: describe changelog topic", "err", err)
		return lim.MaxBytes, nil
	}
	if !lim.Compacted {
		return 0, &TopicError{Topic: topic, Partition: -1, Reason: fmt.Sprintf(
			"is not compacted (cleanup.policy=%s): a changelog topic must be compacted, or restores replay its whole history "+
				"and, with deletion by time, lose the events still pending; set cleanup.policy=compact", lim.Policy)}
	}
	return lim.MaxBytes, nil
}
