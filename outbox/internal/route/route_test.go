package route

import (
	"slices"
	"testing"
)

func TestMatches(t *testing.T) {
	for _, tc := range []struct {
		pattern, topic string
		want           bool
	}{
		{"*", "order.paid", true},
		{"order.*", "order.paid", true},
		{"order.*", "order.paid.eu", true},
		{"order.*", "order", false},
		{"order.*", "orders.paid", false},
		{"order.paid", "order.paid", true},
		{"order.paid", "order.paid.eu", false},
	} {
		if got := Matches(tc.pattern, tc.topic); got != tc.want {
			t.Errorf("Matches(%q, %q) = %v, want %v", tc.pattern, tc.topic, got, tc.want)
		}
	}
}

func TestEndpoints(t *testing.T) {
	rt := New([]Rule{
		{Endpoint: "b", Topics: []string{"order.*"}},
		{Endpoint: "a", Topics: []string{"*"}, Headers: map[string]string{"x-region": "eu"}},
		{Endpoint: "b", Topics: []string{"order.paid"}},
	})
	if got := rt.Endpoints("order.paid", nil); !slices.Equal(got, []string{"b"}) {
		t.Errorf("without the header: %q", got)
	}
	if got := rt.Endpoints("order.paid", map[string]string{"X-Region": "eu"}); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("with the header: %q", got)
	}
}
