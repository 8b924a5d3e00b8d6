package outbox_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/outboxd/outbox/outbox"
	"github.com/outboxd/outbox/store"
)

// namesSink lists configured endpoints, in no particular order.
type namesSink struct {
	sinkFunc
	names []string
}

func (s namesSink) EndpointNames() []string { return s.names }

// pagerSink lists them by page too.
type pagerSink struct{ namesSink }

func (s pagerSink) EndpointNamesAfter(after string, limit int) []string {
	names := slices.Sorted(slices.Values(s.names))
	i, found := slices.BinarySearch(names, after)
	if found {
		i++
	}
	return names[i:min(len(names), i+limit)]
}

// EndpointsPage pages through the stored states and the Sink's names
// merged by name: every endpoint once, in order, the stored state for one
// that has both, with or without EndpointPager.
func TestEndpointsPage(t *testing.T) {
	var listed []string
	for i := 249; i >= 0; i-- {
		if i%3 != 0 || i%5 == 0 {
			listed = append(listed, fmt.Sprintf("ep-%03d", i))
		}
	}
	deliver := sinkFunc(func(context.Context, *outbox.Delivery) outbox.Result {
		return outbox.Result{Action: outbox.ActionSuccess}
	})
	for _, sink := range []outbox.Sink{namesSink{deliver, listed}, pagerSink{namesSink{deliver, listed}}} {
		t.Run(fmt.Sprintf("%T", sink), func(t *testing.T) {
			o, _ := open(t, testConfig(sink))
			ctx := context.Background()
			for i := 0; i < 250; i += 3 { // stored: ep-000, ep-003, ...
				ep := store.EndpointState{Name: fmt.Sprintf("ep-%03d", i), FailureStreak: 7}
				if err := o.StoreForTest().PutEndpoint(ctx, ep); err != nil {
					t.Fatal(err)
				}
			}
			var got []string
			after, pages := "", 0
			for {
				eps, next, err := o.EndpointsPage(ctx, after, 100)
				if err != nil {
					t.Fatal(err)
				}
				pages++
				for _, e := range eps {
					got = append(got, e.Name)
					var i int
					fmt.Sscanf(e.Name, "ep-%03d", &i)
					if stored := i%3 == 0; stored != (e.FailureStreak == 7) {
						t.Errorf("%s: failure streak %d, stored %v", e.Name, e.FailureStreak, stored)
					}
				}
				if next == "" {
					if len(eps) != 50 {
						t.Errorf("last page: %d endpoints, want 50", len(eps))
					}
					break
				}
				if len(eps) != 100 || next != eps[99].Name {
					t.Fatalf("page %d: %d endpoints, next %q, want 100 and the last name", pages, len(eps), next)
				}
				after = next
			}
			want := make([]string, 250)
			for i := range want {
				want[i] = fmt.Sprintf("ep-%03d", i)
			}
			if pages != 3 || !slices.Equal(got, want) {
				t.Fatalf("%d pages of %v, want 3 pages of ep-000 to ep-249", pages, got)
			}
			all, err := o.Endpoints(ctx)
			if err != nil || len(all) != 250 || all[0].Name != "ep-000" || all[0].FailureStreak != 7 {
				t.Fatalf("Endpoints: %d, %v", len(all), err)
			}
			if eps, next, err := o.EndpointsPage(ctx, "ep-248", 0); err != nil || len(eps) != 1 || eps[0].Name != "ep-249" || next != "" {
				t.Fatalf("the page after ep-248: %+v %q %v", eps, next, err)
			}
		})
	}
}
