package cli

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/outboxd/outbox/outbox"
)

// deliveryView is one delivery of a topic event as inspect --json shows
// it: the fields of GET /v1/events/{id}'s deliveries.
type deliveryView struct {
	Endpoint      string `json:"endpoint"`
	State         string `json:"state"`
	Attempts      int    `json:"attempts"`
	Deliveries    int    `json:"deliveries"`
	NextAttemptAt string `json:"next_attempt_at,omitempty"`
	LastStatus    int    `json:"last_status,omitempty"`
	LastError     string `json:"last_error,omitempty"`
	DeadAt        string `json:"dead_at,omitempty"`
	DeadReason    string `json:"dead_reason,omitempty"`
	Version       uint64 `json:"version"`
}

func viewDeliveries(ds []outbox.DeliveryStatus) []deliveryView {
	if len(ds) == 0 {
		return nil
	}
	out := make([]deliveryView, len(ds))
	for i, d := range ds {
		out[i] = deliveryView{
			Endpoint: d.Endpoint, State: d.State.String(), Attempts: d.Attempts, Deliveries: d.Deliveries,
			LastStatus: d.LastStatus, LastError: d.LastError, DeadAt: ts(d.DeadAt), DeadReason: d.DeadReason,
			Version: d.Version,
		}
		if d.State == outbox.StatePending {
			out[i].NextAttemptAt = ts(d.NextAttemptAt)
		}
	}
	return out
}

// writeDeliveries prints the deliveries of a topic event, one line each:
// its endpoint, state, attempts, and what comes next or came last. An
// event kept unrouted says so.
func writeDeliveries(w io.Writer, ev *outbox.Event) {
	if ev.Topic == "" {
		return
	}
	if len(ev.DeliveryStates) == 0 {
		fmt.Fprintf(w, "deliveries: none, unrouted: no endpoint subscribes to %s; kept until %s, then a dead letter\n",
			ev.Topic, tsText(ev.NextAttemptAt))
		return
	}
	fmt.Fprintf(w, "deliveries (%d, one per subscribed endpoint):\n", len(ev.DeliveryStates))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  ENDPOINT\tSTATE\tATTEMPTS\tNEXT ATTEMPT\tLAST")
	for _, d := range ev.DeliveryStates {
		next, last := "-", lastOutcome(&outbox.Event{LastStatus: d.LastStatus, LastError: d.LastError})
		if d.State == outbox.StatePending {
			next = tsText(d.NextAttemptAt)
		}
		if d.State == outbox.StateDead {
			last = "dead " + tsText(d.DeadAt) + ": " + d.DeadReason
		}
		fmt.Fprintf(tw, "  %s\t%s\t%d\t%s\t%s\n", d.Endpoint, d.State, d.Attempts, next, oneLine(last))
	}
	tw.Flush()
}

// deliveryOf names the delivery a changelog entry of a topic event is
// about: "to ENDPOINT", or "unrouted" for the event while no endpoint
// subscribed; ok is false for an entry of an event with a destination.
func deliveryOf(en outbox.ChangelogEntry) (string, bool) {
	ep, ok := en.Delivery()
	switch {
	case !ok:
		return "", false
	case ep == "":
		return "unrouted", true
	}
	return "to " + ep, true
}
