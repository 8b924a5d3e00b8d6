package records

import (
	"fmt"
	"net/textproto"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/outboxd/outbox/outbox/internal/route"
)

// Fields are the caller-owned fields of an event.
type Fields struct {
	ID, Key, Destination, Topic, Method string
	Headers                             map[string]string
	Payload                             []byte
	DeliverAt                           time.Time
	TraceParent, TraceState             string
}

// Limits are the sizes and the scheduling horizon the outbox allows.
type Limits struct {
	MaxIDBytes, MaxHeaderBytes, MaxPayloadBytes int
	MaxSchedule                                 time.Duration
}

// Invalid is a refused field of the event with index Index of a call.
type Invalid struct {
	Index  int
	Field  string
	Reason string
}

func (e *Invalid) Error() string { return e.Field + ": " + e.Reason }

// Resolver resolves a destination to its endpoint (the Sink's
// EndpointResolver).
type Resolver func(destination string) (endpoint string, err error)

// Check checks the caller-owned fields of the event with index i, fills
// the defaults (Method) and returns the endpoint the destination resolves
// to (itself when resolve is nil or the event has a topic). now is the
// time DeliverAt is checked against.
func Check(i int, f *Fields, lim Limits, resolve Resolver, now time.Time) (endpoint string, err *Invalid) {
	bad := func(field, reason string) *Invalid { return &Invalid{Index: i, Field: field, Reason: reason} }
	if field, reason := checkNames(f, lim); field != "" {
		return "", bad(field, reason)
	}
	endpoint = f.Destination
	if resolve != nil && f.Topic == "" {
		ep, err := resolve(f.Destination)
		if err != nil {
			return "", bad("destination", err.Error())
		}
		if ep == "" {
			return "", bad("destination", "resolves to no endpoint")
		}
		endpoint = ep
	}
	if f.Method == "" {
		f.Method = "POST"
	} else if !ValidMethod(f.Method) {
		return "", bad("method", Quote(f.Method)+" is not one of "+methodList+" (methods are case-sensitive)")
	}
	if reason := CheckHeaders(f.Headers, true); reason != "" {
		return "", bad("headers", reason)
	}
	if size := headerBytes(f.Headers); size > lim.MaxHeaderBytes {
		return "", bad("headers", "larger than the limit of "+Itoa(lim.MaxHeaderBytes)+" bytes")
	}
	if len(f.Payload) > lim.MaxPayloadBytes {
		return "", bad("payload", "larger than the limit of "+Itoa(lim.MaxPayloadBytes)+" bytes")
	}
	if reason := checkSchedule(f.DeliverAt, lim.MaxSchedule, now); reason != "" {
		return "", bad("deliver_at", reason)
	}
	return endpoint, nil
}

// checkNames checks the ID, key, topic and destination of f and returns the
// field refused and why ("" when none is).
func checkNames(f *Fields, lim Limits) (field, reason string) {
	const text = "must be valid UTF-8 without control characters"
	switch {
	case len(f.ID) > lim.MaxIDBytes:
		return "id", "longer than the limit of " + Itoa(lim.MaxIDBytes) + " bytes"
	case f.ID != "" && !ValidText(f.ID):
		return "id", text
	case len(f.Key) > lim.MaxIDBytes:
		return "key", "longer than the limit of " + Itoa(lim.MaxIDBytes) + " bytes"
	case !ValidText(f.Key):
		return "key", text
	}
	if f.Topic != "" {
		if f.Destination != "" {
			return "topic", "set together with destination: an event has a destination or a topic, not both"
		}
		if err := route.ValidateTopic(f.Topic); err != nil {
			return "topic", Quote(f.Topic) + " " + err.Error()
		}
	} else if f.Destination == "" {
		return "destination", "required (or a topic)"
	}
	if !ValidText(f.Destination) {
		return "destination", text
	}
	if reason := LeadingDot(f.Destination); reason != "" {
		return "destination", reason
	}
	return "", ""
}

// CheckHeaders says what is wrong with the headers h ("" when nothing is):
// an invalid name or value, a name reserved (when reserved is true), or two
// names that differ only in case.
func CheckHeaders(h map[string]string, reserved bool) string {
	for name, value := range h {
		if !ValidHeaderName(name) {
			return "invalid header name " + Quote(name)
		}
		if !ValidHeaderValue(value) {
			return "invalid value for header " + Quote(name)
		}
		if reason, ok := ReservedHeader(name); ok && reserved {
			return "header " + Quote(name) + " " + reason
		}
	}
	if a, b, ok := sameHeaderTwice(h); ok {
		if reserved {
			return "headers " + Quote(a) + " and " + Quote(b) + " are the same header (names are case-insensitive); only one would be sent"
		}
		return "headers " + Quote(a) + " and " + Quote(b) + " are the same header (names are case-insensitive)"
	}
	return ""
}

func headerBytes(h map[string]string) int {
	size := 0
	for name, value := range h {
		size += len(name) + len(value)
	}
	return size
}

// checkSchedule refuses a deliverAt more than horizon ahead of now. One
// that has passed is fine: the event is due at once.
func checkSchedule(deliverAt time.Time, horizon time.Duration, now time.Time) string {
	if deliverAt.IsZero() {
		return ""
	}
	if limit := now.Add(horizon); deliverAt.After(limit) {
		return deliverAt.UTC().Format(time.RFC3339Nano) + " is more than " + horizon.String() + " ahead, past the scheduling horizon"
	}
	return ""
}

// ValidText reports whether s is valid UTF-8 without control characters
// (C0, DEL and C1).
func ValidText(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return false
		}
	}
	return true
}

// methodList names the methods ValidMethod accepts, for messages.
const methodList = "GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS"

// ValidMethod reports whether m is one of the methods of methodList.
func ValidMethod(m string) bool {
	switch m {
	case "GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS":
		return true
	}
	return false
}

// ValidHeaderName reports whether name is an RFC 9110 token.
func ValidHeaderName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		if !isTokenByte(name[i]) {
			return false
		}
	}
	return true
}

// ValidHeaderValue reports whether v has no control characters other than
// tab.
func ValidHeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		b := v[i]
		if (b < 0x20 && b != '\t') || b == 0x7f {
			return false
		}
	}
	return true
}

// ReservedHeader reports whether an event may not carry the header name
// (compared case-insensitively) and why.
func ReservedHeader(name string) (reason string, reserved bool) {
	reason, reserved = reservedHeaders[textproto.CanonicalMIMEHeaderKey(name)]
	return reason, reserved
}

const (
	setBySink = "is set by the sink on every attempt"
	setByHTTP = "is set by the HTTP transport for each request"
	hopByHop  = "is a hop-by-hop header of one connection, not sent on to the receiver"
)

// reservedHeaders maps canonical header names to why events may not set them.
var reservedHeaders = map[string]string{
	"Idempotency-Key":   setBySink,
	"Webhook-Id":        setBySink,
	"Webhook-Timestamp": setBySink,
	"Webhook-Signature": setBySink,
	"Host":              setByHTTP,
	"Content-Length":    setByHTTP,
	"Transfer-Encoding": setByHTTP,
	"Trailer":           setByHTTP,
	"Connection":        hopByHop,
	"Keep-Alive":        hopByHop,
	"Proxy-Connection":  hopByHop,
	"Te":                hopByHop,
	"Upgrade":           hopByHop,
}

// sameHeaderTwice finds two names in h that differ only in case, returned
// in sorted order: a sink sends one header for both.
func sameHeaderTwice(h map[string]string) (a, b string, found bool) {
	if len(h) < 2 {
		return "", "", false
	}
	seen := make(map[string]string, len(h))
	for name := range h {
		c := textproto.CanonicalMIMEHeaderKey(name)
		if prev, ok := seen[c]; ok {
			return min(prev, name), max(prev, name), true
		}
		seen[c] = name
	}
	return "", "", false
}

func isTokenByte(b byte) bool {
	switch {
	case 'a' <= b && b <= 'z', 'A' <= b && b <= 'Z', '0' <= b && b <= '9':
		return true
	}
	switch b {
	case '!', '#', '$', '%', '&', '\'', '*', '+', '-', '.', '^', '_', '`', '|', '~':
		return true
	}
	return false
}

// LeadingDot says why a destination or endpoint name starting with a dot
// is refused ("" when s does not): ".", ".." and the like, and every name
// starting with a dot, cannot be addressed in a URL path (clients and
// routers resolve them as path segments), so no operator could inspect or
// change such an endpoint through the API.
func LeadingDot(s string) string {
	if !strings.HasPrefix(s, ".") {
		return ""
	}
	return Quote(s) + " starts with a dot: a name of dots or starting with one cannot be addressed in a URL path"
}

// Itoa is strconv.Itoa, for messages.
func Itoa(n int) string { return strconv.Itoa(n) }

// Quote is strconv.Quote, for messages.
func Quote(s string) string { return strconv.Quote(s) }

// CheckSubscription checks a subscription of endpoint to topics with the
// header filter headers, and returns the field it refuses and why ("" when
// none). maxEndpoint is the longest endpoint name a delivery ID leaves room
// for; resolve, when set, must resolve the endpoint to itself.
func CheckSubscription(endpoint string, topics []string, headers map[string]string, maxEndpoint int, resolve Resolver) (field, reason string) {
	switch {
	case endpoint == "":
		return "endpoint", "required"
	case !ValidText(endpoint):
		return "endpoint", "must be valid UTF-8 without control characters"
	case len(endpoint) > maxEndpoint:
		return "endpoint", "longer than " + Itoa(maxEndpoint) + " bytes (the store's ID limit less Config.MaxIDBytes and a separator)"
	case LeadingDot(endpoint) != "":
		return "endpoint", LeadingDot(endpoint)
	}
	if resolve != nil {
		ep, err := resolve(endpoint)
		if err != nil {
			return "endpoint", "unknown endpoint " + Quote(endpoint) + ": " + err.Error()
		}
		if ep != endpoint {
			return "endpoint", Quote(endpoint) + " is not an endpoint name (it resolves to " + Quote(ep) + ")"
		}
	}
	if len(topics) == 0 {
		return "topics", "at least one topic or pattern is required"
	}
	for _, p := range topics {
		if err := route.ValidateTopicPattern(p); err != nil {
			return "topics", fmt.Sprintf("pattern %q %v", p, err)
		}
	}
	if reason := CheckHeaders(headers, false); reason != "" {
		return "headers", reason
	}
	return "", ""
}
