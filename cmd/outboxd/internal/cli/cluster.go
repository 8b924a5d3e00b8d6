package cli

import (
	"context"
	"net"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/outboxd/outbox/cmd/outboxd/internal/config"
	"github.com/outboxd/outbox/kafka"
	"github.com/outboxd/outbox/outbox/cluster"
)

// kafkaSettings returns the Kafka settings serve starts with: in group
// mode, the advertised API address derived from the listen address and
// the bound port when kafka.advertise_url is not set.
func (s *server) kafkaSettings(ln net.Listener) (kafka.Config, error) {
	k := s.cfg.Kafka
	if k.Topic == "" {
		return k, nil
	}
	if k.AdvertiseURL == "" {
		u, err := config.AdvertiseURL(s.cfg.Listen, ln.Addr())
		if err != nil {
			return k, &config.SettingError{Setting: "kafka.advertise_url", Reason: err.Error()}
		}
		k.AdvertiseURL = u
	}
	s.log.Info("the API is announced to the group's members", "advertise_url", k.AdvertiseURL)
	return k, nil
}

// clusterAPI puts local, the API over this instance's stores, behind the
// handler that answers for the whole group: the event routes of events
// another member holds (sent to the owner when the ID or key names the
// partition; while partitions move, a copy that stale answers from), the
// listing, dead replay, retry and stats (unless scope=local), and
// endpoints with scope=cluster.
func (s *server) clusterAPI(local, stale http.Handler, g *kafka.Group, k kafka.Config) http.Handler {
	h := cluster.New(local, cluster.Config{
		Self:           k.AdvertiseURL,
		Peers:          func(ctx context.Context) ([]cluster.Peer, error) { return groupPeers(ctx, g) },
		PartitionOf:    func(id string) (int, bool) { return kafka.RecordPartition(k.Topic, id) },
		PartitionOfKey: kafka.KeyPartition,
		Moving:         func() bool { return partitionsMoving(g) },
		Stale:          stale,
		Logger:         s.log.With("component", "cluster"),
	})
	s.cluster = h
	return h
}

// groupPeers lists the members of g as the cluster handler sees them.
func groupPeers(ctx context.Context, g *kafka.Group) ([]cluster.Peer, error) {
	ms, err := g.Members(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]cluster.Peer, len(ms))
	for i, m := range ms {
		out[i] = cluster.Peer{ID: m.ID, URL: m.API, Partitions: m.Partitions, Self: m.Self}
	}
	return out, nil
}

// partitionsMoving reports whether g is between two generations or owns
// partitions whose stores do not serve: restoring, handing over, or whose
// restore failed (it is retried).
func partitionsMoving(g *kafka.Group) bool {
	if !g.Ready() {
		return true
	}
	for _, p := range g.Partitions() {
		switch p.State {
		case kafka.PartitionRestoring, kafka.PartitionHandingOver, kafka.PartitionFailed:
			return true
		}
	}
	return false
}

// clusterCollector exports what the cluster handler did:
// outboxd_cluster_forwards_total{outcome},
// outboxd_cluster_views_total{complete} and
// outboxd_cluster_requests_sent_total.
type clusterCollector struct {
	h                     *cluster.Handler
	forwards, views, sent *prometheus.Desc
}

func newClusterCollector(h *cluster.Handler) *clusterCollector {
	return &clusterCollector{
		h: h,
		forwards: prometheus.NewDesc("outboxd_cluster_forwards_total",
			"Event requests no local store could answer, asked of the other members of the group, by outcome: "+
				"answered (a member held the event), not_found, moving (503 while partitions moved), "+
				"stale (a copy of a moving partition answered a read), "+
				"unreachable (502/504: members could not be asked), no_members (503: the group could not be described).",
			[]string{"outcome"}, nil),
		views: prometheus.NewDesc("outboxd_cluster_views_total",
			"Answers for the whole group (stats, endpoints, listings, dead replays, retries), by whether every member answered.",
			[]string{"complete"}, nil),
		sent: prometheus.NewDesc("outboxd_cluster_requests_sent_total",
			"Requests sent to other members of the group, for any route.", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *clusterCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.forwards
	ch <- c.views
	ch <- c.sent
}

// Collect implements prometheus.Collector.
func (c *clusterCollector) Collect(ch chan<- prometheus.Metric) {
	n := c.h.Counts()
	for outcome, v := range map[string]uint64{"answered": n.Answered, "not_found": n.NotFound, "moving": n.Moving,
		"unreachable": n.Unreachable, "no_members": n.NoMembers, "stale": n.Stale} {
		ch <- prometheus.MustNewConstMetric(c.forwards, prometheus.CounterValue, float64(v), outcome)
	}
	ch <- prometheus.MustNewConstMetric(c.views, prometheus.CounterValue, float64(n.ClusterViews-n.Incomplete), "true")
	ch <- prometheus.MustNewConstMetric(c.views, prometheus.CounterValue, float64(n.Incomplete), "false")
	ch <- prometheus.MustNewConstMetric(c.sent, prometheus.CounterValue, float64(n.Forwarded))
}
