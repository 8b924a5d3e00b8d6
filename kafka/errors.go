package kafka

import (
	"errors"
	"fmt"

	"github.com/outboxd/outbox/kafka/internal/changelog"
)

// Sentinel errors of the package. Test for them with errors.Is; returned
// errors wrap them with the details.
var (
	// ErrInvalidConfig is matched by every *ConfigError.
	ErrInvalidConfig = errors.New("kafka: invalid config")
	// ErrNotEmpty is returned by Restore when the target database already
	// holds data: a restore only ever builds a new database.
	ErrNotEmpty = errors.New("kafka: restore target is not a new database")
	// ErrBadChangelogRecord is wrapped by the error for a changelog topic
	// record that cannot be decoded (corrupt value, missing key, unknown
	// operation header).
	ErrBadChangelogRecord = changelog.ErrBadRecord
)

// ConfigError reports a bad Config field. Reason names the other fields it
// involves by their Go names too.
type ConfigError struct {
	// Field is the path of the Config field, e.g. "Brokers" or
	// "TLS.CAFile".
	Field string
	// Reason says what is wrong with it.
	Reason string
}

// Error implements error.
func (e *ConfigError) Error() string {
	return fmt.Sprintf("kafka: config: %s: %s", e.Field, e.Reason)
}

// Unwrap returns ErrInvalidConfig.
func (e *ConfigError) Unwrap() error { return ErrInvalidConfig }

// ErrTopic is matched by every *TopicError.
var ErrTopic = errors.New("kafka: topic unfit")

// TopicError reports a topic that cannot serve its purpose: a changelog
// topic with another partition count than the ingest topic, one that is not
// compacted, one the brokers refuse to create, or a changelog record that
// does not decode. Retrying the same call does not help until the topic is
// changed: StartGroup refuses to start, and a Group keeps the partition
// whose restore failed undelivered and retries it with backoff.
type TopicError struct {
	// Topic is the topic's name.
	Topic string
	// Partition is the partition concerned, -1 for the whole topic.
	Partition int
	// Reason says what is wrong and what to do.
	Reason string
	// Err is the underlying error, when there is one (for a record that
	// does not decode, it wraps ErrBadChangelogRecord).
	Err error
}

// Error implements error.
func (e *TopicError) Error() string {
	if e.Partition >= 0 {
		return fmt.Sprintf("kafka: topic %s partition %d: %s", e.Topic, e.Partition, e.Reason)
	}
	return fmt.Sprintf("kafka: topic %s: %s", e.Topic, e.Reason)
}

// Unwrap returns ErrTopic and Err.
func (e *TopicError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrTopic}
	}
	return []error{ErrTopic, e.Err}
}
