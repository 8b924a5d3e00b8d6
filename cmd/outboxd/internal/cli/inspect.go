package cli

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/outboxd/outbox/outbox"
)

// openOffline opens a database file read-only for inspect, refusing politely
// while a server holds it.
func openOffline(cmd, path string, stderr io.Writer) (*outbox.Outbox, bool) {
	if _, err := os.Stat(path); err != nil {
		fmt.Fprintf(stderr, "outboxd %s: no database at %s: %v\n", cmd, path, err)
		return nil, false
	}
	o, err := outbox.Open(path, outbox.Config{ReadOnly: true, LockTimeout: 500 * time.Millisecond})
	if err != nil {
		fmt.Fprintf(stderr, "outboxd %s: %s\n", cmd, describeOpenError(path, err))
		return nil, false
	}
	return o, true
}

// describeOpenError explains why a database file could not be opened.
func describeOpenError(path string, err error) string {
	switch {
	case errors.Is(err, outbox.ErrLocked):
		return fmt.Sprintf("%s is in use: another process (a running outboxd serve?) holds its lock. "+
			"Stop it first, or ask the running server over its HTTP API (/v1/stats, /v1/events).", path)
	case errors.Is(err, outbox.ErrNotDatabase):
		return fmt.Sprintf("%s is not an outboxd database", path)
	case errors.Is(err, outbox.ErrSchemaTooNew):
		return fmt.Sprintf("%s was written by a newer outboxd; use that version", path)
	case errors.Is(err, outbox.ErrDamaged):
		return describeDamage(path, err)
	}
	return fmt.Sprintf("opening %s: %v", path, err)
}

// describeDamage explains a read of path that met damage, and what to run.
func describeDamage(path string, err error) string {
	return fmt.Sprintf("%s is damaged (%v). Run outboxd check --db %s for a report of every problem and what to do.", path, err, path)
}

func inspect(e Env, args []string) int {
	if wantsCluster(args) {
		return inspectCluster(e, args)
	}
	if wantsFlag(args, "archive") {
		return inspectArchive(e, args)
	}
	fs := flag.NewFlagSet("outboxd inspect", flag.ContinueOnError)
	fs.SetOutput(e.Stderr)
	db := fs.String("db", "./outboxd.db", "database `file`")
	id := fs.String("id", "", "show one event and its whole history")
	state := fs.String("state", "", "list only pending, dead or unrouted events")
	unrouted := fs.Bool("unrouted", false, "list only the unrouted topic events (as --state unrouted)")
	topic := fs.String("topic", "", "list only the events (deliveries) of this topic")
	limit := fs.Int("limit", 20, "events listed per state")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(e.Stderr, "outboxd inspect: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	if *unrouted {
		if *state != "" && *state != "unrouted" {
			fmt.Fprintf(e.Stderr, "outboxd inspect: --unrouted and --state %s: give one of the two\n", *state)
			return exitUsage
		}
		*state = "unrouted"
	}
	if *state != "" && *state != "pending" && *state != "dead" && *state != "unrouted" {
		fmt.Fprintf(e.Stderr, "outboxd inspect: --state: want pending, dead or unrouted, got %q\n", *state)
		return exitUsage
	}
	if *topic != "" {
		if err := outbox.ValidateTopic(*topic); err != nil {
			fmt.Fprintf(e.Stderr, "outboxd inspect: --topic %q: %v\n", *topic, err)
			return exitUsage
		}
	}
	if *limit < 1 {
		fmt.Fprintf(e.Stderr, "outboxd inspect: --limit: must be positive\n")
		return exitUsage
	}
	o, ok := openOffline("inspect", *db, e.Stderr)
	if !ok {
		return exitError
	}
	defer o.Stop(context.Background()) // read-only: nothing to flush
	// The output is written only once everything read: a read that fails
	// midway leaves no partial report behind.
	var out bytes.Buffer
	var err error
	if *id != "" {
		err = inspectEvent(&out, o, *id, *asJSON)
	} else {
		err = inspectSummary(&out, o, listFilter{only: *state, topic: *topic}, *limit, *asJSON)
	}
	switch {
	case errors.Is(err, outbox.ErrDamaged):
		fmt.Fprintf(e.Stderr, "outboxd inspect: %s\n", describeDamage(*db, err))
		return exitError
	case err != nil:
		fmt.Fprintf(e.Stderr, "outboxd inspect: %v\n", err)
		return exitError
	}
	if _, err := out.WriteTo(e.Stdout); err != nil {
		fmt.Fprintf(e.Stderr, "outboxd inspect: %v\n", err)
		return exitError
	}
	return exitOK
}

// recordView is an event as inspect shows it.
type recordView struct {
	ID            string            `json:"id"`
	Key           string            `json:"key,omitempty"`
	Destination   string            `json:"destination"`
	Topic         string            `json:"topic,omitempty"`
	Endpoint      string            `json:"endpoint,omitempty"`
	Method        string            `json:"method"`
	Headers       map[string]string `json:"headers,omitempty"`
	PayloadBytes  int               `json:"payload_bytes"`
	CreatedAt     string            `json:"created_at,omitempty"`
	Attempts      int               `json:"attempts"`
	Deliveries    int               `json:"deliveries"`
	NextAttemptAt string            `json:"next_attempt_at,omitempty"`
	DeliverAt     string            `json:"deliver_at,omitempty"`
	LastStatus    int               `json:"last_status,omitempty"`
	LastError     string            `json:"last_error,omitempty"`
	Version       uint64            `json:"version"`
	DeadAt        string            `json:"dead_at,omitempty"`
	DeadReason    string            `json:"dead_reason,omitempty"`
	// DeliveryStates is set for a topic event shown whole (--id).
	DeliveryStates []deliveryView `json:"delivery_states,omitempty"`
}

func ts(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// tsText formats a time for the text output: fixed width, milliseconds.
func tsText(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02T15:04:05.000Z")
}

func viewRecord(r *outbox.Event) *recordView {
	if r == nil {
		return nil
	}
	return &recordView{
		ID: r.ID, Key: r.Key, Destination: r.Destination, Topic: r.Topic, Endpoint: r.Endpoint, Method: r.Method,
		Headers: r.Headers, PayloadBytes: len(r.Payload), CreatedAt: ts(r.CreatedAt),
		Attempts: r.Attempts, Deliveries: r.Deliveries, NextAttemptAt: ts(r.NextAttemptAt),
		DeliverAt: ts(r.DeliverAt), LastStatus: r.LastStatus, LastError: r.LastError, Version: r.Version,
		DeadAt: ts(r.DeadAt), DeadReason: r.DeadReason, DeliveryStates: viewDeliveries(r.DeliveryStates),
	}
}

// statsView is the database's counts as inspect --json shows them.
type statsView struct {
	Pending          int    `json:"pending"`
	Dead             int    `json:"dead"`
	Unrouted         int    `json:"unrouted"`
	Tombstones       int    `json:"tombstones"`
	Endpoints        int    `json:"endpoints"`
	ChangelogEntries int    `json:"changelog_entries"`
	FileSize         int64  `json:"file_size"`
	LastLSN          uint64 `json:"last_lsn"`
	ShippedLSN       uint64 `json:"shipped_lsn"`
	KeyIndex         bool   `json:"key_index"`
}

// endpointView is an endpoint's state as inspect --json shows it.
type endpointView struct {
	Name           string `json:"name"`
	Disabled       bool   `json:"disabled"`
	DisabledReason string `json:"disabled_reason,omitempty"`
	DisabledAt     string `json:"disabled_at,omitempty"`
	ThrottledUntil string `json:"throttled_until,omitempty"`
	FailureStreak  int    `json:"failure_streak"`
	LastStatus     int    `json:"last_status"`
	Breaker        string `json:"breaker"`
	BreakerUntil   string `json:"breaker_until,omitempty"`
	BreakerOpens   int    `json:"breaker_opens,omitempty"`
}

// historyView is one changelog entry of an event, with what it means.
type historyView struct {
	LSN    uint64      `json:"lsn"`
	Time   string      `json:"time"`
	Op     string      `json:"op"`
	What   string      `json:"what"`
	Reason string      `json:"reason,omitempty"`
	Record *recordView `json:"record,omitempty"`
}

// describeHistory explains each changelog entry of one event in words.
func describeHistory(entries []outbox.ChangelogEntry) []historyView {
	out := make([]historyView, 0, len(entries))
	prevs := map[string]*outbox.Event{} // by entry ID: a topic event's deliveries each have their own
	for _, en := range entries {
		var r *outbox.Event
		if ev, ok := en.Event(); ok {
			r = &ev
		}
		what := describeEntry(en, r, prevs[en.ID])
		if d, ok := deliveryOf(en); ok {
			what = d + ": " + what
		}
		out = append(out, historyView{
			LSN: en.LSN, Time: ts(en.Time), Op: en.Op.String(),
			What: what, Reason: en.Reason, Record: viewRecord(r),
		})
		if r != nil {
			prevs[en.ID] = r
		}
	}
	return out
}

// describeEntry explains one changelog entry: r is the event it carries
// (nil for a deleting op), prev the event of the entry before it.
// scheduleNote tells an enqueued event's not-before time, if it has one.
func scheduleNote(r *outbox.Event) string {
	if r.DeliverAt.IsZero() {
		return ""
	}
	return ", to deliver at " + tsText(r.DeliverAt)
}

func describeEntry(en outbox.ChangelogEntry, r, prev *outbox.Event) string {
	switch en.Op {
	case outbox.OpEnqueue:
		if r.Topic != "" && r.Endpoint == "" {
			return fmt.Sprintf("enqueued, %d-byte payload%s; no endpoint subscribes to %s", len(r.Payload), keyNote(r.Key), r.Topic)
		}
		return fmt.Sprintf("enqueued: %s to %s, %d-byte payload%s%s", r.Method, r.Destination, len(r.Payload), keyNote(r.Key), scheduleNote(r))
	case outbox.OpUpdate:
		return fmt.Sprintf("updated in place (coalescing upsert): %d-byte payload", len(r.Payload))
	case outbox.OpReschedule:
		next := ""
		if !r.NextAttemptAt.IsZero() {
			next = "; next attempt " + tsText(r.NextAttemptAt)
		}
		if prev != nil && r.Attempts == prev.Attempts {
			return fmt.Sprintf("delivery %d parked (not yet; no attempt spent): %s%s", r.Deliveries, lastOutcome(r), next)
		}
		return fmt.Sprintf("attempt %d failed, will retry: %s%s", r.Attempts, lastOutcome(r), next)
	case outbox.OpDead:
		if r.Deliveries == 0 {
			return "stored as a dead letter: " + r.DeadReason
		}
		return fmt.Sprintf("dead after delivery %d: %s", r.Deliveries, r.DeadReason)
	case outbox.OpReplay:
		return "replayed: moved from dead back to pending, attempts reset"
	case outbox.OpDelete:
		return "deleted: " + orDash(en.Reason)
	case outbox.OpDrop:
		return "dropped: " + orDash(en.Reason)
	case outbox.OpSupersede:
		return "superseded by a newer event with the same key: " + orDash(en.Reason)
	}
	return en.Op.String()
}

func keyNote(key string) string {
	if key == "" {
		return ""
	}
	return ", key " + key
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func inspectEvent(w io.Writer, o *outbox.Outbox, id string, asJSON bool) error {
	ev, err := o.Get(context.Background(), id)
	if err != nil && !errors.Is(err, outbox.ErrNotFound) {
		return err
	}
	state := ev.State
	var rec *outbox.Event // only pending and dead events are kept whole
	if state == outbox.StatePending || state == outbox.StateDead {
		rec = &ev
	}
	hist, err := outbox.EventHistory(&ev, o.Changelog().History)
	if err != nil {
		return fmt.Errorf("reading the history of %q: %w", id, err)
	}
	attempts, err := eventAttempts(o, id)
	if err != nil {
		return err
	}
	stateName := stateString(state)
	if rec != nil && state == outbox.StatePending && rec.Topic != "" && len(rec.DeliveryStates) == 0 {
		stateName = "unrouted (no endpoint subscribes to its topic yet)"
	}
	if asJSON {
		return writeJSONTo(w, struct {
			ID       string        `json:"id"`
			State    string        `json:"state"`
			Event    *recordView   `json:"event,omitempty"`
			History  []historyView `json:"history"`
			Attempts []attemptView `json:"attempts"`
		}{id, stateName, viewRecord(rec), describeHistory(hist), viewAttempts(attempts)})
	}
	fmt.Fprintf(w, "event %s: %s\n", id, stateName)
	if rec != nil {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		if rec.Topic != "" {
			fmt.Fprintf(tw, "  topic\t%s\n", rec.Topic)
		} else {
			fmt.Fprintf(tw, "  destination\t%s (endpoint %s)\n", rec.Destination, orDash(rec.Endpoint))
		}
		fmt.Fprintf(tw, "  method\t%s\n", rec.Method)
		if rec.Key != "" {
			fmt.Fprintf(tw, "  key\t%s\n", rec.Key)
		}
		fmt.Fprintf(tw, "  payload\t%d bytes\n", len(rec.Payload))
		fmt.Fprintf(tw, "  created\t%s\n", tsText(rec.CreatedAt))
		if !rec.DeliverAt.IsZero() {
			fmt.Fprintf(tw, "  deliver at\t%s\n", tsText(rec.DeliverAt))
		}
		if rec.Topic == "" { // a topic event's deliveries have their own
			fmt.Fprintf(tw, "  attempts\t%d spent, %d deliveries made\n", rec.Attempts, rec.Deliveries)
			if state == outbox.StatePending {
				fmt.Fprintf(tw, "  next attempt\t%s\n", tsText(rec.NextAttemptAt))
			}
			if rec.LastStatus != 0 || rec.LastError != "" {
				fmt.Fprintf(tw, "  last outcome\t%s\n", lastOutcome(rec))
			}
			if rec.DeadReason != "" {
				fmt.Fprintf(tw, "  dead\t%s: %s\n", tsText(rec.DeadAt), rec.DeadReason)
			}
		}
		tw.Flush()
		writeDeliveries(w, rec)
	}
	if len(hist) == 0 {
		fmt.Fprintln(w, "history: no changelog entries kept for this ID (never seen, or trimmed)")
	} else {
		fmt.Fprintln(w, "history (changelog, oldest first):")
		for i, h := range describeHistory(hist) {
			fmt.Fprintf(w, "  %s  lsn %-6d %s\n", tsText(hist[i].Time), h.LSN, h.What)
		}
	}
	writeAttempts(w, attempts)
	return nil
}

func stateString(s outbox.State) string {
	switch s {
	case outbox.StatePending:
		return "pending"
	case outbox.StateDead:
		return "dead"
	case outbox.StateDelivered:
		return "delivered (tombstone kept for deduplication)"
	case outbox.StateDeleted:
		return "deleted by an operator (tombstone kept; the ID stays reserved)"
	}
	return "not found"
}

// listUpTo returns the first limit events opt lists, in ID order, and
// whether more follow; it pages through List, whose pages are smaller.
func listUpTo(ctx context.Context, o *outbox.Outbox, opt outbox.ListOptions, limit int) ([]outbox.Event, bool, error) {
	var evs []outbox.Event
	after := ""
	for {
		opt.After, opt.Limit = after, min(limit-len(evs), outbox.MaxListLimit)
		page, next, err := o.List(ctx, opt)
		if err != nil {
			return nil, false, err
		}
		evs = append(evs, page...)
		if next == "" || len(evs) >= limit {
			return evs, next != "", nil
		}
		after = next
	}
}

// listFilter is what inspect's summary lists: only one state's events
// ("pending", "dead", "unrouted"; "" for pending and dead), of one topic.
type listFilter struct {
	only, topic string
}

// inspectSummary writes the store's counts, its endpoints and the first
// events of each list, as text or as JSON.
func inspectSummary(w io.Writer, o *outbox.Outbox, f listFilter, limit int, asJSON bool) error {
	ctx := context.Background()
	stats := o.Stats()
	eps, err := o.Endpoints(ctx)
	if err != nil {
		return err
	}
	lists, more, err := summaryLists(ctx, o, stats, f, limit)
	if err != nil {
		return err
	}
	if asJSON {
		return writeSummaryJSON(w, o.Path(), stats, eps, lists)
	}
	writeStatsText(w, o.Path(), stats)
	writeEndpointsText(w, eps)
	for _, ls := range listStates {
		if recs, ok := lists[ls.name]; ok {
			writeEventsText(w, ls.name, recs, more[ls.name], f.topic, limit)
		}
	}
	return nil
}

// summaryLists lists up to limit events of each state f asks for, by name,
// and whether there are more.
func summaryLists(ctx context.Context, o *outbox.Outbox, stats outbox.Stats, f listFilter, limit int) (map[string][]outbox.Event, map[string]bool, error) {
	lists := map[string][]outbox.Event{}
	more := map[string]bool{}
	for _, s := range listStates {
		if f.only != s.name && (f.only != "" || s.name == "unrouted" && stats.Unrouted == 0) {
			// Unrouted events are listed when there are any, or on demand.
			continue
		}
		evs, m, err := listUpTo(ctx, o, outbox.ListOptions{State: s.state, Unrouted: s.name == "unrouted", Topic: f.topic}, limit)
		if err != nil {
			return nil, nil, err
		}
		lists[s.name], more[s.name] = evs, m
	}
	return lists, more, nil
}

// writeSummaryJSON writes the summary as one JSON object.
func writeSummaryJSON(w io.Writer, path string, stats outbox.Stats, eps []outbox.EndpointState, lists map[string][]outbox.Event) error {
	views := map[string][]*recordView{}
	for name, recs := range lists {
		v := make([]*recordView, len(recs))
		for i := range recs {
			v[i] = viewRecord(&recs[i])
		}
		views[name] = v
	}
	epViews := make([]endpointView, len(eps))
	for i, ep := range eps {
		epViews[i] = endpointView{
			Name: ep.Name, Disabled: ep.Disabled, DisabledReason: ep.DisabledReason, DisabledAt: ts(ep.DisabledAt),
			ThrottledUntil: ts(ep.ThrottledUntil), FailureStreak: ep.FailureStreak, LastStatus: ep.LastStatus,
			Breaker: ep.Breaker.String(), BreakerUntil: ts(ep.BreakerUntil), BreakerOpens: ep.BreakerOpens,
		}
	}
	return writeJSONTo(w, struct {
		File      string                   `json:"file"`
		Stats     statsView                `json:"stats"`
		Endpoints []endpointView           `json:"endpoints"`
		Events    map[string][]*recordView `json:"events"`
	}{path, statsView{
		Pending: stats.Pending, Dead: stats.Dead, Unrouted: stats.Unrouted, Tombstones: stats.Tombstones, Endpoints: stats.Endpoints,
		ChangelogEntries: stats.ChangelogEntries, FileSize: stats.FileSize, LastLSN: stats.LastLSN, ShippedLSN: stats.ShippedLSN,
		KeyIndex: stats.KeyIndex,
	}, epViews, views})
}

// writeStatsText writes the store's counts.
func writeStatsText(w io.Writer, path string, stats outbox.Stats) {
	fmt.Fprintf(w, "database %s (%d bytes)\n", path, stats.FileSize)
	fmt.Fprintf(w, "  pending %d, dead %d, unrouted %d, tombstones %d, changelog entries %d (last LSN %d, shipped %d)\n",
		stats.Pending, stats.Dead, stats.Unrouted, stats.Tombstones, stats.ChangelogEntries, stats.LastLSN, stats.ShippedLSN)
	if stats.Unrouted > 0 {
		// The backfill's state, as far as a stopped server's file has it:
		// what waits, which serve routes in the background when it starts.
		fmt.Fprintf(w, "  backfill: %d topic events wait for a subscription; serve routes those that one matches in the background from its start (--unrouted lists them)\n", stats.Unrouted)
	}
	if stats.KeyIndex {
		fmt.Fprintln(w, "  key index kept (per-key order)")
	} else {
		fmt.Fprintln(w, "  no key index (serve without --ordered; --ordered rebuilds it at start)")
	}
}

// writeEndpointsText writes the endpoints' table, when there are any.
func writeEndpointsText(w io.Writer, eps []outbox.EndpointState) {
	if len(eps) == 0 {
		return
	}
	fmt.Fprintln(w, "endpoints:")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  NAME\tSTATE\tBREAKER\tFAILURE STREAK\tLAST STATUS")
	for _, ep := range eps {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%d\t%d\n", ep.Name, endpointStateText(ep), breakerText(ep), ep.FailureStreak, ep.LastStatus)
	}
	tw.Flush()
}

// endpointStateText is the STATE column of an endpoint.
func endpointStateText(ep outbox.EndpointState) string {
	switch {
	case ep.Disabled:
		return "disabled since " + tsText(ep.DisabledAt) + ": " + ep.DisabledReason
	case ep.ThrottledUntil.After(time.Now()):
		return "throttled until " + tsText(ep.ThrottledUntil)
	}
	return "enabled"
}

// breakerText is the BREAKER column of an endpoint.
func breakerText(ep outbox.EndpointState) string {
	switch ep.Breaker {
	case outbox.BreakerOpen:
		return fmt.Sprintf("open until %s (opened %d times in a row)", tsText(ep.BreakerUntil), ep.BreakerOpens)
	case outbox.BreakerHalfOpen:
		return fmt.Sprintf("half-open since %s (opened %d times in a row)", tsText(ep.BreakerUntil), ep.BreakerOpens)
	}
	return ep.Breaker.String()
}

// writeEventsText writes the table of one list: name is "pending", "dead"
// or "unrouted"; more, that the list goes on past recs.
func writeEventsText(w io.Writer, name string, recs []outbox.Event, more bool, topic string, limit int) {
	of := ""
	if topic != "" {
		of = " of topic " + topic
	}
	fmt.Fprintf(w, "%s events%s (first %d by ID):\n", name, of, limit)
	if len(recs) == 0 {
		fmt.Fprintln(w, "  none")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	switch name {
	case "pending":
		fmt.Fprintln(tw, "  ID\tDESTINATION\tTOPIC\tENDPOINT\tATTEMPTS\tNEXT ATTEMPT\tLAST")
	case "dead":
		fmt.Fprintln(tw, "  ID\tDESTINATION\tTOPIC\tENDPOINT\tATTEMPTS\tDEAD AT\tREASON")
	case "unrouted":
		fmt.Fprintln(tw, "  ID\tTOPIC\tKEY\tCREATED\tDEAD-LETTERED AT")
	}
	for i := range recs {
		r := &recs[i]
		switch name {
		case "pending":
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%d\t%s\t%s\n", r.ID, destinationText(r), orDash(r.Topic), orDash(r.Endpoint),
				r.Attempts, tsText(r.NextAttemptAt), oneLine(lastOutcome(r)))
		case "dead":
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%d\t%s\t%s\n", r.ID, destinationText(r), orDash(r.Topic), orDash(r.Endpoint),
				r.Attempts, tsText(r.DeadAt), oneLine(r.DeadReason))
		case "unrouted":
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", r.ID, r.Topic, orDash(r.Key), tsText(r.CreatedAt), tsText(r.NextAttemptAt))
		}
	}
	tw.Flush()
	if more {
		fmt.Fprintf(w, "  ... more (use --limit, or --state %s --json)\n", name)
	}
}

// listStates are the lists of inspect's summary, in order.
var listStates = []struct {
	name  string
	state outbox.State
}{{"pending", outbox.StatePending}, {"dead", outbox.StateDead}, {"unrouted", 0}}

// destinationText is the DESTINATION column of a listed event: "-" for a
// delivery of a topic event, whose endpoint has its own column.
func destinationText(r *outbox.Event) string {
	if r.Topic != "" {
		return "-"
	}
	return r.Destination
}

// lastOutcome describes an event's last attempt: its status and error.
func lastOutcome(r *outbox.Event) string {
	switch {
	case r.LastStatus == 0 && r.LastError == "":
		return "-"
	case r.LastStatus == 0:
		return "no response: " + r.LastError
	case r.LastError == "" || strings.HasPrefix(r.LastError, fmt.Sprintf("status %d", r.LastStatus)):
		return cmp.Or(r.LastError, fmt.Sprintf("status %d", r.LastStatus))
	}
	return fmt.Sprintf("status %d: %s", r.LastStatus, r.LastError)
}

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > 100 {
		s = s[:100] + "..."
	}
	return s
}

func writeJSONTo(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
