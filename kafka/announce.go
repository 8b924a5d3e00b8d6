package kafka

import (
	"github.com/outboxd/outbox/kafka/internal/balance"
	"github.com/outboxd/outbox/kafka/internal/partition"
)

// announce is what this member tells the group when it joins: the
// partitions of the ingest topic with a checkpoint in the store directory,
// its API address and the hashes of its static endpoints.
func (g *Group) announce() balance.MemberData {
	return balance.MemberData{Warm: g.files().Warm(), API: g.cfg.AdvertiseURL, Static: g.sc.StaticEndpoints}
}

// balancer is the group's partition assignor.
func (g *Group) balancer() balance.Balancer {
	return balance.Balancer{Topic: g.cfg.Topic, ChangelogTopic: g.cfg.ChangelogTopic,
		StandbyReplicas: g.cfg.StandbyReplicas, Announce: g.announce}
}

// files names the partitions' files in the store directory.
func (g *Group) files() partition.Files {
	return partition.Files{Dir: g.sc.Dir, Topic: g.cfg.Topic, ChangelogTopic: g.cfg.ChangelogTopic}
}
