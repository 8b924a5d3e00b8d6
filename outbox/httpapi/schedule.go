package httpapi

import (
	"encoding/json"
	"errors"
	"strings"

	"github.com/outboxd/outbox/outbox"
)

// delayField renames the field of Enqueue's refusal of a not-before time
// from "deliver_at" to "delay" when the client gave the event a delay, so
// that the answer names the field the client sent. It re-reads the body,
// on this error path only.
func delayField(err error, body []byte, batch bool) error {
	var ve *outbox.ValidationError
	if !errors.As(err, &ve) || ve.Field != "deliver_at" {
		return err
	}
	type delayOnly struct {
		Delay *string `json:"delay"`
	}
	var in delayOnly
	if batch {
		var ins []delayOnly
		if json.Unmarshal(body, &ins) != nil || ve.Index < 0 || ve.Index >= len(ins) {
			return err
		}
		in = ins[ve.Index]
	} else if json.Unmarshal(body, &in) != nil {
		return err
	}
	if in.Delay == nil {
		return err
	}
	renamed := *ve
	renamed.Field = "delay"
	// "T is more than D ahead, ..." becomes "puts the event at T, more
	// than D ahead, ...".
	renamed.Reason = "puts the event at " + strings.Replace(ve.Reason, " is more than ", ", more than ", 1)
	return &renamed
}
