package outbox

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/outboxd/outbox/outbox/internal/route"
	"github.com/outboxd/outbox/store"
)

// ArchiveQuery selects the archived deliveries SearchArchive returns (see
// Config.Retain). Zero fields match everything.
type ArchiveQuery struct {
	// Topic keeps the deliveries of events whose topic matches it: a topic
	// or a subscription pattern ("order.*", "*"), as Subscription.Topics
	// match.
	Topic string
	// Endpoint keeps the deliveries made to that endpoint.
	Endpoint string
	// KeyPrefix keeps the deliveries of events whose Key starts with it.
	KeyPrefix string
	// From and To keep the deliveries made in [From, To).
	From, To time.Time
	// After is the cursor: pass the previous call's next value to get the
	// following page.
	After string
	// Limit caps the deliveries returned. Default 100, at most 1000.
	Limit int
}

// ArchivedEvent is one delivery kept in the archive: the event as it was
// delivered to Endpoint (State StateDelivered, Deliveries counting the
// attempt that delivered it, LastStatus its answer), and when.
type ArchivedEvent struct {
	Event
	// DeliveredAt is when the delivery's outcome was committed.
	DeliveredAt time.Time
}

// SearchArchive returns one page of the archived deliveries q selects, and
// the cursor of the next page ("" after the last). It reads one range of
// one index of the archive: the deliveries of one key prefix (in key,
// then time order), else of one endpoint, else of one topic or topic
// pattern (in topic, then time order), else all of them in the order they
// were delivered; the other fields filter what that range holds. A page
// reads a bounded number of entries, so a page of a query whose filters
// the index does not decide may hold fewer than Limit deliveries and
// still have a next cursor. Without Config.Retain nothing is archived and
// every page is empty. A malformed Topic or cursor is ErrInvalid.
func (o *Outbox) SearchArchive(ctx context.Context, q ArchiveQuery) ([]ArchivedEvent, string, error) {
	if err := o.enter(); err != nil {
		return nil, "", err
	}
	defer o.ops.Done()
	if err := ctx.Err(); err != nil {
		return nil, "", err
	}
	sq, err := storeArchiveQuery(q)
	if err != nil {
		return nil, "", err
	}
	page, err := o.st.SearchArchive(sq)
	if errors.Is(err, store.ErrInvalid) {
		return nil, "", fmt.Errorf("outbox: search archive: %w: cursor: not the next of a page of this search", ErrInvalid)
	} else if err != nil {
		return nil, "", mapErr("search archive", "", err)
	}
	evs := make([]ArchivedEvent, len(page.Records))
	for i, a := range page.Records {
		evs[i] = ArchivedEvent{Event: eventFromRecord(&a.Record, StateDelivered), DeliveredAt: a.DeliveredAt}
	}
	return evs, page.Next, nil
}

// storeArchiveQuery turns q into the store's query: a pattern "p.*" reads
// the topics under the prefix "p.", and "*" every topic.
func storeArchiveQuery(q ArchiveQuery) (store.ArchiveQuery, error) {
	sq := store.ArchiveQuery{Endpoint: q.Endpoint, KeyPrefix: q.KeyPrefix, From: q.From, To: q.To, After: q.After,
		Limit: min(q.Limit, MaxListLimit)}
	if sq.Limit <= 0 {
		sq.Limit = DefaultListLimit
	}
	if q.Topic == "" || q.Topic == "*" {
		return sq, nil
	}
	if err := route.ValidateTopicPattern(q.Topic); err != nil {
		return sq, fmt.Errorf("outbox: search archive: %w: topic %s", ErrInvalid, err)
	}
	if prefix, ok := strings.CutSuffix(q.Topic, "*"); ok {
		sq.TopicPrefix = prefix
	} else {
		sq.Topic = q.Topic
	}
	return sq, nil
}
