package balance

import (
	"encoding/json"
	"reflect"
	"testing"

	kafkago "github.com/segmentio/kafka-go"
)

// The assignor gives each member its fair share and, within it, the
// partitions it holds warm (most caught-up holder first), so that only a
// lost member's partitions are rebuilt.
func TestWarmAssignmentKeepsPartitionsWhereTheirStoresAre(t *testing.T) {
	for _, tc := range []struct {
		name    string
		members []string
		warm    map[string]Warm
		want    map[string][]int
	}{
		{
			name:    "a survivor keeps its partitions, the lost member's are spread",
			members: []string{"a", "b"},
			warm:    map[string]Warm{"a": {1: 10, 4: 10}, "b": {2: 10, 5: 10}},
			want:    map[string][]int{"a": {0, 1, 4}, "b": {2, 3, 5}},
		},
		{
			name:    "a joining member takes what no one holds warm, then the overflow",
			members: []string{"a", "b", "c"},
			warm:    map[string]Warm{"a": {0: 1, 1: 1, 2: 1, 3: 1, 4: 1, 5: 1}},
			want:    map[string][]int{"a": {0, 1}, "b": {2, 3}, "c": {4, 5}},
		},
		{
			name:    "the most caught-up holder wins",
			members: []string{"a", "b", "c"},
			warm:    map[string]Warm{"a": {0: 5}, "b": {0: 9}},
			want:    map[string][]int{"a": {1, 2}, "b": {0, 3}, "c": {4, 5}},
		},
		{
			name:    "nobody warm: the range assignor's split",
			members: []string{"b", "a"},
			want:    map[string][]int{"a": {0, 1, 2}, "b": {3, 4, 5}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ms []kafkago.GroupMember
			for _, id := range tc.members {
				data, _ := json.Marshal(tc.warm[id])
				ms = append(ms, kafkago.GroupMember{ID: id, Topics: []string{"in"}, UserData: data})
			}
			var parts []kafkago.Partition
			for p := range 6 {
				parts = append(parts, kafkago.Partition{Topic: "in", ID: p})
			}
			got := Balancer{}.AssignGroups(ms, parts)
			for m, want := range tc.want {
				if !reflect.DeepEqual(got[m]["in"], want) {
					t.Errorf("%s got %v, want %v (all: %v)", m, got[m]["in"], want, got)
				}
			}
		})
	}
}

// A member whose UserData is not the assignor's (garbage) holds nothing
// warm; it still gets its share.
func TestWarmAssignmentToleratesForeignUserData(t *testing.T) {
	ms := []kafkago.GroupMember{
		{ID: "a", Topics: []string{"in"}, UserData: []byte("\x00garbage")},
		{ID: "b", Topics: []string{"in"}},
	}
	got := Balancer{}.AssignGroups(ms, []kafkago.Partition{{Topic: "in", ID: 0}, {Topic: "in", ID: 1}})
	if len(got["a"]["in"]) != 1 || len(got["b"]["in"]) != 1 {
		t.Errorf("got %v, want one partition each", got)
	}
}

// A member's UserData decodes in the current form and in the older bare
// map, so members of two versions can share a group during an upgrade.
func TestMemberDataDecodesBothForms(t *testing.T) {
	cur, _ := json.Marshal(MemberData{Warm: Warm{0: 5, 3: 9}})
	for name, b := range map[string][]byte{
		"current": cur,
		"older":   []byte(`{"0":5,"3":9}`),
	} {
		if got := DecodeMemberData(b).Warm; !reflect.DeepEqual(got, Warm{0: 5, 3: 9}) {
			t.Errorf("%s form %s: warm = %v, want map[0:5 3:9]", name, b, got)
		}
	}
	if got := DecodeMemberData([]byte("\x00garbage")).Warm; len(got) != 0 {
		t.Errorf("garbage: warm = %v, want none", got)
	}
	withAPI, _ := json.Marshal(MemberData{Warm: Warm{}, API: "http://10.0.0.7:8080"})
	if got := DecodeMemberData(withAPI); got.API != "http://10.0.0.7:8080" {
		t.Errorf("%s: api = %q, want the advertised address", withAPI, got.API)
	}
	if got := DecodeMemberData([]byte(`{"api":"http://10.0.0.7:8080"}`)); got.API != "http://10.0.0.7:8080" {
		t.Errorf("api without warm partitions: %+v", got)
	}
	if got := DecodeMemberData([]byte(`{"0":5}`)); got.API != "" {
		t.Errorf("older form: api = %q, want none", got.API)
	}
}

// The static hashes are read when announced, an empty map included, and a
// member that announces none (an older one) has nil.
func TestMemberDataStaticHashes(t *testing.T) {
	with, _ := json.Marshal(MemberData{Warm: Warm{1: 2}, Static: map[string]string{"orders": "a1b2"}})
	if got := DecodeMemberData(with); !reflect.DeepEqual(got.Static, map[string]string{"orders": "a1b2"}) || got.Warm[1] != 2 {
		t.Errorf("%s decoded as %+v", with, got)
	}
	none, _ := json.Marshal(MemberData{Warm: Warm{}, Static: map[string]string{}})
	if got := DecodeMemberData(none); got.Static == nil || len(got.Static) != 0 {
		t.Errorf("%s: static = %#v, want announced and empty", none, got.Static)
	}
	if got := DecodeMemberData([]byte(`{"static":{}}`)); got.Static == nil {
		t.Error(`{"static":{}}: static not announced`)
	}
	for _, older := range []string{`{"warm":{"0":5},"api":"http://10.0.0.7:8080"}`, `{"0":5}`, `{"warm":{},"static":null}`} {
		if got := DecodeMemberData([]byte(older)); got.Static != nil {
			t.Errorf("%s: static = %#v, want none announced", older, got.Static)
		}
	}
	if got := DecodeMemberData([]byte(`{"warm":{"0":5},"static":["orders"]}`)); got.Static != nil || got.Warm != nil {
		t.Errorf("static of the wrong type: %+v, want nothing usable", got)
	}
}

// Whatever another member sends, decoding it never panics.
func FuzzDecodeMemberData(f *testing.F) {
	f.Add([]byte(`{"warm":{"0":5}}`))
	f.Add([]byte(`{"0":5,"3":9}`))
	f.Add([]byte(`{"warm":null}`))
	f.Add([]byte(`{"warm":{},"api":"http://10.0.0.7:8080"}`))
	f.Add([]byte("\x00garbage"))
	f.Add([]byte(`{"warm":{"0":5},"api":"http://10.0.0.7:8080","static":{"orders":"0123456789abcdef"}}`))
	f.Add([]byte(`{"static":{}}`))
	f.Add([]byte(`{"static":null}`))
	f.Add([]byte(`{"static":{"orders":5}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m := DecodeMemberData(b)
		if m.Static != nil {
			// What was decoded is announced again as it was.
			again, err := json.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			if got := DecodeMemberData(again); !reflect.DeepEqual(got.Static, m.Static) {
				t.Fatalf("static %v decoded again as %v", m.Static, got.Static)
			}
		}
	})
}
