package kafka

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/outboxd/outbox/internal/testkit"
)

// Each member learns the others, their advertised API addresses and the
// partitions assigned to them, and which member is itself; DescribeGroup
// tells an outsider the owner and lag of every partition.
func TestMembersAdvertiseTheirAPIAndPartitions(t *testing.T) {
	const parts, n = 4, 40
	c := newCluster(t, kfakeSeed(parts, "in")...)
	brokers := c.ListenAddrs()
	sink := newSwitchSink() // everything stays pending
	cfgA, cfgB := testConfig(brokers, "in"), testConfig(brokers, "in")
	cfgA.AdvertiseURL, cfgB.AdvertiseURL = "http://127.0.0.1:7001", "http://127.0.0.1:7002"
	a := startGroup(t, cfgA, groupStoreConfig(t.TempDir(), sink))
	b := startGroup(t, cfgB, groupStoreConfig(t.TempDir(), sink))
	testkit.WaitFor(t, 30*time.Second, "the partitions shared", func() bool {
		return activeCount(a) > 0 && activeCount(b) > 0 && activeCount(a)+activeCount(b) == parts
	})
	newProducer(t, brokers, "in").produce(t, records(0, n, 10)...)
	testkit.WaitFor(t, 30*time.Second, "every record pending", func() bool { return pendingOf(a)+pendingOf(b) == n })

	owned := func(g *Group) []int {
		var out []int
		for _, p := range g.Partitions() {
			out = append(out, p.Partition)
		}
		return out
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for name, g := range map[string]*Group{"a": a, "b": b} {
		var ms []Member
		testkit.WaitFor(t, 30*time.Second, name+" sees two members with their partitions", func() bool {
			var err error
			ms, err = g.Members(ctx)
			return err == nil && len(ms) == 2 && len(ms[0].Partitions)+len(ms[1].Partitions) == parts
		})
		byAPI := map[string]Member{}
		selves := 0
		for _, m := range ms {
			byAPI[m.API] = m
			if m.Self {
				selves++
			}
			if m.ClientID != DefaultClientID || m.Host == "" {
				t.Errorf("%s: member %+v, want the client ID and host", name, m)
			}
		}
		if selves != 1 {
			t.Errorf("%s: %d members marked self, want 1: %+v", name, selves, ms)
		}
		for api, g2 := range map[string]*Group{cfgA.AdvertiseURL: a, cfgB.AdvertiseURL: b} {
			m, ok := byAPI[api]
			if !ok {
				t.Fatalf("%s: no member advertises %s: %+v", name, api, ms)
			}
			if !slices.Equal(m.Partitions, owned(g2)) {
				t.Errorf("%s: member at %s has partitions %v, it owns %v", name, api, m.Partitions, owned(g2))
			}
			if m.Self != (g2 == g) {
				t.Errorf("%s: member at %s self=%v", name, api, m.Self)
			}
		}
	}

	cfg := testConfig(brokers, "in")
	st, err := DescribeGroup(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != "Stable" || len(st.Members) != 2 || len(st.Partitions) != parts {
		t.Fatalf("DescribeGroup: %+v", st)
	}
	var end int64
	for _, p := range st.Partitions {
		want := cfgA.AdvertiseURL
		if slices.Contains(owned(b), p.Partition) {
			want = cfgB.AdvertiseURL
		}
		if p.Owner == "" || p.API != want {
			t.Errorf("partition %d: owner %q at %q, want the member at %s", p.Partition, p.Owner, p.API, want)
		}
		if p.Lag != p.End-max(p.Committed, p.Start) || p.Lag < 0 {
			t.Errorf("partition %d: lag %d with committed %d start %d end %d", p.Partition, p.Lag, p.Committed, p.Start, p.End)
		}
		end += p.End
	}
	if end != n {
		t.Errorf("end offsets sum to %d, want the %d records produced", end, n)
	}
	cfg.Topic = ""
	if _, err := DescribeGroup(ctx, cfg); err == nil {
		t.Error("DescribeGroup without a topic: no error")
	}
}

func TestRecordPartitionReadsRecordIDs(t *testing.T) {
	if p, ok := RecordPartition("in", RecordID("in", 7, 42)); !ok || p != 7 {
		t.Errorf("RecordPartition of RecordID(in, 7, 42) = %d, %v", p, ok)
	}
	for _, id := range []string{"kafka:other:7:42", "kafka:in:7", "kafka:in:x:1", "kafka:in:-1:1", "kafka:in:1:y", "order-7", ""} {
		if p, ok := RecordPartition("in", id); ok {
			t.Errorf("RecordPartition(in, %q) = %d, want none", id, p)
		}
	}
}

// A rebalancing group describes its members without the addresses they
// announced: a member still in the group keeps the one of the last stable
// description; a member that was not in it has none.
func TestMembersKeepTheirAddressWhileTheGroupRebalances(t *testing.T) {
	known := []Member{{ID: "a", API: "http://a"}, {ID: "b", API: "http://b"}, {ID: "gone", API: "http://gone"}}
	ms := []Member{{ID: "a"}, {ID: "b", API: "http://b2"}, {ID: "new"}}
	withKnownAPIs(ms, known)
	want := []Member{{ID: "a", API: "http://a"}, {ID: "b", API: "http://b2"}, {ID: "new"}}
	if !slices.EqualFunc(ms, want, func(x, y Member) bool { return x.ID == y.ID && x.API == y.API }) {
		t.Errorf("members while rebalancing: %+v, want %+v", ms, want)
	}
}
