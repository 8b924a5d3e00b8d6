package kafka

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	kafkago "github.com/segmentio/kafka-go"

	"github.com/outboxd/outbox/kafka/internal/balance"
)

// Member is one member of a consumer group, as the group's coordinator
// describes it.
type Member struct {
	// ID is the member ID the coordinator gave it.
	ID string `json:"member"`
	// ClientID is the client ID it connects with (Config.ClientID).
	ClientID string `json:"client_id"`
	// Host is the address it connects to the coordinator from.
	Host string `json:"host"`
	// API is the base URL of its HTTP API (its Config.AdvertiseURL), ""
	// when it announces none (an older version, or a member that is not
	// an outboxd).
	API string `json:"api,omitempty"`
	// Partitions are the partitions of the ingest topic assigned to it in
	// the group's current generation, sorted; none while the group
	// rebalances.
	Partitions []int `json:"partitions"`
	// Self reports whether the member is the instance that asked
	// (Group.Members only).
	Self bool `json:"self,omitempty"`

	static map[string]string // the hashes of its static endpoints; nil when it announces none
}

// GroupStatus is the state of a consumer group and of the partitions of
// its ingest topic, as the brokers know it.
type GroupStatus struct {
	// Group and Topic are the consumer group and its ingest topic.
	Group string `json:"group"`
	Topic string `json:"topic"`
	// State is the group's state as the coordinator reports it: "Stable",
	// "PreparingRebalance", "CompletingRebalance", "Empty" or "Dead".
	State string `json:"state"`
	// Members are the group's members, sorted by ID.
	Members []Member `json:"members"`
	// Partitions are the partitions of the ingest topic, sorted.
	Partitions []GroupPartition `json:"partitions"`
}

// GroupPartition is one partition of the ingest topic of a group.
type GroupPartition struct {
	// Partition is the partition of the ingest topic (and of the
	// changelog topic).
	Partition int `json:"partition"`
	// Owner is the ID of the member it is assigned to, "" when none is.
	Owner string `json:"owner,omitempty"`
	// API is the owner's HTTP API (Member.API).
	API string `json:"api,omitempty"`
	// Committed is the group's committed offset, -1 when none is.
	Committed int64 `json:"committed_offset"`
	// Start and End are the partition's first offset and its log end
	// offset (the offset the next record gets).
	Start int64 `json:"start_offset"`
	End   int64 `json:"end_offset"`
	// Lag is the records not yet committed by the group: End minus
	// Committed, or minus Start when nothing is committed.
	Lag int64 `json:"lag"`
}

// MembersMaxAge is how long Group.Members answers from what it last
// learned while the generation stays the same: the members of one
// generation do not change, but a member that is gone is noticed only at
// the next one. A member that left the group (Group.Close) may so still be
// asked for what it holds by the others for that long.
const MembersMaxAge = 2 * time.Second

// Members returns the members of the group, with their advertised API
// addresses and the partitions of the ingest topic assigned to them,
// sorted by ID; the member that is this instance has Self set. It asks
// the group's coordinator (DescribeGroups), at most every few seconds
// within one generation of a stable group (a rebalancing group is asked
// again at every call); ctx bounds the request. A rebalancing group
// describes its members without the addresses they announced: a member
// described so keeps the address it announced in the group's last stable
// description.
func (g *Group) Members(ctx context.Context) ([]Member, error) {
	g.mu.Lock()
	gen, self := g.generation, g.memberID
	g.mu.Unlock()
	select { // one call asks the coordinator; the others wait for what it learns
	case g.membersMu <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-g.membersMu }()
	if g.members != nil && g.membersGen == gen && time.Since(g.membersAt) < MembersMaxAge {
		return markSelf(g.members, self), nil
	}
	cl := &kafkago.Client{Addr: kafkago.TCP(g.cfg.brokers()...), Transport: g.conns.transport, Timeout: g.cfg.DialTimeout}
	st, err := describeGroup(ctx, cl, g.cfg.Group, g.cfg.Topic)
	if err != nil {
		return nil, err
	}
	// A group that is rebalancing may describe its members without their
	// metadata or assignments: such an answer serves this call only.
	if st.State == "Stable" {
		g.members, g.membersGen, g.membersAt = st.Members, gen, time.Now()
	} else {
		withKnownAPIs(st.Members, g.members)
	}
	return markSelf(st.Members, self), nil
}

// withKnownAPIs gives each member of ms described without an API address
// the one it has in known, the last stable description of the group: a
// member keeps its ID, and the address it announced, for as long as it
// stays in the group.
func withKnownAPIs(ms, known []Member) {
	for i := range ms {
		if ms[i].API != "" {
			continue
		}
		if j := slices.IndexFunc(known, func(k Member) bool { return k.ID == ms[i].ID }); j >= 0 {
			ms[i].API = known[j].API
		}
	}
}

// markSelf returns a copy of ms with Self set on the member self.
func markSelf(ms []Member, self string) []Member {
	out := slices.Clone(ms)
	for i := range out {
		out[i].Self = self != "" && out[i].ID == self
	}
	return out
}

// describeGroup asks the coordinator of group for its members.
func describeGroup(ctx context.Context, cl *kafkago.Client, group, topic string) (GroupStatus, error) {
	resp, err := cl.DescribeGroups(ctx, &kafkago.DescribeGroupsRequest{GroupIDs: []string{group}})
	if err != nil {
		return GroupStatus{}, fmt.Errorf("kafka: describe group %s: %w", group, err)
	}
	st := GroupStatus{Group: group, Topic: topic}
	for _, gr := range resp.Groups {
		if gr.GroupID != group {
			continue
		}
		if gr.Error != nil {
			return GroupStatus{}, fmt.Errorf("kafka: describe group %s: %w", group, gr.Error)
		}
		st.State = gr.GroupState
		for _, m := range gr.Members {
			md := balance.DecodeMemberData(m.MemberMetadata.UserData)
			mem := Member{ID: m.MemberID, ClientID: m.ClientID, Host: m.ClientHost, API: md.API, Partitions: []int{},
				static: md.Static}
			for _, t := range m.MemberAssignments.Topics {
				if t.Topic == topic {
					mem.Partitions = append(mem.Partitions, t.Partitions...)
				}
			}
			slices.Sort(mem.Partitions)
			st.Members = append(st.Members, mem)
		}
	}
	slices.SortFunc(st.Members, func(a, b Member) int { return strings.Compare(a.ID, b.ID) })
	return st, nil
}

// DescribeGroup returns the state of cfg.Group and of the partitions of
// cfg.Topic: the members with their advertised API addresses, and per
// partition its owner, the group's committed offset, the log end offset
// and the lag between them. It only reads (DescribeGroups, Metadata,
// ListOffsets and OffsetFetch); nothing joins the group. ctx bounds it.
func DescribeGroup(ctx context.Context, cfg Config) (GroupStatus, error) {
	if cfg.Topic == "" {
		return GroupStatus{}, &ConfigError{Field: "Topic", Reason: "required: the group's partitions are those of the ingest topic"}
	}
	if err := cfg.Validate(); err != nil {
		return GroupStatus{}, err
	}
	cfg = cfg.WithDefaults()
	cn, err := cfg.conns()
	if err != nil {
		return GroupStatus{}, err
	}
	defer cn.close()
	cl := &kafkago.Client{Addr: kafkago.TCP(cfg.brokers()...), Transport: cn.transport, Timeout: cfg.DialTimeout}
	st, err := describeGroup(ctx, cl, cfg.Group, cfg.Topic)
	if err != nil {
		return GroupStatus{}, err
	}
	ids, err := topicPartitions(ctx, cl, cfg.Topic)
	if err != nil {
		return GroupStatus{}, err
	}
	offs, err := partitionOffsets(ctx, cl, cfg.Topic, ids)
	if err != nil {
		return GroupStatus{}, err
	}
	committed, err := groupCommitted(ctx, cl, cfg.Group, cfg.Topic, ids)
	if err != nil {
		return GroupStatus{}, err
	}
	owners := map[int]Member{}
	for _, m := range st.Members {
		for _, p := range m.Partitions {
			owners[p] = m
		}
	}
	for _, id := range ids {
		gp := GroupPartition{Partition: id, Committed: -1, Start: offs[id].FirstOffset, End: offs[id].LastOffset}
		if c, ok := committed[id]; ok && c >= 0 {
			gp.Committed = c
		}
		if m, ok := owners[id]; ok {
			gp.Owner, gp.API = m.ID, m.API
		}
		gp.Lag = max(gp.End-max(gp.Committed, gp.Start), 0)
		st.Partitions = append(st.Partitions, gp)
	}
	return st, nil
}

// topicPartitions returns the partitions of topic, sorted; a topic
// without any is an error.
func topicPartitions(ctx context.Context, cl *kafkago.Client, topic string) ([]int, error) {
	md, err := cl.Metadata(ctx, &kafkago.MetadataRequest{Topics: []string{topic}})
	if err != nil {
		return nil, fmt.Errorf("kafka: metadata of %s: %w", topic, err)
	}
	var ids []int
	for _, t := range md.Topics {
		if t.Name != topic {
			continue
		}
		if t.Error != nil {
			return nil, fmt.Errorf("kafka: topic %s: %w", topic, t.Error)
		}
		for _, p := range t.Partitions {
			ids = append(ids, p.ID)
		}
	}
	if len(ids) == 0 {
		return nil, fmt.Errorf("kafka: topic %s has no partitions", topic)
	}
	slices.Sort(ids)
	return ids, nil
}

// partitionOffsets returns the first and log end offsets of the partitions
// ids of topic.
func partitionOffsets(ctx context.Context, cl *kafkago.Client, topic string, ids []int) (map[int]kafkago.PartitionOffsets, error) {
	reqs := make([]kafkago.OffsetRequest, 0, 2*len(ids))
	for _, id := range ids {
		reqs = append(reqs, kafkago.FirstOffsetOf(id), kafkago.LastOffsetOf(id))
	}
	lo, err := cl.ListOffsets(ctx, &kafkago.ListOffsetsRequest{Topics: map[string][]kafkago.OffsetRequest{topic: reqs}})
	if err != nil {
		return nil, fmt.Errorf("kafka: offsets of %s: %w", topic, err)
	}
	offs := map[int]kafkago.PartitionOffsets{}
	for _, po := range lo.Topics[topic] {
		if po.Error != nil {
			return nil, fmt.Errorf("kafka: offsets of %s/%d: %w", topic, po.Partition, po.Error)
		}
		offs[po.Partition] = po
	}
	return offs, nil
}

// groupCommitted returns group's committed offsets of the partitions ids
// of topic; a group the coordinator does not know has none.
func groupCommitted(ctx context.Context, cl *kafkago.Client, group, topic string, ids []int) (map[int]int64, error) {
	of, err := cl.OffsetFetch(ctx, &kafkago.OffsetFetchRequest{GroupID: group, Topics: map[string][]int{topic: ids}})
	if err == nil && of.Error != nil && !errors.Is(of.Error, kafkago.GroupIdNotFound) {
		err = of.Error
	}
	if err != nil {
		return nil, fmt.Errorf("kafka: committed offsets of group %s: %w", group, err)
	}
	committed := map[int]int64{}
	for _, p := range of.Topics[topic] {
		if p.Error == nil {
			committed[p.Partition] = p.CommittedOffset
		}
	}
	return committed, nil
}

// checkAdvertiseURL checks an advertised API address: an absolute http or
// https URL of a host the other members can reach, without credentials, a
// query or a fragment.
func checkAdvertiseURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("%q is not a URL", s)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("%q: want an http:// or https:// URL such as http://10.0.0.7:8080", s)
	case u.Host == "" || u.Hostname() == "":
		return fmt.Errorf("%q has no host", s)
	case u.User != nil:
		return fmt.Errorf("%q holds credentials: every member of the group can read the advertised address", u.Redacted())
	case u.RawQuery != "" || u.Fragment != "" || u.ForceQuery:
		return fmt.Errorf("%q has a query or a fragment", s)
	}
	if ip := net.ParseIP(u.Hostname()); ip != nil && ip.IsUnspecified() {
		return fmt.Errorf("%q is a wildcard address the other members cannot reach: give this instance's own address", s)
	}
	return nil
}

// KeyPartition returns the partition, of partitions, that KeyBalancer (and
// so Kafka's default partitioner) puts a record of an event with key in,
// and false when key is empty or cannot be a record's key (a "base64:..."
// key that is not the form a binary record key maps to), or partitions is
// not positive.
func KeyPartition(key string, partitions int) (int, bool) {
	b, ok := recordKey(key)
	if !ok || len(b) == 0 || partitions <= 0 {
		return 0, false
	}
	ps := make([]int, partitions)
	for i := range ps {
		ps[i] = i
	}
	return KeyBalancer{}.Balance(kafkago.Message{Key: b}, ps...), true
}

// RecordPartition returns the partition of topic that an event ID made by
// RecordID names, and whether id is such an ID. Other IDs (given by the
// IDHeader, or by the HTTP API) tell nothing of their partition.
func RecordPartition(topic, id string) (int, bool) {
	rest, ok := strings.CutPrefix(id, "kafka:"+topic+":")
	if !ok {
		return 0, false
	}
	p, off, ok := strings.Cut(rest, ":")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(p)
	if err != nil || n < 0 {
		return 0, false
	}
	if _, err := strconv.ParseInt(off, 10, 64); err != nil {
		return 0, false
	}
	return n, true
}
