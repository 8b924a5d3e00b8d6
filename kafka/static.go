package kafka

import (
	"context"
	"fmt"
	"maps"
	"slices"

	kafkago "github.com/segmentio/kafka-go"
)

// StaticMismatch names the static endpoints whose definitions the members
// of the group do not agree on, sorted: those whose hash (as each member
// announces it, StoreConfig.StaticEndpoints) differs between two members,
// and those that some members define and others do not. Members that
// announce no hashes (an older version, or StaticEndpoints nil) are left
// out of the comparison. None means the members agree.
//
// The members' announcements change only when they join, so the answer is
// kept for the generation: the coordinator is asked (DescribeGroups) once
// per generation of a stable group, within ctx. While the group
// rebalances the answer cannot be complete, and the error says so.
func (g *Group) StaticMismatch(ctx context.Context) ([]string, error) {
	g.mu.Lock()
	gen := g.generation
	cached, ok := g.static, g.staticGen == gen && g.staticKnown
	g.mu.Unlock()
	if ok {
		return slices.Clone(cached), nil
	}
	cl := &kafkago.Client{Addr: kafkago.TCP(g.cfg.brokers()...), Transport: g.conns.transport, Timeout: g.cfg.DialTimeout}
	st, err := describeGroup(ctx, cl, g.cfg.Group, g.cfg.Topic)
	if err != nil {
		return nil, err
	}
	if st.State != "Stable" {
		return nil, fmt.Errorf("kafka: group %s is %s: the members' static endpoints are compared once it is stable", g.cfg.Group, st.State)
	}
	differ := staticMismatch(st.Members)
	g.mu.Lock()
	if g.generation == gen {
		g.static, g.staticGen, g.staticKnown = differ, gen, true
	}
	g.mu.Unlock()
	return slices.Clone(differ), nil
}

// staticMismatch names the endpoints the members that announce static
// hashes do not agree on, sorted.
func staticMismatch(ms []Member) []string {
	var announced []map[string]string
	names := map[string]bool{}
	for _, m := range ms {
		if m.static == nil {
			continue
		}
		announced = append(announced, m.static)
		for name := range m.static {
			names[name] = true
		}
	}
	var differ []string
	for _, name := range slices.Sorted(maps.Keys(names)) {
		first, defined := announced[0][name]
		for _, a := range announced[1:] {
			if h, ok := a[name]; ok != defined || h != first {
				differ = append(differ, name)
				break
			}
		}
	}
	return differ
}
