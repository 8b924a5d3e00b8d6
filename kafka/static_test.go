package kafka

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/outboxd/outbox/internal/testkit"
)

func TestStaticMismatchNamesWhatDiffers(t *testing.T) {
	member := func(static map[string]string) Member { return Member{static: static} }
	for _, c := range []struct {
		name    string
		members []Member
		want    []string
	}{
		{"alone", []Member{member(map[string]string{"a": "1"})}, nil},
		{"agree", []Member{member(map[string]string{"a": "1", "b": "2"}), member(map[string]string{"b": "2", "a": "1"})}, nil},
		{"none defined by any", []Member{member(map[string]string{}), member(map[string]string{})}, nil},
		{"one hash differs", []Member{
			member(map[string]string{"a": "1", "b": "2"}),
			member(map[string]string{"a": "1", "b": "3"}),
			member(map[string]string{"a": "1", "b": "2"}),
		}, []string{"b"}},
		{"defined by some only", []Member{
			member(map[string]string{"a": "1", "c": "9"}),
			member(map[string]string{"a": "1"}),
			member(map[string]string{"a": "1", "d": "4"}),
		}, []string{"c", "d"}},
		{"one defines none", []Member{member(map[string]string{"a": "1"}), member(map[string]string{})}, []string{"a"}},
		{"older members left out", []Member{
			member(map[string]string{"a": "1"}),
			member(nil),
			member(map[string]string{"a": "1"}),
		}, nil},
		{"only older members", []Member{member(nil), member(nil)}, nil},
	} {
		if got := staticMismatch(c.members); !slices.Equal(got, c.want) {
			t.Errorf("%s: staticMismatch = %v, want %v", c.name, got, c.want)
		}
	}
}

// Members announce their static hashes when they join; each learns from
// the coordinator which endpoints the others define differently, and a
// member that announces none changes nothing.
func TestGroupStaticMismatchAcrossMembers(t *testing.T) {
	const parts = 3
	c := newCluster(t, kfakeSeed(parts, "in")...)
	cfg := testConfig(c.ListenAddrs(), "in")
	cfg.ChangelogTopic = "in-changelog"
	member := func(static map[string]string) *Group {
		sc := groupStoreConfig(t.TempDir(), newSwitchSink())
		sc.StaticEndpoints = static
		return startGroup(t, cfg, sc)
	}
	mismatch := func(g *Group) ([]string, bool) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		differ, err := g.StaticMismatch(ctx)
		return differ, err == nil
	}
	reports := func(want []string, gs ...*Group) func() bool {
		return func() bool {
			for _, g := range gs {
				if got, ok := mismatch(g); !ok || !slices.Equal(got, want) {
					return false
				}
			}
			return true
		}
	}
	a := member(map[string]string{"orders": "1", "refunds": "2"})
	b := member(map[string]string{"orders": "1", "refunds": "3"})
	testkit.WaitFor(t, 30*time.Second, "both members naming refunds", func() bool {
		return activeCount(a)+activeCount(b) == parts && activeCount(a) > 0 && activeCount(b) > 0 &&
			reports([]string{"refunds"}, a, b)()
	})
	older := member(nil)
	testkit.WaitFor(t, 30*time.Second, "a member without hashes changing nothing", func() bool {
		return activeCount(a) == 1 && activeCount(b) == 1 && activeCount(older) == 1 &&
			reports([]string{"refunds"}, a, b, older)()
	})
}
