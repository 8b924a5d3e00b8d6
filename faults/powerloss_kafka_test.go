//go:build fault && linux

package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/outboxd/outbox/internal/powerfs"
	"github.com/outboxd/outbox/internal/testkit"
	"github.com/outboxd/outbox/store"
)

// kafkaPowerTuning is the group's tuning in the Kafka power-loss scenario:
// short session and intervals, so that a restarted pair settles quickly.
const kafkaPowerTuning = `kafka:
  commit_interval: 50ms
  session_timeout: 1s
  heartbeat_interval: 100ms
  rebalance_timeout: 3s
  ship_interval: 10ms
  retry_backoff: 20ms
  retry_backoff_max: 200ms
  dial_timeout: 1s
`

const kafkaPowerPartitions = 4

// kafkaPower is the Kafka power-loss scenario: two outboxd instances of one
// group (one standby replica of each partition), each with its data on a
// powerfs of its own; the broker runs in the test process and is not cut.
type kafkaPower struct {
	*powerRun
	cluster *kfake.Cluster
	tuning  string
	fss     [2]*powerfs.FS
	addrs   [2]string
}

func (k *kafkaPower) start(gen int) [2]*sidecar {
	var out [2]*sidecar
	for i := range out {
		out[i] = start(k.t, k.fss[i].Path("outboxd.db"), k.addrs[i], "--config", k.tuning,
			"--endpoint", "recv="+k.rcv.url(2*gen+i), "--allow-private-networks",
			"--kafka-brokers", strings.Join(k.cluster.ListenAddrs(), ","), "--kafka-topic", "events",
			"--kafka-group", "powerloss", "--kafka-destination", "recv", "--standby-replicas", "1",
			"--interval", "100ms", "--backoff-initial", "50ms", "--backoff-max", "200ms",
			"--max-attempts", "3", "--breaker-threshold", "-1", "--concurrency", "16")
	}
	k.waitStable(out)
	return out
}

// groupStats is the kafka part of GET /v1/stats?scope=local.
type groupStats struct {
	Kafka struct {
		Joined     bool  `json:"joined"`
		Generation int32 `json:"generation"`
		Partitions []struct {
			Partition int    `json:"partition"`
			State     string `json:"state"`
		} `json:"partitions"`
	} `json:"kafka"`
}

// waitStable waits until both instances joined one generation and every
// partition is active on one of them: kfake keeps a member that dies
// between its join and its sync, so no instance is killed before that.
func (k *kafkaPower) waitStable(s [2]*sidecar) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var last []groupStats
	err := testkit.Poll(ctx, 20*time.Millisecond, func() (bool, error) {
		last = last[:0]
		active := 0
		for _, sc := range s {
			var st groupStats
			resp, err := http.Get("http://" + sc.addr + "/v1/stats?scope=local")
			if err != nil {
				return false, nil
			}
			err = json.NewDecoder(resp.Body).Decode(&st)
			resp.Body.Close()
			if err != nil || !st.Kafka.Joined {
				return false, nil
			}
			last = append(last, st)
			for _, p := range st.Kafka.Partitions {
				if p.State == "active" {
					active++
				}
			}
		}
		return last[0].Kafka.Generation == last[1].Kafka.Generation && active == kafkaPowerPartitions, nil
	})
	if err != nil {
		k.t.Fatalf("the group did not settle: %v (last %+v)\noutput 0:\n%s\noutput 1:\n%s", err, last, s[0].logs, s[1].logs)
	}
}

// inspectAll checks every store file on both mounts (copied out) and
// that each can be read by the store.
func (k *kafkaPower) inspectAll(when string) {
	for i, f := range k.fss {
		err := filepath.WalkDir(f.Dir(), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".db") {
				return err
			}
			cp := filepath.Join(k.t.TempDir(), "copy.db")
			if err := copyFile(cp, path); err != nil {
				return err
			}
			defer os.Remove(cp)
			rel, _ := filepath.Rel(f.Dir(), path)
			for _, p := range checkDB(cp) {
				k.violate("%s: instance %d, %s: bbolt check: %s", when, i, rel, p)
			}
			if _, err := idsIn(cp, store.StatePending); err != nil {
				k.violate("%s: instance %d, %s: reading the events: %v", when, i, rel, err)
			}
			return nil
		})
		if err != nil {
			k.violate("%s: instance %d: walking the data directory: %v", when, i, err)
		}
	}
}

// listIDs lists the IDs of the group's events in state, through the API.
func listIDs(addr, state string) (map[string]bool, error) {
	ids := make(map[string]bool)
	for after := ""; ; {
		resp, err := http.Get("http://" + addr + "/v1/events?state=" + state + "&limit=1000&after=" + url.QueryEscape(after))
		if err != nil {
			return nil, err
		}
		var page struct {
			Events []struct {
				ID string `json:"id"`
			} `json:"events"`
			Next string `json:"next"`
		}
		err = json.NewDecoder(resp.Body).Decode(&page)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("GET /v1/events?state=%s: %d %v", state, resp.StatusCode, err)
		}
		for _, e := range page.Events {
			ids[e.ID] = true
		}
		if page.Next == "" {
			return ids, nil
		}
		after = page.Next
	}
}

// run cuts the pair's power cuts times under load, then drains and judges.
func (k *kafkaPower) run(cuts int) string {
	t := k.t
	t.Logf("power loss, Kafka mode: %d cuts, -seed %d", cuts, k.seed)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, l := range k.loaders {
		wg.Go(func() { l.run(ctx) })
	}
	wg.Go(func() { k.dels.run(ctx) })
	stopLoad := sync.OnceFunc(func() { cancel(); wg.Wait() })
	defer stopLoad()

	began := time.Now()
	for c := range cuts {
		pair := k.start(c)
		wait := time.NewTimer(time.Duration(100+k.rng.IntN(1200)) * time.Millisecond)
		<-wait.C
		pair[0].kill()
		pair[1].kill()
		for i, f := range k.fss {
			opts := powerfs.CutOptions{KeepPrefix: k.rng.IntN(2) == 0, Tear: k.rng.IntN(2) == 0, Rand: k.rng}
			st, err := f.Cut(opts)
			if err != nil {
				t.Fatalf("cut %d of instance %d: %v", c+1, i, err)
			}
			k.cutStats = append(k.cutStats, st)
		}
		k.inspectAll(fmt.Sprintf("after cut %d", c+1))
	}
	stopLoad()
	loop := time.Since(began)
	final := k.start(cuts)
	drain := k.drain(final)
	dead, derr := listIDs(final[0].addr, "dead")
	pending, perr := listIDs(final[0].addr, "pending")
	if derr != nil || perr != nil {
		k.violate("listing the events at the end: %v %v", derr, perr)
	}
	final[0].stop()
	final[1].stop()
	k.inspectAll("after the final graceful stop")
	f := k.judge(dead, pending)
	return fmt.Sprintf("%d cuts of both instances in %.0fs (-seed %d); %d events acknowledged (by the broker), %d lost, %d deleted events back, %d redeliveries (%d not across a cut), %d deletes acknowledged; %s; bbolt check of every store file after every cut and at the end: %s; final drain %.1fs; receiver answers: %s",
		cuts, loop.Seconds(), k.seed, f.acked, f.lost, f.resurrected, f.redelivered, f.unexplained, len(k.dels.snapshot()),
		k.cutSummary(), k.checkVerdict(), drain.Seconds(), k.rcv.answerCounts())
}

// drain waits until every acknowledged event meant to be delivered has
// been, and nothing is pending or in flight in the group.
func (k *kafkaPower) drain(s [2]*sidecar) time.Duration {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	began := time.Now()
	var want []map[string]bool
	for _, l := range k.loaders[:2] {
		acked, _ := l.ledger()
		want = append(want, acked)
	}
	var last stats
	err := testkit.Poll(ctx, 100*time.Millisecond, func() (bool, error) {
		for _, w := range want {
			if k.rcv.hasAll(w) > 0 {
				return false, nil
			}
		}
		st, err := s[0].stats()
		last = st
		return err == nil && st.Pending == 0 && st.InFlight == 0, nil
	})
	if err != nil {
		k.violate("drain did not finish: %v (last stats %+v)", err, last)
	}
	return time.Since(began)
}

// judge is powerRun.verdict for the group: the final states come from the
// API, and a second delivery is accepted when a cut came between the two,
// that is, when they were sent by runs of different rounds (the owner of
// a partition may change at the restart, and the new owner's copy is the
// changelog as shipped before the cut).
func (k *kafkaPower) judge(dead, pending map[string]bool) figures {
	var f figures
	got := k.rcv.delivered()
	deleted := k.dels.snapshot()
	var lost, back []string
	for _, l := range k.loaders {
		acked, _ := l.ledger()
		f.acked += len(acked)
		for id := range acked {
			switch {
			case deleted[id]:
				if dead[id] || pending[id] || len(got[id]) > 0 {
					back = append(back, id)
				}
			case strings.HasPrefix(id, "pc-ok"):
				if len(got[id]) == 0 {
					lost = append(lost, id)
				}
			default:
				if !dead[id] && !k.dels.tried(id) {
					lost = append(lost, id)
				}
			}
		}
	}
	var bad []string
	for id, ds := range got {
		slices.SortFunc(ds, func(a, b delivery) int {
			if a.Gen/2 != b.Gen/2 {
				return a.Gen/2 - b.Gen/2
			}
			return a.At.Compare(b.At)
		})
		for j := 1; j < len(ds); j++ {
			f.redelivered++
			if ds[j].Gen/2 == ds[j-1].Gen/2 { // both by the pair of one round: no cut between
				bad = append(bad, fmt.Sprintf("%s (by runs %d then %d, %s apart)", id, ds[j-1].Gen, ds[j].Gen, ds[j].At.Sub(ds[j-1].At).Round(time.Millisecond)))
			}
		}
	}
	f.lost, f.resurrected, f.unexplained = len(lost), len(back), len(bad)
	slices.Sort(lost)
	slices.Sort(back)
	slices.Sort(bad)
	if len(lost) > 0 {
		k.violate("%d acknowledged events lost (neither delivered nor dead), e.g. %s", len(lost), sample(lost))
	}
	if len(back) > 0 {
		k.violate("%d events deleted (204) came back (pending, dead or delivered at the end), e.g. %s", len(back), sample(back))
	}
	if len(bad) > 0 {
		k.violate("%d redeliveries with no cut between the two deliveries, e.g. %s", len(bad), sample(bad))
	}
	if len(pending) > 0 {
		k.violate("after the drain the group still holds %d pending events", len(pending))
	}
	k.rcv.mu.Lock()
	k.violations = append(k.violations, k.rcv.violations...)
	k.rcv.mu.Unlock()
	return f
}

// TestPowerLossKafka: Kafka group mode, two instances with a standby
// replica of each partition, the data of each (partition stores,
// checkpoints, standby copies, the local file) on a powerfs of its own;
// both lose power together -cuts times under load, the broker does not.
// Every event the API acknowledged (the broker did) is delivered or dead,
// no deleted event comes back, a second delivery comes only across a cut,
// and every store file passes bbolt's check after every cut.
func TestPowerLossKafka(t *testing.T) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(kafkaPowerPartitions, "events"),
		kfake.GroupMinSessionTimeout(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	r := newPowerRun(t, "")
	k := &kafkaPower{powerRun: r, cluster: cluster, fss: [2]*powerfs.FS{r.fs, powerfs.MountTest(t)},
		addrs: [2]string{r.addr, testkit.FreeAddr(t)}}
	k.tuning = filepath.Join(t.TempDir(), "kafka.yaml")
	if err := os.WriteFile(k.tuning, []byte(kafkaPowerTuning), 0o600); err != nil {
		t.Fatal(err)
	}
	// The events and deletes go to either instance: each produces to the
	// topic, or asks the owner.
	for _, l := range k.loaders[2:] {
		l.addr = k.addrs[1]
	}
	summary := k.run(*cutsFlag)
	report(t, "**Power loss, Kafka mode** (`-cuts %d`): %s.", *cutsFlag, summary)
	for _, v := range k.violations {
		t.Errorf("VIOLATION: %s", v)
	}
}
