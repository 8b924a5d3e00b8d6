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

// AssignGroups implements kafkago.GroupBalancer.
func (warmBalancer) AssignGroups(members []kafkago.GroupMember, partitions []kafkago.Partition) kafkago.GroupMemberAssignments {
	out := kafkago.GroupMemberAssignments{}
	byTopic := map[string][]int{}
	for _, p := range partitions {
		byTopic[p.Topic] = append(byTopic[p.Topic], p.ID)
	}
	warm := make(map[string]warmData, len(members))
	for _, m := range members {
		warm[m.ID] = decodeMemberData(m.UserData).Warm
	}
	for topic, ids := range byTopic {
		var subs []string
		for _, m := range members {
			if slices.Contains(m.Topics, topic) {
				subs = append(subs, m.ID)
			}
		}
		if len(subs) == 0 {
			continue
		}
		slices.Sort(subs)
		slices.Sort(ids)
		for member, parts := range assignWarm(subs, ids, warm) {
			if out[member] == nil {
				out[member] = map[string][]int{}
			}
			out[member][topic] = parts
		}
	}
	return out
}

// assignWarm assigns ids to members (sorted): the first len(ids)%len(members)
// members get one more than the others, as the range assignor's counts; a
// partition goes first to the member holding it warm with the highest
// checkpoint offset that has room, the rest in order to members with room.
func assignWarm(members []string, ids []int, warm map[string]warmData) map[string][]int {
	quota := make(map[string]int, len(members))
	for i, m := range members {
		quota[m] = len(ids) / len(members)
		if i < len(ids)%len(members) {
			quota[m]++
		}
	}
	out := make(map[string][]int, len(members))
	var rest []int
	for _, p := range ids {
		best, bestOff := "", int64(-1)
		for _, m := range members {
			if off, ok := warm[m][p]; ok && len(out[m]) < quota[m] && off > bestOff {
				best, bestOff = m, off
			}
		}
		if best == "" {
			rest = append(rest, p)
			continue
		}
		out[best] = append(out[best], p)
	}
	for _, p := range rest {
		for _, m := range members {
			if len(out[m]) < quota[m] {
				out[m] = append(out[m], p)
				break
			}
		}
	}
	for m := range out {
		slices.Sort(out[m])
	}
	return out
}
