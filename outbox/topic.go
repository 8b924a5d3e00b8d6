package outbox

import "github.com/outboxd/outbox/outbox/internal/route"

// MaxTopicBytes is the longest topic (and topic pattern) accepted.
const MaxTopicBytes = 200

// ValidateTopic returns nil when topic is a valid topic name, or an error
// saying what is wrong with it. A topic is 1 to MaxTopicBytes bytes of
// segments separated by dots, each segment one or more of the characters
// A-Z, a-z, 0-9, '_' and '-': "order.paid", "invoice_v2.created".
func ValidateTopic(topic string) error { return route.ValidateTopic(topic) }

// ValidateTopicPattern returns nil when pattern is a valid subscription
// pattern, or an error saying what is wrong with it. A pattern is a topic
// (matching that topic only), a topic followed by ".*" (matching every
// topic that starts with that topic and a dot, at any depth: "order.*"
// matches "order.paid" and "order.paid.eu" but not "order"), or "*" alone
// (matching every topic).
func ValidateTopicPattern(pattern string) error { return route.ValidateTopicPattern(pattern) }
