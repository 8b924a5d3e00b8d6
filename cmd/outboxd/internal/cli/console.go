package cli

import (
	"strconv"

	"github.com/outboxd/outbox/kafka"
	"github.com/outboxd/outbox/outbox/console"
	"github.com/outboxd/outbox/outbox/union"
)

// startConsole builds the web console over the same stores the API serves
// (with the partitions page in Kafka group mode), or returns nil when the
// ui setting is off.
func (s *server) startConsole() (*console.Console, error) {
	if !s.cfg.UI {
		return nil, nil
	}
	cfg := console.Config{Token: s.cfg.Token, Guard: s.guard, Logger: s.log.With("component", "console")}
	var b console.Backend = s.o
	if g, ok := s.kafka.(*kafka.Group); ok {
		b = union.New(s.o, g.Stores).WithSettle(g.WaitShipped)
		cfg.Partitions = groupPartitions{g}
	}
	return console.New(b, cfg)
}

// groupPartitions lists a Kafka group member's partitions for the console.
type groupPartitions struct{ g *kafka.Group }

func (p groupPartitions) Partitions() []console.Partition {
	ps := p.g.Partitions()
	out := make([]console.Partition, len(ps))
	for i, st := range ps {
		restore := st.Restore.Mode
		if restore != "" {
			restore += ", " + strconv.FormatInt(st.Restore.Records, 10) + " records"
			if st.Restore.Done {
				restore += ", done in " + st.Restore.Duration.Round(1e6).String()
			}
		}
		out[i] = console.Partition{
			Partition: st.Partition, Owner: "this instance (generation " + strconv.Itoa(int(st.Generation)) + ", epoch " + strconv.FormatInt(st.Epoch, 10) + ")",
			State: st.State, Restore: restore, Lag: st.Restore.Remaining, Committed: st.Committed,
			Pending: st.Pending, Dead: st.Dead, Error: st.Error,
		}
	}
	return out
}
