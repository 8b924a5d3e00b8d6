package kafka

import "log/slog"

// shareRateLimits makes the partition stores' rate limits
// (StoreConfig.Outbox.RateLimits) this instance's share of the group's:
// each limit times the partitions it owns over the partitions of
// Config.Topic, so that the members' shares add up to the limit. It runs
// at every assignment, before the stores of the generation start (those of
// the last one are closed by then); with no partition owned the share is
// nothing, and no store delivers.
//
// The partition count is the one the topic check saw, or more when an
// owned partition's number says the topic has grown since.
func (g *Group) shareRateLimits(owned []int) {
	rl := g.sc.Outbox.RateLimits
	if rl == nil {
		return
	}
	total := int(g.topicPartitions.Load())
	for _, p := range owned {
		total = max(total, p+1)
	}
	if total == 0 {
		return // the topic check has passed before any assignment
	}
	if err := rl.SetShare(len(owned), total); err != nil {
		g.log.Error("kafka: sharing the rate limits", "owned", len(owned), "partitions", total, "err", err)
		return
	}
	g.log.Debug("kafka: rate limits shared", "group", g.cfg.Group, "owned", len(owned), "partitions", total,
		slog.Float64("share", float64(len(owned))/float64(total)))
}
