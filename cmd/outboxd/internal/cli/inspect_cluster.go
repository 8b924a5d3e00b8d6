package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/outboxd/outbox/cmd/outboxd/internal/config"
	"github.com/outboxd/outbox/kafka"
)

// wantsCluster reports whether inspect's arguments ask for the group's
// view (--cluster, or --cluster=true).
func wantsCluster(args []string) bool { return wantsFlag(args, "cluster") }

// wantsFlag reports whether args turn the boolean flag name on before any
// "--".
func wantsFlag(args []string, name string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		switch strings.TrimLeft(a, "-") {
		case name, name + "=true", name + "=1":
			return strings.HasPrefix(a, "-")
		}
	}
	return false
}

// clusterPartition is one partition as inspect --cluster shows it: what
// the brokers know (owner, offsets) and what its owner's API says of its
// store.
type clusterPartition struct {
	kafka.GroupPartition
	// State is the owner's state of the partition's store ("" when the
	// owner did not answer or does not hold it yet).
	State string `json:"state,omitempty"`
	// Pending and Dead count the store's events; nil when unknown.
	Pending *int `json:"pending"`
	Dead    *int `json:"dead"`
}

// clusterView is the output of inspect --cluster.
type clusterView struct {
	Group      string             `json:"group"`
	Topic      string             `json:"topic"`
	State      string             `json:"state"`
	Members    []kafka.Member     `json:"members"`
	Partitions []clusterPartition `json:"partitions"`
	// Unanswered names the members whose API could not be read, and why.
	Unanswered map[string]string `json:"unanswered,omitempty"`
}

// inspectCluster serves outboxd inspect --cluster: the group's partitions,
// their owners, lag, pending and dead events, from the brokers and the
// owners' APIs. Nothing is changed.
func inspectCluster(e Env, args []string) int {
	l := config.NewLoader("outboxd inspect --cluster", e.Stderr,
		"kafka.brokers", "kafka.topic", "kafka.group", "kafka.client_id", "token")
	l.FlagSet.Bool("cluster", true, "show the Kafka group's partitions, owners, lag, pending and dead events")
	asJSON := l.FlagSet.Bool("json", false, "print JSON")
	timeout := l.FlagSet.Duration("timeout", 10*time.Second, "bound of the whole inspection")
	cfg, err := l.Load(args, e.Getenv)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(e.Stderr, "outboxd inspect: %v\n", err)
		return exitUsage
	}
	if l.FlagSet.NArg() > 0 {
		fmt.Fprintf(e.Stderr, "outboxd inspect: unexpected argument %q\n", l.FlagSet.Arg(0))
		return exitUsage
	}
	switch {
	case len(cfg.Kafka.Brokers) == 0:
		fmt.Fprintln(e.Stderr, "outboxd inspect: --cluster needs --kafka-brokers")
		return exitUsage
	case cfg.Kafka.Topic == "":
		fmt.Fprintln(e.Stderr, "outboxd inspect: --cluster needs --kafka-topic, the group's ingest topic")
		return exitUsage
	case *timeout <= 0:
		fmt.Fprintln(e.Stderr, "outboxd inspect: --timeout: must be positive")
		return exitUsage
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	st, err := kafka.DescribeGroup(ctx, cfg.Kafka)
	if err != nil {
		fmt.Fprintf(e.Stderr, "outboxd inspect: %v\n", config.Explain(err))
		return exitError
	}
	view := clusterView{Group: st.Group, Topic: st.Topic, State: st.State, Members: st.Members}
	stores, unanswered := ownersStores(ctx, st.Members, cfg.Token)
	if len(unanswered) > 0 {
		view.Unanswered = unanswered
	}
	for _, p := range st.Partitions {
		cp := clusterPartition{GroupPartition: p}
		if ps, ok := stores[p.Owner][p.Partition]; ok {
			cp.State, cp.Pending, cp.Dead = ps.State, &ps.Pending, &ps.Dead
		}
		view.Partitions = append(view.Partitions, cp)
	}
	var out bytes.Buffer
	if *asJSON {
		b, _ := json.MarshalIndent(view, "", "  ")
		out.Write(append(b, '\n'))
	} else {
		writeClusterView(&out, view)
	}
	if _, err := out.WriteTo(e.Stdout); err != nil {
		fmt.Fprintf(e.Stderr, "outboxd inspect: %v\n", err)
		return exitError
	}
	for _, m := range slices.Sorted(maps.Keys(unanswered)) {
		fmt.Fprintf(e.Stderr, "outboxd inspect: member %s: %s\n", m, unanswered[m])
	}
	return exitOK
}

// inspectClient reads the members' APIs.
var inspectClient = &http.Client{
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

// ownersStores reads GET /v1/stats of every member with an API address,
// at once, and returns the partitions each holds by member ID, and why
// the members that could not be read were not.
func ownersStores(ctx context.Context, members []kafka.Member, token string) (map[string]map[int]kafka.PartitionStatus, map[string]string) {
	var mu sync.Mutex
	stores := map[string]map[int]kafka.PartitionStatus{}
	unanswered := map[string]string{}
	var wg sync.WaitGroup
	for _, m := range members {
		if m.API == "" {
			unanswered[m.ID] = "announces no API address"
			continue
		}
		wg.Add(1)
		go func(m kafka.Member) {
			defer wg.Done()
			parts, err := memberPartitions(ctx, m.API, token)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				unanswered[m.ID] = m.API + ": " + err.Error()
				return
			}
			stores[m.ID] = parts
		}(m)
	}
	wg.Wait()
	return stores, unanswered
}

// memberPartitions reads the partitions a member's API reports (its own
// stats: scope=local).
func memberPartitions(ctx context.Context, api, token string) (map[int]kafka.PartitionStatus, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(api, "/")+"/v1/stats?scope=local", nil)
	if err != nil {
		return nil, fmt.Errorf("bad address")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := inspectClient.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // its text repeats the address, named already
		}
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		var e struct{ Error string }
		_ = json.Unmarshal(b, &e)
		return nil, fmt.Errorf("answered %d %s", resp.StatusCode, e.Error)
	}
	var s struct {
		Kafka *struct {
			Partitions []kafka.PartitionStatus `json:"partitions"`
		} `json:"kafka"`
	}
	if err := json.Unmarshal(b, &s); err != nil || s.Kafka == nil {
		return nil, errors.New("its stats have no kafka partitions: not an outboxd in group mode")
	}
	out := make(map[int]kafka.PartitionStatus, len(s.Kafka.Partitions))
	for _, p := range s.Kafka.Partitions {
		out[p.Partition] = p
	}
	return out, nil
}

// writeClusterView prints the view as two tables: the members, then the
// partitions.
func writeClusterView(w io.Writer, v clusterView) {
	fmt.Fprintf(w, "group %s on topic %s: %s, %d members\n\n", v.Group, v.Topic, v.State, len(v.Members))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "MEMBER\tAPI\tHOST\tPARTITIONS")
	for _, m := range v.Members {
		parts := make([]string, len(m.Partitions))
		for i, p := range m.Partitions {
			parts[i] = strconv.Itoa(p)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", m.ID, dash(m.API), m.Host, dash(strings.Join(parts, ",")))
	}
	_ = tw.Flush()
	fmt.Fprintln(w)
	fmt.Fprintln(tw, "PARTITION\tOWNER\tAPI\tSTATE\tCOMMITTED\tEND\tLAG\tPENDING\tDEAD")
	for _, p := range v.Partitions {
		committed := "-"
		if p.Committed >= 0 {
			committed = strconv.FormatInt(p.Committed, 10)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\n", p.Partition, dash(p.Owner), dash(p.API), dash(p.State),
			committed, p.End, p.Lag, count(p.Pending), count(p.Dead))
	}
	_ = tw.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func count(n *int) string {
	if n == nil {
		return "?"
	}
	return strconv.Itoa(*n)
}
