package outbox

import (
	"errors"
	"strings"
)

// MaxTopicBytes is the longest topic (and topic pattern) accepted.
const MaxTopicBytes = 200

// ValidateTopic returns nil when topic is a valid topic name, or an error
// saying what is wrong with it. A topic is 1 to MaxTopicBytes bytes of
// segments separated by dots, each segment one or more of the characters
// A-Z, a-z, 0-9, '_' and '-': "order.paid", "invoice_v2.created".
func ValidateTopic(topic string) error {
	if topic == "" {
		return errors.New("must not be empty")
	}
	if len(topic) > MaxTopicBytes {
		return errors.New("longer than the limit of " + itoa(MaxTopicBytes) + " bytes")
	}
	start := 0
	for i := 0; i <= len(topic); i++ {
		if i < len(topic) && topic[i] != '.' {
			if !isTopicByte(topic[i]) {
				return errors.New("character " + quote(topic[i:i+1]) + " at byte " + itoa(i) + " is not allowed (a segment is made of A-Z, a-z, 0-9, '_' and '-')")
			}
			continue
		}
		if i == start {
			return errors.New("has an empty segment at byte " + itoa(i) + " (segments are separated by single dots)")
		}
		start = i + 1
	}
	return nil
}

// ValidateTopicPattern returns nil when pattern is a valid subscription
// pattern, or an error saying what is wrong with it. A pattern is a topic
// (matching that topic only), a topic followed by ".*" (matching every
// topic that starts with that topic and a dot, at any depth: "order.*"
// matches "order.paid" and "order.paid.eu" but not "order"), or "*" alone
// (matching every topic).
func ValidateTopicPattern(pattern string) error {
	if pattern == "*" {
		return nil
	}
	if len(pattern) > MaxTopicBytes {
		return errors.New("longer than the limit of " + itoa(MaxTopicBytes) + " bytes")
	}
	if prefix, ok := strings.CutSuffix(pattern, ".*"); ok {
		if err := ValidateTopic(prefix); err != nil {
			return errors.New("the prefix before \".*\" " + err.Error())
		}
		return nil
	}
	if strings.Contains(pattern, "*") {
		return errors.New("'*' may only stand alone or as the last segment (\"order.*\")")
	}
	return ValidateTopic(pattern)
}

// topicMatches reports whether topic matches a valid pattern.
func topicMatches(pattern, topic string) bool {
	if pattern == "*" {
		return true
	}
	if prefix, ok := strings.CutSuffix(pattern, ".*"); ok {
		return len(topic) > len(prefix)+1 && topic[len(prefix)] == '.' && strings.HasPrefix(topic, prefix)
	}
	return pattern == topic
}

func isTopicByte(b byte) bool {
	return 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' || '0' <= b && b <= '9' || b == '_' || b == '-'
}
