package admin

import (
	"testing"
	"time"

	"github.com/outboxd/outbox/store"
)

func TestListFilter(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r := &store.Record{ID: "a", Key: "user-1", Destination: "d", CreatedAt: t0}
	tests := []struct {
		f    ListFilter
		want bool
	}{
		{ListFilter{}, true},
		{ListFilter{Unrouted: true}, false},
		{ListFilter{Destination: "d", KeyPrefix: "user-"}, true},
		{ListFilter{KeyPrefix: "order-"}, false},
		{ListFilter{Topic: "t"}, false},
		{ListFilter{CreatedFrom: t0, CreatedTo: t0.Add(time.Second)}, true},
		{ListFilter{CreatedTo: t0}, false},
	}
	for _, tt := range tests {
		if got := tt.f.Match(r); got != tt.want {
			t.Errorf("%+v.Match = %v, want %v", tt.f, got, tt.want)
		}
	}
}

func TestDeadFilter(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r := &store.Record{ID: "a", Destination: "d", LastStatus: 500, DeadAt: t0}
	tests := []struct {
		f    DeadFilter
		want bool
	}{
		{DeadFilter{}, true},
		{DeadFilter{Status: 500, From: t0}, true},
		{DeadFilter{Status: 404}, false},
		{DeadFilter{To: t0}, false},
		{DeadFilter{Destination: "other"}, false},
	}
	for _, tt := range tests {
		if got := tt.f.Match(r); got != tt.want {
			t.Errorf("%+v.Match = %v, want %v", tt.f, got, tt.want)
		}
	}
}
