package records

import (
	"testing"
	"time"

	"github.com/outboxd/outbox/outbox/internal/route"
	"github.com/outboxd/outbox/store"
)

var lim = Limits{MaxIDBytes: 16, MaxHeaderBytes: 64, MaxPayloadBytes: 8, MaxSchedule: time.Hour}

func TestCheckRefusesEachField(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		name  string
		f     Fields
		field string
	}{
		{"long id", Fields{ID: "0123456789abcdefX", Destination: "d"}, "id"},
		{"control in key", Fields{Key: "a\nb", Destination: "d"}, "key"},
		{"no destination", Fields{}, "destination"},
		{"dot destination", Fields{Destination: "."}, "destination"},
		{"dots destination", Fields{Destination: "...."}, "destination"},
		{"leading dot destination", Fields{Destination: ".orders"}, "destination"},
		{"topic and destination", Fields{Topic: "a.b", Destination: "d"}, "topic"},
		{"bad topic", Fields{Topic: "a..b"}, "topic"},
		{"lower-case method", Fields{Destination: "d", Method: "post"}, "method"},
		{"reserved header", Fields{Destination: "d", Headers: map[string]string{"host": "x"}}, "headers"},
		{"same header twice", Fields{Destination: "d", Headers: map[string]string{"X-A": "1", "x-a": "2"}}, "headers"},
		{"large payload", Fields{Destination: "d", Payload: make([]byte, 9)}, "payload"},
		{"past the horizon", Fields{Destination: "d", DeliverAt: now.Add(2 * time.Hour)}, "deliver_at"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, bad := Check(3, &tt.f, lim, nil, now)
			if bad == nil || bad.Field != tt.field || bad.Index != 3 {
				t.Fatalf("Check = %+v, want field %q at index 3", bad, tt.field)
			}
		})
	}
}

func TestCheckDefaultsAndResolves(t *testing.T) {
	f := Fields{Destination: "orders", DeliverAt: time.Now().Add(-time.Hour)}
	ep, bad := Check(0, &f, lim, func(string) (string, error) { return "ep", nil }, time.Now())
	if bad != nil || ep != "ep" || f.Method != "POST" {
		t.Fatalf("Check = %q, %v, method %q; want ep, nil, POST", ep, bad, f.Method)
	}
}

func TestFirstConflict(t *testing.T) {
	same := []Fields{{ID: "a", Destination: "d"}, {ID: "b"}, {ID: "a", Destination: "d", Method: "POST"}}
	if id, found := FirstConflict(same); found {
		t.Fatalf("FirstConflict(same content) = %q", id)
	}
	other := append(same, Fields{ID: "a", Destination: "d", Payload: []byte("x")})
	if id, found := FirstConflict(other); !found || id != "a" {
		t.Fatalf("FirstConflict = %q, %v; want a, true", id, found)
	}
}

func TestUpdateReschedulesOnlyForANewDeliverAt(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	cur := &store.Record{ID: "a", Attempts: 2, NextAttemptAt: now.Add(time.Minute)}
	r := Update(cur, Fields{Destination: "d2", Payload: []byte("p")}, "d2", now)
	if r.Attempts != 2 || !r.NextAttemptAt.Equal(cur.NextAttemptAt) || r.Destination != "d2" {
		t.Fatalf("same DeliverAt: %+v", r)
	}
	at := now.Add(time.Hour)
	if r = Update(cur, Fields{DeliverAt: at}, "d", now); !r.NextAttemptAt.Equal(at) {
		t.Fatalf("new DeliverAt: next attempt %v, want %v", r.NextAttemptAt, at)
	}
}

func TestBatchFansOutAndFoldsStatuses(t *testing.T) {
	rt := route.New([]route.Rule{{Endpoint: "e1", Topics: []string{"*"}}, {Endpoint: "e2", Topics: []string{"*"}}})
	c := &BatchConfig{Limits: lim, Router: func() *route.Router { return rt }}
	now := time.Now()
	b, err := NewBatch([]Fields{{ID: "a", Destination: "d"}, {ID: "b", Topic: "t"}}, c, now, now)
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Recs) != 3 || len(b.IDs) != 2 || b.Unrouted {
		t.Fatalf("batch: %d records, IDs %v, unrouted %v; want 3, [a b], false", len(b.Recs), b.IDs, b.Unrouted)
	}
	got := b.PerEvent([]store.InsertStatus{store.Inserted, store.Inserted, store.Duplicate})
	if len(got) != 2 || got[0] != store.Inserted || got[1] != store.Duplicate {
		t.Fatalf("PerEvent = %v", got)
	}
	if ins, dups := Count(got); ins != 1 || dups != 1 {
		t.Fatalf("Count = %d, %d; want 1, 1", ins, dups)
	}

	c.Router = func() *route.Router { return route.New(nil) }
	if b, _ = NewBatch([]Fields{{Topic: "t"}}, c, now, now); len(b.Recs) != 1 || !b.Unrouted {
		t.Fatalf("kept unrouted: %d records, unrouted %v", len(b.Recs), b.Unrouted)
	}
	c.DropUnrouted = true
	if b, _ = NewBatch([]Fields{{Topic: "t"}}, c, now, now); len(b.Recs) != 0 || b.Dropped != 1 {
		t.Fatalf("dropped: %d records, dropped %d", len(b.Recs), b.Dropped)
	}
}

func TestCheckSubscription(t *testing.T) {
	if f, r := CheckSubscription("e", []string{"order.*"}, nil, 10, nil); f != "" {
		t.Fatalf("valid subscription refused: %s: %s", f, r)
	}
	for _, tt := range []struct {
		endpoint string
		topics   []string
		headers  map[string]string
		field    string
	}{
		{"", []string{"a"}, nil, "endpoint"},
		{"endpoint-too-long", []string{"a"}, nil, "endpoint"},
		{"..", []string{"a"}, nil, "endpoint"},
		{".e", []string{"a"}, nil, "endpoint"},
		{"e", nil, nil, "topics"},
		{"e", []string{"a.*.b"}, nil, "topics"},
		{"e", []string{"a"}, map[string]string{"bad name": "v"}, "headers"},
	} {
		if f, _ := CheckSubscription(tt.endpoint, tt.topics, tt.headers, 10, nil); f != tt.field {
			t.Errorf("CheckSubscription(%q, %v, %v) field %q, want %q", tt.endpoint, tt.topics, tt.headers, f, tt.field)
		}
	}
}
