package kafka

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	kafkago "github.com/segmentio/kafka-go"
)

// warmBalancer is the group's partition assignor. Each member tells the
// group, when it joins, which partitions it holds a checkpointed store for
// (and up to which changelog offset); the assignor gives every member its
// fair share (the counts of kafka-go's range assignor) and, within it,
// prefers the partitions it holds warm, most caught-up first. Warm
// partitions are caught up from their checkpoints instead of being
// rebuilt, so a rebalance (kafka-go's are eager: every partition is handed
// over) moves only what it must, and a lost member's partitions are the
// only rebuilds.
type warmBalancer struct {
	g *Group
}

// warmProtocol is the assignor's protocol name; every member of a group
// must speak it.
const warmProtocol = "outbox-warm"

// ProtocolName implements kafkago.GroupBalancer.
func (warmBalancer) ProtocolName() string { return warmProtocol }

// warmData maps a partition to the changelog offset of its checkpoint.
type warmData map[int]int64

// memberData is what a member tells the group when it joins (its
// UserData, as JSON): the partitions it holds warm. Decoders accept the
// older form, a bare warmData object, and ignore fields they do not know,
// so members of different versions can share a group.
type memberData struct {
	// Warm holds the partitions with a checkpointed store.
	Warm warmData `json:"warm"`
	// API is the base URL of the member's HTTP API (Config.AdvertiseURL),
	// "" when it announces none.
	API string `json:"api,omitempty"`
}

// decodeMemberData decodes a member's UserData; anything unusable holds
// nothing warm.
func decodeMemberData(b []byte) memberData {
	var m memberData
	if json.Unmarshal(b, &m) == nil && (m.Warm != nil || m.API != "") {
		return m
	}
	var w warmData
	if json.Unmarshal(b, &w) == nil {
		return memberData{Warm: w}
	}
	return memberData{}
}

// UserData implements kafkago.GroupBalancer: the partitions of the ingest
// topic with a checkpoint in the store directory.
func (b warmBalancer) UserData() ([]byte, error) {
	warm := warmData{}
	prefix := b.g.cfg.Topic + "-"
	paths, _ := filepath.Glob(filepath.Join(b.g.sc.Dir, "*.checkpoint"))
	for _, path := range paths {
		name := strings.TrimSuffix(filepath.Base(path), ".checkpoint")
		p, err := strconv.Atoi(strings.TrimPrefix(name, prefix))
		if !strings.HasPrefix(name, prefix) || err != nil || p < 0 {
			continue
		}
		cp, err := readCheckpoint(path)
		if err != nil || cp == nil || cp.Topic != b.g.cfg.Topic || cp.ChangelogTopic != b.g.cfg.ChangelogTopic || cp.Partition != p {
			continue
		}
		if _, err := os.Stat(b.g.storePath(p)); err != nil {
			continue
		}
		warm[p] = cp.Offset
	}
	return json.Marshal(memberData{Warm: warm, API: b.g.cfg.AdvertiseURL})
}

// AssignGroups implements kafkago.GroupBalancer. The partitions of the
// ingest topic go to owners (assignWarm); with Config.StandbyReplicas, the
// same-numbered partitions of the changelog topic go to other members as
// their standbys (assignStandbys): a changelog partition in a member's
// assignment is a store it keeps warm, never one it owns.
func (b warmBalancer) AssignGroups(members []kafkago.GroupMember, partitions []kafkago.Partition) kafkago.GroupMemberAssignments {
	out := kafkago.GroupMemberAssignments{}
	var changelog string
	standbys := 0
	if b.g != nil {
		changelog, standbys = b.g.cfg.ChangelogTopic, b.g.cfg.StandbyReplicas
	}
	byTopic := map[string][]int{}
	for _, p := range partitions {
		byTopic[p.Topic] = append(byTopic[p.Topic], p.ID)
	}
	warm := make(map[string]warmData, len(members))
	for _, m := range members {
		warm[m.ID] = decodeMemberData(m.UserData).Warm
	}
	subscribers := func(topic string) []string {
		var subs []string
		for _, m := range members {
			if slices.Contains(m.Topics, topic) {
				subs = append(subs, m.ID)
			}
		}
		slices.Sort(subs)
		return subs
	}
	owners := map[string]map[int]string{}
	for topic, ids := range byTopic {
		if topic == changelog && changelog != "" {
			continue // standbys, below
		}
		subs := subscribers(topic)
		if len(subs) == 0 {
			continue
		}
		slices.Sort(ids)
		owners[topic] = map[int]string{}
		for member, parts := range assignWarm(subs, ids, warm) {
			if out[member] == nil {
				out[member] = map[string][]int{}
			}
			out[member][topic] = parts
			for _, p := range parts {
				owners[topic][p] = member
			}
		}
	}
	if standbys > 0 && b.g != nil && len(byTopic[changelog]) > 0 {
		for member, parts := range assignStandbys(subscribers(changelog), owners[b.g.cfg.Topic], standbys, warm) {
			if out[member] == nil {
				out[member] = map[string][]int{}
			}
			out[member][changelog] = parts
		}
	}
	return out
}

// assignWarm assigns ids to members (sorted): the first len(ids)%len(members)
// members get one more than the others, as the range assignor's counts.
// Within those counts as many partitions as possible go to a member that
// holds them warm: each partition in turn goes to its most caught-up
// holder with room, and when every holder is full, one of a full holder's
// partitions moves to another holder of its own with room (an augmenting
// path, so that taking a warm partition never costs another its warm
// home). The rest go in order to the members with room.
func assignWarm(members []string, ids []int, warm map[string]warmData) map[string][]int {
	quota := make(map[string]int, len(members))
	for i, m := range members {
		quota[m] = len(ids) / len(members)
		if i < len(ids)%len(members) {
			quota[m]++
		}
	}
	// holders[p]: the members holding p warm, most caught-up first.
	holders := make(map[int][]string, len(ids))
	for _, p := range ids {
		for _, m := range members {
			if _, ok := warm[m][p]; ok {
				holders[p] = append(holders[p], m)
			}
		}
		slices.SortStableFunc(holders[p], func(a, b string) int {
			oa, ob := warm[a][p], warm[b][p]
			switch {
			case oa > ob:
				return -1
			case oa < ob:
				return 1
			}
			return 0
		})
	}
	owner := make(map[int]string, len(ids))
	load := make(map[string]int, len(members))
	// place gives p to a holder with room, freeing one by moving one of
	// its partitions along to another of that partition's holders if need
	// be. seen stops the search from visiting a member twice.
	var place func(p int, seen map[string]bool) bool
	place = func(p int, seen map[string]bool) bool {
		for _, m := range holders[p] {
			if load[m] < quota[m] {
				owner[p] = m
				load[m]++
				return true
			}
		}
		for _, m := range holders[p] {
			if seen[m] {
				continue
			}
			seen[m] = true
			for _, q := range ids {
				if owner[q] != m {
					continue
				}
				owner[p] = m // m keeps its load: p in, q out
				delete(owner, q)
				if place(q, seen) {
					return true
				}
				owner[q] = m
				delete(owner, p)
			}
		}
		return false
	}
	var rest []int
	for _, p := range ids {
		if !place(p, map[string]bool{}) {
			rest = append(rest, p)
		}
	}
	for _, p := range rest {
		for _, m := range members {
			if load[m] < quota[m] {
				owner[p] = m
				load[m]++
				break
			}
		}
	}
	out := make(map[string][]int, len(members))
	for _, p := range ids {
		if m, ok := owner[p]; ok {
			out[m] = append(out[m], p)
		}
	}
	return out
}
