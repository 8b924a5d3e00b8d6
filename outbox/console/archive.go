package console

import (
	"context"
	"fmt"
	"net/http"
	"net/url"

	"github.com/outboxd/outbox/outbox"
)

// archiveSearcher is the optional capability of a Backend that keeps
// delivered events (the history page), as *outbox.Outbox does.
type archiveSearcher interface {
	SearchArchive(ctx context.Context, q outbox.ArchiveQuery) ([]outbox.ArchivedEvent, string, error)
}

// rowPreviewBytes is the most bytes of a payload a history row shows.
const rowPreviewBytes = 2 << 10

// historyFilter is the history page's query, as typed.
type historyFilter struct {
	Topic, Endpoint, Key, From, To string
}

// archivedRow is one delivery kept in the archive, every field safe to
// show.
type archivedRow struct {
	ID, IDText  string // ID for links, IDText to show
	Topic       string
	Destination string // a destination event's, when it has no topic
	Key         string
	Endpoint    string
	Delivered   string
	Created     string
	Deliveries  int
	LastStatus  int
	Headers     []pair
	Payload     preview
}

// historyData is one page of the history page. Off says the Backend keeps
// no archive, and the page says how to turn retention on.
type historyData struct {
	Off               bool
	Filter            historyFilter
	Rows              []archivedRow
	NextURL, FirstURL string
	IsFirst           bool
}

// archiveOf returns the Backend's archive, ok false when it keeps none: it
// cannot search one, or it is an *outbox.Outbox without Config.Retain.
func (c *Console) archiveOf() (archiveSearcher, bool) {
	if o, isOutbox := c.b.(*outbox.Outbox); isOutbox && o.Config().Retain <= 0 {
		return nil, false
	}
	as, ok := c.b.(archiveSearcher)
	return as, ok
}

// archive serves the history page: a page of the delivered events the
// archive keeps, filtered by topic or pattern, endpoint, key prefix and
// delivery time, paged by SearchArchive's cursor.
func (c *Console) archive(r *http.Request) (string, string, pageData, error) {
	as, ok := c.archiveOf()
	if !ok {
		return "history", "history", pageData{Title: "History", Data: historyData{Off: true}}, nil
	}
	q := r.URL.Query()
	f := historyFilter{Topic: q.Get("topic"), Endpoint: q.Get("endpoint"), Key: q.Get("key"), From: q.Get("from"), To: q.Get("to")}
	after := q.Get("after")
	aq, err := archiveQuery(f, after)
	if err != nil {
		return "", "", pageData{}, err
	}
	evs, next, err := as.SearchArchive(r.Context(), aq)
	if err != nil {
		return "", "", pageData{}, err
	}
	d := historyData{Rows: make([]archivedRow, len(evs)), IsFirst: after == ""}
	for i := range evs {
		d.Rows[i] = archivedRowOf(&evs[i])
	}
	v := url.Values{}
	for k, s := range map[string]string{"topic": f.Topic, "endpoint": f.Endpoint, "key": f.Key, "from": f.From, "to": f.To} {
		if s != "" {
			v.Set(k, s)
		}
	}
	d.FirstURL = c.base + "/history?" + v.Encode()
	if next != "" {
		v.Set("after", next)
		d.NextURL = c.base + "/history?" + v.Encode()
	}
	d.Filter = historyFilter{Topic: text(f.Topic), Endpoint: text(f.Endpoint), Key: text(f.Key), From: text(f.From), To: text(f.To)}
	return "history", "history", pageData{Title: "History", Data: d}, nil
}

// archiveQuery checks the history page's filter and makes it a search of
// pageSize deliveries after the cursor after.
func archiveQuery(f historyFilter, after string) (outbox.ArchiveQuery, error) {
	aq := outbox.ArchiveQuery{Topic: f.Topic, Endpoint: f.Endpoint, KeyPrefix: f.Key, After: after, Limit: pageSize}
	if f.Topic != "" {
		if err := outbox.ValidateTopicPattern(f.Topic); err != nil {
			return aq, badRequest{fmt.Sprintf("topic: %q %v", text(f.Topic), err)}
		}
	}
	var err error
	if aq.From, err = parseTime("from", f.From); err != nil {
		return aq, err
	}
	if aq.To, err = parseTime("to", f.To); err != nil {
		return aq, err
	}
	if !aq.From.IsZero() && !aq.To.IsZero() && aq.To.Before(aq.From) {
		return aq, badRequest{"to: must not be before from"}
	}
	return aq, nil
}

func archivedRowOf(a *outbox.ArchivedEvent) archivedRow {
	row := archivedRow{
		ID: a.ID, IDText: text(a.ID), Topic: text(a.Topic), Key: text(a.Key), Endpoint: text(a.Endpoint),
		Delivered: fmtTime(a.DeliveredAt), Created: fmtTime(a.CreatedAt), Deliveries: a.Deliveries,
		LastStatus: a.LastStatus, Headers: pairs(a.Headers), Payload: makePreview(a.Payload, rowPreviewBytes),
	}
	if a.Topic == "" {
		row.Destination = text(a.Destination)
	}
	return row
}
