package httpapi

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/outboxd/outbox/outbox"
)

// eventIn is an event object as POST /v1/events accepts it.
type eventIn struct {
	ID            string            `json:"id"`
	Key           string            `json:"key"`
	Destination   string            `json:"destination"`
	Topic         *string           `json:"topic"`
	Method        string            `json:"method"`
	Headers       map[string]string `json:"headers"`
	Payload       json.RawMessage   `json:"payload"`
	PayloadBase64 *string           `json:"payload_base64"`
	DeliverAt     *string           `json:"deliver_at"`
	Delay         *string           `json:"delay"`
}

// limits are the bounds decodeEvents enforces.
type limits struct {
	maxBatch   int
	maxPayload int
	maxID      int
	// now is the time a "delay" counts from.
	now time.Time
}

// decodeEvents parses a POST /v1/events body: one event object or an array
// of them. Errors are *apiError values whose message names the bad field as
// "destination: ..." for a single object or "events[3].destination: ..." in
// a batch. It never panics, whatever the input.
func decodeEvents(body []byte, lim limits) ([]outbox.Event, error) {
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if len(trimmed) == 0 {
		return nil, errorf(http.StatusBadRequest, "empty body: send an event object or an array of event objects")
	}
	var ins []eventIn
	batch := false
	switch trimmed[0] {
	case '{':
		var in eventIn
		if err := decodeStrict(trimmed, &in); err != nil {
			return nil, decodeError(err, "")
		}
		if err := checkRaw(trimmed, 1, "payload", ""); err != nil {
			return nil, err
		}
		ins = []eventIn{in}
	case '[':
		batch = true
		if err := decodeStrict(trimmed, &ins); err != nil {
			return nil, batchDecodeError(trimmed, err)
		}
		if len(ins) == 0 {
			return nil, errorf(http.StatusBadRequest, "empty batch: send at least one event")
		}
		if err := checkRaw(trimmed, 2, "payload", "events"); err != nil {
			return nil, err
		}
		if len(ins) > lim.maxBatch {
			return nil, errorf(http.StatusRequestEntityTooLarge,
				fmt.Sprintf("batch of %d events is over the limit of %d events per request", len(ins), lim.maxBatch))
		}
	default:
		if !json.Valid(trimmed) {
			return nil, decodeError(json.Unmarshal(trimmed, new(any)), "")
		}
		return nil, errorf(http.StatusBadRequest, "body must be an event object or an array of event objects")
	}
	evs := make([]outbox.Event, len(ins))
	for i := range ins {
		prefix := ""
		if batch {
			prefix = fmt.Sprintf("events[%d].", i)
		}
		if err := ins[i].toEvent(&evs[i], lim, prefix); err != nil {
			return nil, err
		}
	}
	return evs, nil
}

// decodeStrict unmarshals one JSON value into v, refusing unknown fields and
// trailing data.
func decodeStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errTrailing
	}
	return nil
}

var errTrailing = errors.New("trailing data after the JSON value")

// batchDecodeError finds which element of a batch failed to decode, for a
// message naming it (the slow path, taken only on bad input).
func batchDecodeError(b []byte, err error) error {
	if errors.Is(err, errTrailing) {
		return decodeError(err, "")
	}
	var raws []json.RawMessage
	if rerr := json.Unmarshal(b, &raws); rerr != nil {
		// Malformed JSON or not an array of values.
		return decodeError(rerr, "")
	}
	for i, raw := range raws {
		var in eventIn
		if eerr := decodeStrict(raw, &in); eerr != nil {
			return decodeError(eerr, fmt.Sprintf("events[%d]", i))
		}
	}
	return decodeError(err, "")
}

// decodeError turns an encoding/json error into a 400 naming the field.
// elem is the element being decoded ("" for a single object or the body).
func decodeError(err error, elem string) error {
	var synErr *json.SyntaxError
	var typeErr *json.UnmarshalTypeError
	switch {
	case errors.As(err, &synErr):
		return errorf(http.StatusBadRequest, fmt.Sprintf("malformed JSON at byte %d: %s", synErr.Offset, synErr.Error()))
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return errorf(http.StatusBadRequest, "malformed JSON: unexpected end of body")
	case errors.Is(err, errTrailing):
		return errorf(http.StatusBadRequest, "malformed JSON: trailing data after the JSON value")
	case errors.As(err, &typeErr):
		field := typeErr.Field
		name := joinField(elem, field)
		if field == "" {
			if name == "" {
				name = "body"
			}
			return errorf(http.StatusBadRequest, fmt.Sprintf("%s: must be an event object, got %s", name, typeErr.Value))
		}
		if field == "headers" {
			return errorf(http.StatusBadRequest, fmt.Sprintf("%s: must be an object of string values, got a %s value", name, typeErr.Value))
		}
		if msg, ok := numberError(typeErr); ok {
			return errorf(http.StatusBadRequest, name+": "+msg)
		}
		return errorf(http.StatusBadRequest, fmt.Sprintf("%s: must be %s, got %s", name, describeType(typeErr.Type), typeErr.Value))
	}
	msg := strings.TrimPrefix(err.Error(), "json: ")
	if elem != "" {
		msg = elem + ": " + msg
	}
	return errorf(http.StatusBadRequest, msg)
}

func joinField(elem, field string) string {
	switch {
	case elem == "":
		return field
	case field == "":
		return elem
	}
	return elem + "." + field
}

// describeType names a Go type the way a JSON user thinks of it.
func describeType(t reflect.Type) string {
	if t == nil {
		return "another type"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Map:
		return "an object of " + strings.TrimPrefix(describeType(t.Elem()), "a ") + " values"
	case reflect.Struct:
		return "an object"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int64, reflect.Int32, reflect.Uint, reflect.Uint64, reflect.Float64:
		return "a number"
	}
	return t.String()
}

// toEvent validates in and fills ev. prefix is "" or "events[i].".
func (in *eventIn) toEvent(ev *outbox.Event, lim limits, prefix string) error {
	bad := func(field, reason string) error {
		return errorf(http.StatusBadRequest, prefix+field+": "+reason)
	}
	if len(in.ID) > lim.maxID {
		return bad("id", fmt.Sprintf("%d bytes is over the limit of %d bytes", len(in.ID), lim.maxID))
	}
	if !outbox.ValidText(in.ID) {
		return bad("id", "must be valid UTF-8 without control characters")
	}
	// Exactly one of destination and topic; the topic's syntax is checked
	// here too (Enqueue would refuse it), to name the field in the API's
	// words. A topic given as "" is an empty topic, not an absent one.
	topic := ""
	switch {
	case in.Topic != nil && in.Destination != "":
		return errorf(http.StatusBadRequest, prefix+"destination, "+prefix+"topic: give one of the two, not both")
	case in.Topic != nil:
		topic = *in.Topic
		if err := outbox.ValidateTopic(topic); err != nil {
			return bad("topic", quoteShort(topic)+": "+err.Error())
		}
	case in.Destination == "":
		return bad("destination", "is required (a configured endpoint name or an absolute URL), unless the event has a topic")
	case !outbox.ValidText(in.Destination):
		return bad("destination", "must be valid UTF-8 without control characters")
	}
	if !utf8.ValidString(in.Key) {
		return bad("key", "must be valid UTF-8")
	}
	// The method and headers are checked by Enqueue (outbox.ValidMethod,
	// outbox.ValidHeaderName, ValidHeaderValue and ReservedHeader), whose
	// *ValidationError fail answers naming the event and the field.
	method := in.Method
	if method == "" {
		method = http.MethodPost
	}
	var payload []byte
	switch {
	case len(in.Payload) > 0 && in.PayloadBase64 != nil:
		return errorf(http.StatusBadRequest, prefix+"payload, "+prefix+"payload_base64: give one of the two, not both")
	case in.PayloadBase64 != nil:
		b, err := base64.StdEncoding.DecodeString(*in.PayloadBase64)
		if err != nil {
			return bad("payload_base64", "not valid standard base64: "+err.Error())
		}
		payload = b
	case len(in.Payload) > 0:
		payload = in.Payload
	}
	if len(payload) > lim.maxPayload {
		field := "payload"
		if in.PayloadBase64 != nil {
			field = "payload_base64"
		}
		return errorf(http.StatusRequestEntityTooLarge, fmt.Sprintf("%s%s: %d bytes is over the limit of %d bytes",
			prefix, field, len(payload), lim.maxPayload))
	}
	deliverAt, err := in.schedule(lim.now, prefix)
	if err != nil {
		return err
	}
	*ev = outbox.Event{
		ID:          in.ID,
		Key:         in.Key,
		Destination: in.Destination,
		Topic:       topic,
		Method:      method,
		Headers:     in.Headers,
		Payload:     payload,
		DeliverAt:   deliverAt,
	}
	return nil
}

// schedule returns the not-before time of in: "deliver_at" (RFC 3339) or
// now + "delay" (a Go duration such as "90s" or "2h30m", not negative), zero
// when neither is given. The horizon (outbox.Config.MaxSchedule) is
// Enqueue's to check.
func (in *eventIn) schedule(now time.Time, prefix string) (time.Time, error) {
	switch {
	case in.DeliverAt != nil && in.Delay != nil:
		return time.Time{}, errorf(http.StatusBadRequest, prefix+"deliver_at, "+prefix+"delay: give one of the two, not both")
	case in.DeliverAt != nil:
		t, err := time.Parse(time.RFC3339, *in.DeliverAt)
		if err != nil {
			return time.Time{}, errorf(http.StatusBadRequest, prefix+"deliver_at: "+quoteShort(*in.DeliverAt)+
				" is not an RFC 3339 time such as \"2026-01-02T15:04:05Z\"")
		}
		return t.UTC(), nil
	case in.Delay != nil:
		d, err := time.ParseDuration(*in.Delay)
		if err != nil {
			return time.Time{}, errorf(http.StatusBadRequest, prefix+"delay: "+quoteShort(*in.Delay)+
				" is not a duration such as \"90s\" or \"2h30m\"")
		}
		if d < 0 {
			return time.Time{}, errorf(http.StatusBadRequest, prefix+"delay: "+quoteShort(*in.Delay)+" is negative")
		}
		if d == 0 {
			return time.Time{}, nil
		}
		return now.Add(d).UTC(), nil
	}
	return time.Time{}, nil
}

// quoteShort quotes s for an error message, cut to its first 64 bytes.
func quoteShort(s string) string {
	if len(s) > 64 {
		return strconv.Quote(s[:64]) + "..."
	}
	return strconv.Quote(s)
}

// numberError explains a JSON number that does not fit its field: out of
// the range of the field's type, or not a whole number for a whole-number
// field (encoding/json only says it cannot unmarshal it).
func numberError(e *json.UnmarshalTypeError) (string, bool) {
	lit, ok := strings.CutPrefix(e.Value, "number ")
	if !ok || e.Type == nil {
		return "", false
	}
	switch e.Type.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		f, err := strconv.ParseFloat(lit, 64)
		switch {
		case err == nil && f != math.Trunc(f):
			return "must be a whole number, got " + lit, true
		case err == nil && math.Abs(f) < float64(maxOf(e.Type)):
			return "must be a whole number written without a fraction or exponent, got " + lit, true
		}
		return fmt.Sprintf("the number %s is out of range (at most %d)", lit, maxOf(e.Type)), true
	case reflect.Float32, reflect.Float64:
		return "the number " + lit + " is out of range", true
	}
	return "", false
}

// maxOf is the largest value of an integer type.
func maxOf(t reflect.Type) uint64 {
	bits := uint(t.Bits())
	switch t.Kind() {
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return 1<<bits - 1
	}
	return 1<<(bits-1) - 1
}
