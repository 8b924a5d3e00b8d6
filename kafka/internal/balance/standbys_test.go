package balance

import (
	"encoding/json"
	"reflect"
	"slices"
	"testing"

	kafkago "github.com/segmentio/kafka-go"
)

// standbyBalancer is the assignor of a group leader configured with n
// standby replicas on ingest topic "in" and changelog topic "cl".
func standbyBalancer(n int) Balancer {
	return Balancer{Topic: "in", ChangelogTopic: "cl", StandbyReplicas: n}
}

// groupOf builds the members (subscribed to both topics unless listed in
// ownersOnly) with their warm partitions, and the partitions of both topics.
func groupOf(members []string, warm map[string]Warm, parts int, ownersOnly ...string) ([]kafkago.GroupMember, []kafkago.Partition) {
	var ms []kafkago.GroupMember
	for _, id := range members {
		data, _ := json.Marshal(MemberData{Warm: warm[id]})
		topics := []string{"in", "cl"}
		if slices.Contains(ownersOnly, id) {
			topics = []string{"in"}
		}
		ms = append(ms, kafkago.GroupMember{ID: id, Topics: topics, UserData: data})
	}
	var ps []kafkago.Partition
	for p := range parts {
		ps = append(ps, kafkago.Partition{Topic: "in", ID: p}, kafkago.Partition{Topic: "cl", ID: p})
	}
	return ms, ps
}

// checkStandbys fails unless every partition has min(n, others) standbys,
// none on its owner, none twice, and every member's count of standbys is
// within one of every other's.
func checkStandbys(t *testing.T, got kafkago.GroupMemberAssignments, subs []string, parts, n int) {
	t.Helper()
	owner := map[int]string{}
	for m, topics := range got {
		for _, p := range topics["in"] {
			if o, ok := owner[p]; ok {
				t.Fatalf("partition %d owned by %s and %s", p, o, m)
			}
			owner[p] = m
		}
	}
	if len(owner) != parts {
		t.Fatalf("%d partitions owned, want %d: %v", len(owner), parts, got)
	}
	count := map[int]int{}
	lo, hi := parts*n, 0
	for _, m := range subs {
		sb := got[m]["cl"]
		lo, hi = min(lo, len(sb)), max(hi, len(sb))
		for _, p := range sb {
			if owner[p] == m {
				t.Errorf("%s is the owner and a standby of partition %d", m, p)
			}
			count[p]++
		}
		if !slices.IsSorted(sb) || len(slices.Compact(slices.Clone(sb))) != len(sb) {
			t.Errorf("%s: standbys %v not sorted or repeated", m, sb)
		}
	}
	for p := range parts {
		others := len(subs)
		if slices.Contains(subs, owner[p]) {
			others--
		}
		if want := min(n, others); count[p] != want {
			t.Errorf("partition %d has %d standbys, want %d (all: %v)", p, count[p], want, got)
		}
	}
	if hi-lo > 1 {
		t.Errorf("standby counts range from %d to %d: %v", lo, hi, got)
	}
}

// With StandbyReplicas, the leader gives each partition its standbys as the
// changelog topic's partition of the same number, on members other than
// its owner, evenly spread; members that keep no standbys (not subscribed
// to the changelog topic) get none.
func TestStandbyAssignmentSpreadsCopiesAwayFromTheOwner(t *testing.T) {
	for _, tc := range []struct {
		name       string
		members    []string
		n          int
		ownersOnly []string
	}{
		{name: "three members, one standby", members: []string{"a", "b", "c"}, n: 1},
		{name: "three members, two standbys", members: []string{"a", "b", "c"}, n: 2},
		{name: "more standbys asked than members", members: []string{"a", "b"}, n: 3},
		{name: "one member: nowhere to keep a standby", members: []string{"a"}, n: 1},
		{name: "a member that keeps none", members: []string{"a", "b", "c"}, n: 1, ownersOnly: []string{"c"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ms, ps := groupOf(tc.members, nil, 6, tc.ownersOnly...)
			got := standbyBalancer(tc.n).AssignGroups(ms, ps)
			var subs []string
			for _, m := range tc.members {
				if !slices.Contains(tc.ownersOnly, m) {
					subs = append(subs, m)
				}
			}
			checkStandbys(t, got, subs, 6, tc.n)
			for _, m := range tc.ownersOnly {
				if len(got[m]["cl"]) > 0 {
					t.Errorf("%s keeps no standbys but got %v", m, got[m]["cl"])
				}
			}
		})
	}
}

// Without StandbyReplicas nothing of the changelog topic is assigned, even
// when members subscribe to it (a leader that keeps no standbys in a group
// whose other members do).
func TestNoStandbysWithoutStandbyReplicas(t *testing.T) {
	ms, ps := groupOf([]string{"a", "b"}, nil, 4)
	got := standbyBalancer(0).AssignGroups(ms, ps)
	for m, topics := range got {
		if len(topics["cl"]) > 0 {
			t.Errorf("%s got standbys %v", m, topics["cl"])
		}
		if len(topics["in"]) != 2 {
			t.Errorf("%s owns %v, want two partitions", m, topics["in"])
		}
	}
}

// A lost member's partitions go to the members that kept them warm as
// standbys (their checkpoints are the most caught-up), and the standbys
// stay where their stores are when the group is unchanged.
func TestStandbyAssignmentFollowsWarmStores(t *testing.T) {
	b := standbyBalancer(1)
	// Generation 1: a, b, c; each owns two partitions and keeps two standbys.
	ms, ps := groupOf([]string{"a", "b", "c"}, nil, 6)
	g1 := b.AssignGroups(ms, ps)
	checkStandbys(t, g1, []string{"a", "b", "c"}, 6, 1)

	// Each member then holds warm what it owned (checkpointed at the
	// hand-over, offset 100) and its standbys (caught up to 100 too, or a
	// little behind).
	warm := map[string]Warm{}
	for m, topics := range g1 {
		warm[m] = Warm{}
		for _, p := range topics["in"] {
			warm[m][p] = 100
		}
		for _, p := range topics["cl"] {
			warm[m][p] = 99
		}
	}
	// The same members rejoin: nothing moves.
	ms, ps = groupOf([]string{"a", "b", "c"}, warm, 6)
	if g2 := b.AssignGroups(ms, ps); !reflect.DeepEqual(g2, g1) {
		t.Errorf("an unchanged group moved partitions or standbys:\n got %v\nwant %v", g2, g1)
	}

	// a is lost: each of its partitions goes to its standby.
	ms, ps = groupOf([]string{"b", "c"}, warm, 6)
	g3 := b.AssignGroups(ms, ps)
	checkStandbys(t, g3, []string{"b", "c"}, 6, 1)
	for _, p := range g1["a"]["in"] {
		var standby string
		for m, topics := range g1 {
			if slices.Contains(topics["cl"], p) {
				standby = m
			}
		}
		if !slices.Contains(g3[standby]["in"], p) {
			t.Errorf("a's partition %d went elsewhere than its standby %s: %v", p, standby, g3)
		}
	}
	// Every partition is owned by a member holding it warm: no rebuild.
	for m, topics := range g3 {
		for _, p := range topics["in"] {
			if _, ok := warm[m][p]; !ok {
				t.Errorf("%s owns partition %d without a warm store: %v", m, p, g3)
			}
		}
	}
}

// When the most caught-up holders of partitions are full, a partition
// moves along to another of its holders so that every partition that can
// land on a warm store does.
func TestWarmAssignmentFindsAWarmHomeForEveryPartition(t *testing.T) {
	// a holds 0 and 1 (most caught-up for both), b holds 1, c holds
	// nothing: quotas are one each. Greedy by partition would give 0 to a,
	// then 1 (whose best holder a is full) to b: both warm. Make it harder:
	// a is best for 0 and 1, b holds only 0.
	warm := map[string]Warm{"a": {0: 9, 1: 9}, "b": {0: 5}}
	got := assignWarm([]string{"a", "b", "c"}, []int{0, 1, 2}, warm)
	want := map[string][]int{"a": {1}, "b": {0}, "c": {2}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v: both warm partitions on warm stores", got, want)
	}
}
