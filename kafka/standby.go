package kafka

import (
	"slices"

	kafkago "github.com/segmentio/kafka-go"

	"github.com/outboxd/outbox/kafka/internal/partition"
	"github.com/outboxd/outbox/outbox"
)

// Standby states, as StandbyStatus.State reports them.
const (
	// StandbyOpening: the standby's store is being opened (from its
	// checkpoint, or empty to be built from the partition's start).
	StandbyOpening = "opening"
	// StandbyTailing: the store applies the changelog partition as it
	// grows; Lag says how far behind it is.
	StandbyTailing = "tailing"
	// StandbyFailed: the last attempt failed (Error says why); it is
	// retried with backoff.
	StandbyFailed = "failed"
	// StandbyStopped: the generation ended; the store is closed, with its
	// checkpoint when the stop was clean.
	StandbyStopped = "stopped"
)

// StandbyStatus describes one partition this instance keeps a standby copy
// of (Config.StandbyReplicas): a store it does not own, kept warm by
// applying the partition's changelog as it grows. A standby store is never
// started: it neither ingests nor delivers.
type StandbyStatus struct {
	// Partition is the partition of the ingest and changelog topics.
	Partition int `json:"partition"`
	// State is StandbyOpening, StandbyTailing, StandbyFailed or
	// StandbyStopped.
	State string `json:"state"`
	// Generation is the consumer group generation the standby was
	// assigned in.
	Generation int32 `json:"generation"`
	// Mode is how the standby started in this generation: RestoreCheckpoint
	// (it resumed a store kept with its checkpoint) or RestoreRebuild (it
	// built the store from the changelog partition's first offset).
	Mode string `json:"mode"`
	// Applied is the changelog offset the store holds every record below.
	Applied int64 `json:"applied_offset"`
	// End is the changelog partition's end offset as last seen (when the
	// standby started, and with every fetch since).
	End int64 `json:"end_offset"`
	// Lag is End - Applied: the changelog records not applied yet.
	Lag int64 `json:"lag"`
	// Records is the number of changelog records applied in this
	// generation; Fenced those skipped as written by a fenced-off owner.
	Records int64 `json:"records"`
	Fenced  int64 `json:"fenced"`
	// Error is why the last attempt failed (StandbyFailed), else "".
	Error string `json:"error,omitempty"`
}

// startStandbys starts, in gen, a standby for every partition of the
// changelog topic assigned to this member that it does not own (a leader
// of an older version may assign both), and publishes them.
func (g *Group) startStandbys(gen *kafkago.Generation, owned map[int]*partition.Task) {
	var ids []int
	if g.cfg.StandbyReplicas > 0 {
		for _, pa := range gen.Assignments[g.cfg.ChangelogTopic] {
			if _, ok := owned[pa.ID]; !ok {
				ids = append(ids, pa.ID)
			}
		}
	}
	slices.Sort(ids)
	sbs := make(map[int]*partition.Standby, len(ids))
	for _, p := range ids {
		sbs[p] = partition.NewStandby(g.env, gen, p)
	}
	g.mu.Lock()
	g.standbys = sbs
	g.mu.Unlock()
	if len(ids) > 0 {
		g.log.Info("kafka: standbys assigned", "group", g.cfg.Group, "generation", gen.ID,
			"changelog_topic", g.cfg.ChangelogTopic, "partitions", ids)
	}
	for _, s := range sbs {
		gen.Start(s.Run)
	}
}

// Standbys returns the status of the standby copies of the current (or,
// during a rebalance, the last) generation, sorted by partition: empty
// without Config.StandbyReplicas.
func (g *Group) Standbys() []StandbyStatus {
	return sortedStatuses(&g.mu, &g.standbys, func(s *partition.Standby) StandbyStatus { return StandbyStatus(s.Status()) },
		func(s StandbyStatus) int { return s.Partition })
}

// partitionConfig is the configuration of partition p's store.
func (g *Group) partitionConfig(p int) outbox.Config {
	c := g.sc.Outbox
	if c.Logger != nil {
		c.Logger = c.Logger.With("partition", p)
	}
	return c
}
