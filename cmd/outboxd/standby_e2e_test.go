//go:build unix

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"

	"github.com/outboxd/outbox/internal/openapitest"
	"github.com/outboxd/outbox/internal/testkit"
	"github.com/outboxd/outbox/kafka"
)

// The failover tests of standby replicas (--standby-replicas): three
// outboxd instances in one group on a 6-partition topic of a kfake broker,
// the pending events all on one instance's partitions; it is killed with
// SIGKILL and its state deleted, and the survivors take its partitions
// over. TestFailoverOntoAWarmStandby runs in CI with a few thousand events;
// TestStandbyFailoverTimes measures the time to the first redelivery with
// and without a standby for $OUTBOXD_E2E_STANDBY_EVENTS events (unset: the
// test is skipped):
//
//	OUTBOXD_E2E_STANDBY_EVENTS=100000 go test -run TestStandbyFailoverTimes -v -timeout 30m ./cmd/outboxd/

// standbyEventsEnv names the variable that sets the size of
// TestStandbyFailoverTimes.
const standbyEventsEnv = "OUTBOXD_E2E_STANDBY_EVENTS"

// With one standby replica, the partitions of a killed instance (its disk
// lost too) move to the survivors that kept them warm: their restores are
// caught up from the standbys' checkpoints, reading only the tail the
// standbys had not applied, never the whole changelog.
func TestFailoverOntoAWarmStandby(t *testing.T) {
	t.Parallel()
	const n = 3000
	r := standbyFailover(t, n, 1)
	for p, rec := range r.restores {
		if rec.Mode != "checkpoint" {
			t.Errorf("partition %d of the killed instance restored by %s (%d records), want from the standby's checkpoint", p, rec.Mode, rec.Records)
		}
		// The tail: what the owner wrote after the standby's last fetch
		// (a few of its attempts' outcomes), not the n enqueues.
		if rec.Records > n/10 {
			t.Errorf("partition %d: the take-over read %d changelog records, more than a tail of the %d events", p, rec.Records, n)
		}
	}
}

// TestStandbyFailoverTimes logs, for the same load, the time from the
// SIGKILL to the first redelivery of the killed instance's events without
// a standby (its partitions rebuilt from the changelog) and with one (caught
// up from the standbys). No timed assertion: the figures are for the
// operator's documentation.
func TestStandbyFailoverTimes(t *testing.T) {
	n, err := strconv.Atoi(os.Getenv(standbyEventsEnv))
	if err != nil || n <= 0 {
		t.Skipf("set %s to the number of pending events (100000 for the documented figures)", standbyEventsEnv)
	}
	var lines []string
	for _, standbys := range []int{0, 1} {
		r := standbyFailover(t, n, standbys)
		lines = append(lines, r.String())
	}
	for _, l := range lines {
		t.Log(l)
	}
}

// standbyResult is what one failover of standbyFailover measured.
type standbyResult struct {
	standbys, events int
	total, rebalance time.Duration
	restored         time.Duration     // SIGKILL to the last of the killed instance's partitions restored
	restores         map[int]logRecord // the killed instance's partitions, as the survivors restored them
}

func (r standbyResult) String() string {
	var parts []string
	for _, p := range slices.Sorted(func(yield func(int) bool) {
		for p := range r.restores {
			if !yield(p) {
				return
			}
		}
	}) {
		rec := r.restores[p]
		parts = append(parts, fmt.Sprintf("partition %d %s %d records in %s", p, rec.Mode, rec.Records, rec.Took.Round(time.Millisecond)))
	}
	return fmt.Sprintf("standby replicas %d, %d pending events on the killed instance: SIGKILL to first redelivery %s; "+
		"rebalance (SIGKILL to the next assignment) %s; SIGKILL to every lost partition restored %s; restores: %s",
		r.standbys, r.events, r.total.Round(time.Millisecond), r.rebalance.Round(time.Millisecond),
		r.restored.Round(time.Millisecond), strings.Join(parts, ", "))
}

// standbyFailover starts three instances with standbys standby replicas,
// produces n records to the partitions of one of them (the receiver holds
// each request 1s and answers 503; a 503 waits an hour, so the events stay
// pending and the changelog quiet), waits until they are ingested and
// shipped and (with standbys) applied by the standbys, kills that instance
// and deletes its state, switches the receiver to 204 and measures the
// time to the first 204 of one of its events.
func standbyFailover(t *testing.T, n, standbys int) standbyResult {
	t.Helper()
	const parts, instances, victim = 6, 3, 1
	res := standbyResult{standbys: standbys, events: n}
	cluster := newEventsCluster(t, parts)
	defer cluster.Close()
	brokers := cluster.ListenAddrs()
	fr := newFailoverReceiver(time.Second)
	defer fr.srv.Close()

	base := t.TempDir()
	tuning := writeTuning(t, base, fleetTuning)
	dirs, procs := startInstances(t, base, instances, "--config", tuning, "--endpoint", "orders="+fr.srv.URL+"/hook,allow-private",
		"--kafka-brokers", strings.Join(brokers, ","), "--kafka-topic", "events", "--kafka-group", "standby",
		"--kafka-destination", "orders", "--backoff-initial", "1h", "--backoff-max", "1h",
		"--standby-replicas", strconv.Itoa(standbys))
	defer func() {
		for i, p := range procs {
			if i != victim {
				p.signal(syscall.SIGTERM, 30*time.Second)
			}
		}
	}()

	// A settled generation: the three share the six partitions, and with
	// standbys each keeps its share of them.
	var gen int32
	testkit.WaitFor(t, waitLong, "a generation sharing the partitions and their standbys among the three", func() bool {
		first, owned := int32(0), 0
		for i, p := range procs {
			g, ps := lastAssignment(p)
			if i > 0 && g != first || len(ps) == 0 {
				return false
			}
			first, owned = g, owned+len(ps)
			if standbys > 0 && len(procStandbys(p, "tailing")) == 0 {
				return false
			}
		}
		gen = first
		return owned == parts
	})
	_, lost := lastAssignment(procs[victim])
	if standbys > 0 {
		// /v1/stats lists the standbys, as the OpenAPI document says.
		resp, err := statsClient.Get(procs[0].url("/v1/stats?scope=local"))
		if err != nil {
			t.Fatal(err)
		}
		body := readAll(t, resp)
		openapitest.Check(t, resp.Request, nil, resp.StatusCode, resp.Header, []byte(body))
		var st struct {
			Kafka struct {
				Standbys []kafka.StandbyStatus `json:"standbys"`
			} `json:"kafka"`
		}
		if err := json.Unmarshal([]byte(body), &st); err != nil || len(st.Kafka.Standbys) == 0 {
			t.Errorf("/v1/stats lists no standby (%v): %s", err, body)
		}
	}

	// n records, all to the victim's partitions.
	tr := &kafkago.Transport{DialTimeout: time.Second}
	defer tr.CloseIdleConnections()
	var next atomic.Int64
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	writeOrders(ctx, t, brokers, tr, kafkago.BalancerFunc(func(kafkago.Message, ...int) int {
		return lost[int(next.Add(1))%len(lost)]
	}), n)

	// Every record ingested and its entry shipped: the group commits an
	// offset only then.
	cl := &kafkago.Client{Addr: kafkago.TCP(brokers...), Transport: tr, Timeout: 5 * time.Second}
	testkit.WaitFor(t, 10*time.Minute, "every record ingested and shipped", func() bool {
		committed, ok := committedOffsets(ctx, cl, "standby", lost)
		return ok && committed >= int64(n)
	})
	if standbys > 0 {
		// The standbys have applied the changelog as it was once
		// everything was shipped (the owner goes on writing its attempts'
		// outcomes: those are the tail a take-over catches up).
		ends := changelogEnds(t, cl, "standby-events-changelog", lost)
		testkit.WaitFor(t, 10*time.Minute, "the standbys of the victim's partitions caught up", func() bool {
			for _, p := range lost {
				caught := false
				for i, pr := range procs {
					if i != victim && standbyApplied(pr, p) >= ends[p] {
						caught = true
					}
				}
				if !caught {
					return false
				}
			}
			return true
		})
	}
	killedParts := map[string]bool{}
	for _, p := range lost {
		killedParts[strconv.Itoa(p)] = true
	}
	fr.killed.Store(&killedParts)

	kill := time.Now()
	if err := procs[victim].cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-procs[victim].done
	if err := os.RemoveAll(dirs[victim]); err != nil {
		t.Fatal(err)
	}
	fr.accept.Store(true)
	testkit.WaitFor(t, 10*time.Minute, "the first redelivery of the killed instance's events", func() bool { return fr.first.Load() != 0 })
	res.total = time.Unix(0, fr.first.Load()).Sub(kill)

	var tk takeOver
	testkit.WaitFor(t, time.Minute, "the survivors' logs of the next assignment and the restores", func() bool {
		return tk.seen(procs, victim, gen, lost)
	})
	res.restores = tk.restored
	res.rebalance = tk.assigned.Sub(kill)
	for _, rec := range res.restores {
		res.restored = max(res.restored, rec.Time.Sub(kill))
	}
	t.Log(res)
	return res
}

// changelogEnds returns the end offsets of the changelog topic's partitions.
func changelogEnds(t *testing.T, cl *kafkago.Client, topic string, parts []int) map[int]int64 {
	t.Helper()
	var reqs []kafkago.OffsetRequest
	for _, p := range parts {
		reqs = append(reqs, kafkago.LastOffsetOf(p))
	}
	resp, err := cl.ListOffsets(context.Background(), &kafkago.ListOffsetsRequest{Topics: map[string][]kafkago.OffsetRequest{topic: reqs}})
	if err != nil {
		t.Fatal(err)
	}
	out := map[int]int64{}
	for _, po := range resp.Topics[topic] {
		if po.Error != nil {
			t.Fatal(po.Error)
		}
		out[po.Partition] = po.LastOffset
	}
	return out
}

// procMetrics returns the samples of the metric family name from p's
// /metrics, by their label set ("" without labels); nil when p does not
// answer.
func procMetrics(p *proc, name string) map[string]float64 {
	resp, err := getMetrics(p)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil
	}
	text := string(b)
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + `(\{[^}]*\})? (\S+)$`)
	out := map[string]float64{}
	for _, m := range re.FindAllStringSubmatch(text, -1) {
		if v, err := strconv.ParseFloat(m[2], 64); err == nil {
			out[m[1]] = v
		}
	}
	return out
}

// procStandbys returns the partitions p keeps a standby of in state.
func procStandbys(p *proc, state string) []int {
	var out []int
	re := regexp.MustCompile(`partition="(\d+)",state="` + regexp.QuoteMeta(state) + `"`)
	for labels, v := range procMetrics(p, "outboxd_kafka_standby_state") {
		if m := re.FindStringSubmatch(labels); m != nil && v == 1 {
			part, _ := strconv.Atoi(m[1])
			out = append(out, part)
		}
	}
	return out
}

// standbyApplied is the changelog offset p's standby of partition part has
// applied, -1 when p keeps none.
func standbyApplied(p *proc, part int) int64 {
	v, ok := procMetrics(p, "outboxd_kafka_standby_applied_offset")[fmt.Sprintf(`{partition="%d"}`, part)]
	if !ok {
		return -1
	}
	return int64(v)
}
