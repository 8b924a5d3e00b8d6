package route

import (
	"errors"
	"maps"
	"net/textproto"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/outboxd/outbox/store"
)

// Rule subscribes an endpoint to topics: the outbox's Subscription, field
// for field.
type Rule struct {
	// Endpoint is the subscribed endpoint's name.
	Endpoint string
	// Topics are topic names or patterns (see ValidateTopicPattern).
	Topics []string
	// Headers, when set, must all be carried by the event with these
	// values (names compared case-insensitively).
	Headers map[string]string
}

// Router matches topics to endpoints; it is immutable once built.
type Router struct {
	rules []Rule
}

// New returns the router of rules, which must be valid; it keeps a copy.
func New(rules []Rule) *Router { return &Router{rules: clone(rules)} }

// With returns a router whose rules for endpoint are rule alone (none when
// rule is nil), the other endpoints' rules kept as they are: one copy of
// the list, not a rebuild of every rule. rule must be valid and name
// endpoint.
func (rt *Router) With(endpoint string, rule *Rule) *Router {
	rules := make([]Rule, 0, len(rt.rules)+1)
	for _, r := range rt.rules {
		if r.Endpoint != endpoint {
			rules = append(rules, r) // immutable: shared with rt
		}
	}
	if rule != nil {
		rules = append(rules, clone([]Rule{*rule})...)
	}
	return &Router{rules: rules}
}

// Rules returns a copy of the router's rules.
func (rt *Router) Rules() []Rule { return clone(rt.rules) }

// Endpoints returns the endpoints subscribed to an event with topic and
// headers, sorted and without repeats.
func (rt *Router) Endpoints(topic string, headers map[string]string) []string {
	var out []string
	for _, s := range rt.rules {
		if slices.Contains(out, s.Endpoint) || !headersMatch(s.Headers, headers) {
			continue
		}
		for _, p := range s.Topics {
			if Matches(p, topic) {
				out = append(out, s.Endpoint)
				break
			}
		}
	}
	slices.Sort(out)
	return out
}

// headersMatch reports whether have carries every header of want with the
// same value (names compared case-insensitively).
func headersMatch(want, have map[string]string) bool {
	if len(want) == 0 {
		return true
	}
	if len(have) < len(want) {
		return false
	}
	canon := make(map[string]string, len(have))
	for k, v := range have {
		canon[textproto.CanonicalMIMEHeaderKey(k)] = v
	}
	for k, v := range want {
		if got, ok := canon[textproto.CanonicalMIMEHeaderKey(k)]; !ok || got != v {
			return false
		}
	}
	return true
}

func clone(rules []Rule) []Rule {
	if rules == nil {
		return nil
	}
	out := make([]Rule, len(rules))
	for i, s := range rules {
		out[i] = Rule{Endpoint: s.Endpoint, Topics: slices.Clone(s.Topics), Headers: maps.Clone(s.Headers)}
	}
	return out
}

// FanOut appends to recs one delivery of the topic event r per endpoint
// rt subscribes to it, and returns recs (unchanged when none does).
func (rt *Router) FanOut(recs []*store.Record, r *store.Record) []*store.Record {
	for _, ep := range rt.Endpoints(r.Topic, r.Headers) {
		recs = append(recs, DeliveryOf(r, ep))
	}
	return recs
}

// DeliveryID is the store ID of the delivery of event id to endpoint;
// with endpoint "", the store ID of the event kept unrouted. The separator
// (store.GroupSep) is a control character, which valid IDs and endpoint
// names never hold.
func DeliveryID(id, endpoint string) string { return id + store.GroupSep + endpoint }

// DeliveryOf returns the delivery of the topic event r (its ID being the
// event's or the unrouted record's) to endpoint. It shares r's headers and
// payload, which the store only reads.
func DeliveryOf(r *store.Record, endpoint string) *store.Record {
	d := *r
	d.ID = DeliveryID(store.GroupOf(r.ID), endpoint)
	d.Destination, d.Endpoint = endpoint, endpoint
	return &d
}

// KeepUnrouted turns the topic event r into its unrouted record: stored
// under ID ‖ separator, due when its retention ends (counted, as the max
// age is, from its DeliverAt when that is later), to become a dead letter
// then.
func KeepUnrouted(r *store.Record, retention time.Duration) *store.Record {
	u := *r
	u.ID = DeliveryID(r.ID, "")
	u.Destination, u.Endpoint = "", ""
	start := r.CreatedAt
	if r.DeliverAt.After(start) {
		start = r.DeliverAt
	}
	u.NextAttemptAt = start.Add(retention)
	return &u
}

// UnroutedReason is the dead reason of an event kept unrouted past its
// retention.
func UnroutedReason(topic string) string {
	return "unrouted: no endpoint subscribes to topic " + strconv.Quote(topic)
}

// MaxTopicBytes is the longest topic (and topic pattern) accepted.
const MaxTopicBytes = 200

// ValidateTopic returns nil when topic is a valid topic name, or an error
// saying what is wrong with it: 1 to MaxTopicBytes bytes of segments
// separated by dots, each one or more of A-Z, a-z, 0-9, '_' and '-'.
func ValidateTopic(topic string) error {
	if topic == "" {
		return errors.New("must not be empty")
	}
	if len(topic) > MaxTopicBytes {
		return errors.New("longer than the limit of " + strconv.Itoa(MaxTopicBytes) + " bytes")
	}
	start := 0
	for i := 0; i <= len(topic); i++ {
		if i < len(topic) && topic[i] != '.' {
			if !isTopicByte(topic[i]) {
				return errors.New("character " + strconv.Quote(topic[i:i+1]) + " at byte " + strconv.Itoa(i) + " is not allowed (a segment is made of A-Z, a-z, 0-9, '_' and '-')")
			}
			continue
		}
		if i == start {
			return errors.New("has an empty segment at byte " + strconv.Itoa(i) + " (segments are separated by single dots)")
		}
		start = i + 1
	}
	return nil
}

// ValidateTopicPattern returns nil when pattern is a valid subscription
// pattern (a topic, a topic followed by ".*", or "*" alone), or an error
// saying what is wrong with it.
func ValidateTopicPattern(pattern string) error {
	if pattern == "*" {
		return nil
	}
	if len(pattern) > MaxTopicBytes {
		return errors.New("longer than the limit of " + strconv.Itoa(MaxTopicBytes) + " bytes")
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

// Matches reports whether topic matches a valid pattern: "*" matches every
// topic, "p.*" every topic below p at any depth, and a topic itself.
func Matches(pattern, topic string) bool {
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
