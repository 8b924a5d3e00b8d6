package balance

import (
	"encoding/json"
	"slices"

	kafkago "github.com/segmentio/kafka-go"
)

// Balancer is the group's partition assignor (a kafkago.GroupBalancer).
// The zero Balancer assigns every subscribed topic's partitions as owned
// partitions and keeps no standbys.
type Balancer struct {
	// Topic is the ingest topic: its partitions go to owners.
	Topic string
	// ChangelogTopic is the changelog topic: its partitions, with
	// StandbyReplicas above 0, go to standbys; never to owners.
	ChangelogTopic string
	// StandbyReplicas is how many standbys each partition gets at most.
	StandbyReplicas int
	// Announce returns what this member tells the group when it joins.
	Announce func() MemberData
}

// ProtocolName implements kafkago.GroupBalancer.
func (Balancer) ProtocolName() string { return Protocol }

// UserData implements kafkago.GroupBalancer: what Announce returns, as
// JSON.
func (b Balancer) UserData() ([]byte, error) {
	var md MemberData
	if b.Announce != nil {
		md = b.Announce()
	}
	return json.Marshal(md)
}

// AssignGroups implements kafkago.GroupBalancer. The partitions of the
// ingest topic go to owners (assignWarm); with StandbyReplicas, the
// same-numbered partitions of the changelog topic go to other members as
// their standbys (assignStandbys): a changelog partition in a member's
// assignment is a store it keeps warm, never one it owns.
func (b Balancer) AssignGroups(members []kafkago.GroupMember, partitions []kafkago.Partition) kafkago.GroupMemberAssignments {
	out := kafkago.GroupMemberAssignments{}
	give := func(member, topic string, parts []int) {
		if out[member] == nil {
			out[member] = map[string][]int{}
		}
		out[member][topic] = parts
	}
	byTopic := map[string][]int{}
	for _, p := range partitions {
		byTopic[p.Topic] = append(byTopic[p.Topic], p.ID)
	}
	warm := make(map[string]Warm, len(members))
	for _, m := range members {
		warm[m.ID] = DecodeMemberData(m.UserData).Warm
	}
	owners := map[string]map[int]string{}
	for topic, ids := range byTopic {
		if topic == b.ChangelogTopic && b.ChangelogTopic != "" {
			continue // standbys, below
		}
		subs := subscribers(members, topic)
		if len(subs) == 0 {
			continue
		}
		slices.Sort(ids)
		owners[topic] = map[int]string{}
		for member, parts := range assignWarm(subs, ids, warm) {
			give(member, topic, parts)
			for _, p := range parts {
				owners[topic][p] = member
			}
		}
	}
	if b.StandbyReplicas > 0 && b.ChangelogTopic != "" && len(byTopic[b.ChangelogTopic]) > 0 {
		subs := subscribers(members, b.ChangelogTopic)
		for member, parts := range assignStandbys(subs, owners[b.Topic], b.StandbyReplicas, warm) {
			give(member, b.ChangelogTopic, parts)
		}
	}
	return out
}

// subscribers returns the IDs of the members subscribed to topic, sorted.
func subscribers(members []kafkago.GroupMember, topic string) []string {
	var subs []string
	for _, m := range members {
		if slices.Contains(m.Topics, topic) {
			subs = append(subs, m.ID)
		}
	}
	slices.Sort(subs)
	return subs
}

// quotas splits total among members (sorted) as the range assignor does:
// the first total%len(members) members get one more than the others.
func quotas(members []string, total int) map[string]int {
	quota := make(map[string]int, len(members))
	for i, m := range members {
		quota[m] = total / len(members)
		if i < total%len(members) {
			quota[m]++
		}
	}
	return quota
}

var _ kafkago.GroupBalancer = Balancer{}
