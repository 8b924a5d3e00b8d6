package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/outboxd/outbox/outbox"
)

// archivedView is an archived delivery as inspect --archive shows it.
type archivedView struct {
	recordView
	DeliveredAt string `json:"delivered_at"`
}

// inspectArchive serves inspect --archive: the delivered events kept in
// the file's archive (delivery.retain), a page at a time, offline.
func inspectArchive(e Env, args []string) int {
	fs := flag.NewFlagSet("outboxd inspect --archive", flag.ContinueOnError)
	fs.SetOutput(e.Stderr)
	fs.Bool("archive", true, "list the delivered events kept in the archive (delivery.retain)")
	db := fs.String("db", "./outboxd.db", "database `file`")
	var q outbox.ArchiveQuery
	fs.StringVar(&q.Topic, "topic", "", "only the deliveries of this topic or `pattern` (order.*)")
	fs.StringVar(&q.Endpoint, "endpoint", "", "only the deliveries to this `endpoint`")
	fs.StringVar(&q.KeyPrefix, "key-prefix", "", "only the deliveries of events whose key starts with this")
	from := fs.String("from", "", "only the deliveries made at or after this RFC 3339 `time`")
	to := fs.String("to", "", "only the deliveries made before this RFC 3339 `time`")
	fs.StringVar(&q.After, "cursor", "", "continue after the page that printed this `cursor`")
	fs.IntVar(&q.Limit, "limit", 20, "deliveries listed (at most 1000)")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if msg := checkArchiveArgs(fs, &q, *from, *to); msg != "" {
		fmt.Fprintf(e.Stderr, "outboxd inspect: %s\n", msg)
		return exitUsage
	}
	o, ok := openOffline("inspect", *db, e.Stderr)
	if !ok {
		return exitError
	}
	defer o.Stop(context.Background()) // read-only: nothing to flush
	evs, next, err := o.SearchArchive(context.Background(), q)
	if err != nil {
		fmt.Fprintf(e.Stderr, "outboxd inspect: %v\n", err)
		return exitError
	}
	var out bytes.Buffer
	writeArchive(&out, evs, next, *asJSON)
	if _, err := out.WriteTo(e.Stdout); err != nil {
		fmt.Fprintf(e.Stderr, "outboxd inspect: %v\n", err)
		return exitError
	}
	return exitOK
}

// checkArchiveArgs checks inspect --archive's arguments and sets q's times;
// it returns what is wrong, "" when nothing is.
func checkArchiveArgs(fs *flag.FlagSet, q *outbox.ArchiveQuery, from, to string) string {
	if fs.NArg() > 0 {
		return fmt.Sprintf("unexpected argument %q", fs.Arg(0))
	}
	if q.Topic != "" {
		if err := outbox.ValidateTopicPattern(q.Topic); err != nil {
			return fmt.Sprintf("--topic %q: %v", q.Topic, err)
		}
	}
	if q.Limit < 1 || q.Limit > outbox.MaxListLimit {
		return fmt.Sprintf("--limit: must be from 1 to %d", outbox.MaxListLimit)
	}
	for _, t := range []struct {
		name, s string
		dst     *time.Time
	}{{"--from", from, &q.From}, {"--to", to, &q.To}} {
		if t.s == "" {
			continue
		}
		tm, err := time.Parse(time.RFC3339Nano, t.s)
		if err != nil {
			return fmt.Sprintf("%s: want an RFC 3339 time such as 2026-01-02T15:04:05Z, got %q", t.name, t.s)
		}
		*t.dst = tm
	}
	return ""
}

// writeArchive writes one page of archived deliveries, and the cursor of
// the next page when there is one.
func writeArchive(w io.Writer, evs []outbox.ArchivedEvent, next string, asJSON bool) {
	if asJSON {
		views := make([]archivedView, len(evs))
		for i := range evs {
			views[i] = archivedView{recordView: *viewRecord(&evs[i].Event), DeliveredAt: ts(evs[i].DeliveredAt)}
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(struct {
			Events []archivedView `json:"events"`
			Next   string         `json:"next"`
		}{views, next})
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "DELIVERED\tID\tENDPOINT\tTOPIC\tKEY\tSTATUS\tDELIVERIES\tBYTES")
	for _, a := range evs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\n", tsText(a.DeliveredAt), a.ID, a.Endpoint,
			orDash(a.Topic), orDash(a.Key), a.LastStatus, a.Deliveries, len(a.Payload))
	}
	_ = tw.Flush()
	if next != "" {
		fmt.Fprintf(w, "more: outboxd inspect --archive --cursor %s (with the same filters)\n", next)
	}
}
