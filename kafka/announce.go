package kafka

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/outboxd/outbox/kafka/internal/balance"
)

// announce is what this member tells the group when it joins: the
// partitions of the ingest topic with a checkpoint in the store directory,
// and its API address.
func (g *Group) announce() balance.MemberData {
	warm := balance.Warm{}
	prefix := g.cfg.Topic + "-"
	paths, _ := filepath.Glob(filepath.Join(g.sc.Dir, "*.checkpoint"))
	for _, path := range paths {
		name := strings.TrimSuffix(filepath.Base(path), ".checkpoint")
		p, err := strconv.Atoi(strings.TrimPrefix(name, prefix))
		if !strings.HasPrefix(name, prefix) || err != nil || p < 0 {
			continue
		}
		cp, err := readCheckpoint(path)
		if err != nil || cp == nil || cp.Topic != g.cfg.Topic || cp.ChangelogTopic != g.cfg.ChangelogTopic || cp.Partition != p {
			continue
		}
		if _, err := os.Stat(g.storePath(p)); err != nil {
			continue
		}
		warm[p] = cp.Offset
	}
	return balance.MemberData{Warm: warm, API: g.cfg.AdvertiseURL}
}

// balancer is the group's partition assignor.
func (g *Group) balancer() balance.Balancer {
	return balance.Balancer{Topic: g.cfg.Topic, ChangelogTopic: g.cfg.ChangelogTopic,
		StandbyReplicas: g.cfg.StandbyReplicas, Announce: g.announce}
}
