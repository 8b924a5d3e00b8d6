//go:build fault

package faults

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/outboxd/outbox/internal/testkit"
	"github.com/outboxd/outbox/kafka"
)

// The harness of the network fault scenarios: a kfake broker in this
// process that advertises a testkit.KafkaFront, so that every connection of
// each outboxd instance to the broker goes through a Link of that
// instance's own (found by its Kafka client ID); each instance delivers to
// the receiver through a Link of its own too. A producer in this process
// writes to the ingest topic without faults.

const (
	fleetTopic      = "events"
	fleetChangelog  = "events-changelog"
	fleetPartitions = 6
	// fleetSession is the group session timeout of fleetTuning.
	fleetSession = time.Second
)

const fleetTuning = `kafka:
  commit_interval: 50ms
  session_timeout: 1s
  heartbeat_interval: 100ms
  rebalance_timeout: 3s
  ship_interval: 10ms
  retry_backoff: 20ms
  retry_backoff_max: 200ms
  dial_timeout: 1s
`

// fleet is one scenario's broker, receiver and outboxd instances.
type fleet struct {
	t       *testing.T
	cluster *kfake.Cluster
	front   *testkit.KafkaFront
	rcv     *receiver
	// toRcv is between the instances and the receiver: one Link, since
	// the members of a group must agree on their static endpoints.
	toRcv   *testkit.Link
	dir     string
	tuning  string
	members []*member
}

// member is one outboxd instance of the group.
type member struct {
	f    *fleet
	idx  int
	db   string
	addr string
	// toAPI is between the other instances and this one's API: the
	// address it advertises to the group.
	toAPI   *testkit.Link
	p       *testkit.Process
	logs    *memberLog
	started time.Time
}

// newFleet starts the broker and n instances, and waits until every
// partition is active on exactly one of them.
func newFleet(t *testing.T, n int) *fleet {
	t.Helper()
	front := testkit.NewKafkaFront(t)
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.ListenFn(front.Listen),
		kfake.SeedTopics(fleetPartitions, fleetTopic), kfake.GroupMinSessionTimeout(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	dir := t.TempDir()
	f := &fleet{t: t, cluster: cluster, front: front, rcv: newReceiver(t), dir: dir, tuning: filepath.Join(dir, "kafka.yaml")}
	f.toRcv = testkit.NewLink(t, strings.TrimPrefix(f.rcv.base, "http://"))
	if err := os.WriteFile(f.tuning, []byte(fleetTuning), 0o600); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		m := &member{f: f, idx: i, db: filepath.Join(dir, fmt.Sprintf("m%d", i), "outboxd.db"), addr: testkit.FreeAddr(t)}
		m.toAPI = testkit.NewLink(t, m.addr)
		if err := os.MkdirAll(filepath.Dir(m.db), 0o700); err != nil {
			t.Fatal(err)
		}
		m.start()
		f.members = append(f.members, m)
	}
	f.waitBalanced(60 * time.Second)
	return f
}

// clientID is the instance's Kafka client ID: the key of its Link to the
// broker.
func (m *member) clientID() string { return fmt.Sprintf("outboxd-%d", m.idx) }

// toBroker is the Link between the instance and the broker.
func (m *member) toBroker() *testkit.Link { return m.f.front.Link(m.clientID()) }

// start runs the instance and waits until it answers /readyz.
func (m *member) start() {
	f := m.f
	f.t.Helper()
	args := []string{"serve", "--db", m.db, "--listen", m.addr, "--log-level", "info", "--log-format", "json",
		"--config", f.tuning, "--allow-private-networks",
		"--endpoint", "recv=http://" + f.toRcv.Addr() + "/gen/0",
		"--kafka-brokers", f.front.Addr(), "--kafka-topic", fleetTopic, "--kafka-group", "faults",
		"--kafka-destination", "recv", "--changelog-topic", fleetChangelog, "--kafka-client-id", m.clientID(),
		"--kafka-advertise-url", "http://" + m.toAPI.Addr(),
		"--concurrency", "8", "--max-uncommitted", "32", "--interval", "50ms",
		"--backoff-initial", "100ms", "--backoff-max", "500ms", "--max-attempts", "100000",
		"--shutdown-grace", "20s"}
	cmd := exec.Command(outboxd(f.t), args...)
	cmd.Env = cleanEnv()
	m.logs = &memberLog{}
	cmd.Stdout, cmd.Stderr = m.logs, m.logs
	m.started = time.Now()
	m.p = testkit.StartProcess(f.t, cmd)
	f.t.Cleanup(func() {
		if f.t.Failed() {
			f.t.Logf("outboxd %d output:\n%s", m.idx, m.logs)
		}
	})
	testkit.WaitFor(f.t, 30*time.Second, fmt.Sprintf("outboxd %d ready", m.idx), func() bool {
		if m.p.Exited() {
			f.t.Fatalf("outboxd %d exited: %v\n%s", m.idx, m.p.Err(), m.logs)
		}
		resp, err := http.Get("http://" + m.addr + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

// stop ends the instance with SIGTERM.
func (m *member) stop() {
	if !m.p.Exited() {
		_, _ = m.p.Stop(syscall.SIGTERM, 30*time.Second)
	}
}

// memberLog keeps an instance's output (the last MiB) and, whole, its
// "partition restored" records.
type memberLog struct {
	mu       sync.Mutex
	tail     lockedBuffer
	partial  []byte
	restores []restoreRecord
}

// restoreRecord is one "kafka: partition restored" log record: the new
// owner read the changelog partition up to To, and writes with Epoch.
type restoreRecord struct {
	Msg       string `json:"msg"`
	Partition int    `json:"partition"`
	To        int64  `json:"to"`
	Epoch     int64  `json:"epoch"`
}

func (l *memberLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.partial = append(l.partial, p...)
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			break
		}
		line := l.partial[:i]
		if bytes.Contains(line, []byte(`"kafka: partition restored"`)) {
			var r restoreRecord
			if json.Unmarshal(line, &r) == nil {
				l.restores = append(l.restores, r)
			}
		}
		l.partial = l.partial[i+1:]
	}
	return l.tail.Write(p)
}

func (l *memberLog) String() string { return l.tail.String() }

func (l *memberLog) restored() []restoreRecord {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.restores)
}

// active returns the partitions the instance delivers now.
func (m *member) active() []int {
	resp, err := statsClient.Get("http://" + m.addr + "/v1/stats?scope=local")
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	var s struct {
		Kafka *struct {
			Partitions []kafka.PartitionStatus `json:"partitions"`
		} `json:"kafka"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&s) != nil || s.Kafka == nil {
		return nil
	}
	var out []int
	for _, p := range s.Kafka.Partitions {
		if p.State == kafka.PartitionActive {
			out = append(out, p.Partition)
		}
	}
	return out
}

// groupStats asks the instance for the group's stats and returns whether
// they are complete (every member answered) and whether it answered 200.
func (m *member) groupStats() (complete, ok bool) {
	client := &http.Client{Timeout: 30 * time.Second}
	defer client.CloseIdleConnections()
	resp, err := client.Get("http://" + m.addr + "/v1/stats")
	if err != nil {
		return false, false
	}
	defer resp.Body.Close()
	var s struct {
		Complete bool `json:"complete"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&s) != nil {
		return false, false
	}
	return s.Complete, true
}

// statsClient gives up quickly: an instance cut off must not hold a wait.
var statsClient = &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{}}

// balanced reports whether every partition is active on exactly one
// instance of ms.
func balanced(ms ...*member) bool {
	seen := map[int]bool{}
	for _, m := range ms {
		for _, p := range m.active() {
			if seen[p] {
				return false
			}
			seen[p] = true
		}
	}
	return len(seen) == fleetPartitions
}

// waitBalanced waits until every partition is active on exactly one
// instance.
func (f *fleet) waitBalanced(timeout time.Duration) {
	f.t.Helper()
	testkit.WaitFor(f.t, timeout, "every partition active on one instance", func() bool { return balanced(f.members...) })
}

// ---- the producer ----

// production writes records to the ingest topic, without faults, until
// stopped, and keeps the ledger of what the broker acknowledged and when.
type production struct {
	w    *kafkago.Writer
	tr   *kafkago.Transport
	stop chan struct{}
	done chan struct{}

	mu    sync.Mutex
	acked map[string]time.Time
	nacks int
}

// produce writes batch records every tick, with IDs prefix-N in the
// outbox-id header and {"id": ID} as the value.
func (f *fleet) produce(prefix string, batch int, tick time.Duration) *production {
	tr := &kafkago.Transport{ClientID: "faults-producer", DialTimeout: time.Second}
	pr := &production{tr: tr, stop: make(chan struct{}), done: make(chan struct{}), acked: map[string]time.Time{},
		w: &kafkago.Writer{Addr: kafkago.TCP(f.front.Addr()), Topic: fleetTopic, Transport: tr, Balancer: &kafkago.RoundRobin{},
			BatchTimeout: time.Millisecond, BatchSize: batch, RequiredAcks: kafkago.RequireAll}}
	go pr.run(prefix, batch, tick)
	f.t.Cleanup(pr.finish)
	return pr
}

func (pr *production) run(prefix string, batch int, tick time.Duration) {
	defer close(pr.done)
	tk := time.NewTicker(tick)
	defer tk.Stop()
	for n := 0; ; n += batch {
		select {
		case <-pr.stop:
			return
		case <-tk.C:
		}
		msgs := make([]kafkago.Message, batch)
		for i := range msgs {
			id := fmt.Sprintf("%s-%06d", prefix, n+i)
			msgs[i] = kafkago.Message{Key: []byte(id), Value: []byte(`{"id":"` + id + `"}`),
				Headers: []kafkago.Header{{Key: kafka.DefaultIDHeader, Value: []byte(id)}}}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := pr.w.WriteMessages(ctx, msgs...)
		cancel()
		var we kafkago.WriteErrors
		now := time.Now()
		pr.mu.Lock()
		for i, m := range msgs {
			if err == nil || (errors.As(err, &we) && we[i] == nil) {
				pr.acked[string(m.Key)] = now
			} else {
				pr.nacks++
			}
		}
		pr.mu.Unlock()
	}
}

// finish stops the producer and waits for it; safe to call twice.
func (pr *production) finish() {
	select {
	case <-pr.stop:
	default:
		close(pr.stop)
	}
	<-pr.done
	_ = pr.w.Close()
	pr.tr.CloseIdleConnections()
}

// ledger returns when each acknowledged ID was acknowledged.
func (pr *production) ledger() map[string]time.Time {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	out := make(map[string]time.Time, len(pr.acked))
	for id, at := range pr.acked {
		out[id] = at
	}
	return out
}

// ackedSince reports whether a record was acknowledged after at.
func (pr *production) ackedSince(at time.Time) bool {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	for _, t := range pr.acked {
		if t.After(at) {
			return true
		}
	}
	return false
}

// ---- the changelog ----

// changelogRecord is what the fencing check reads of one changelog record.
type changelogRecord struct {
	offset int64
	epoch  int64
	fence  bool
}

// readChangelog reads every record of every changelog partition.
func (f *fleet) readChangelog() (map[int][]changelogRecord, error) {
	out := map[int][]changelogRecord{}
	for p := range fleetPartitions {
		c, err := kafkago.DialLeader(context.Background(), "tcp", f.front.Addr(), fleetChangelog, p)
		if err != nil {
			return nil, err
		}
		recs, err := readPartition(c)
		c.Close()
		if err != nil {
			return nil, fmt.Errorf("changelog partition %d: %w", p, err)
		}
		out[p] = recs
	}
	return out, nil
}

func readPartition(c *kafkago.Conn) ([]changelogRecord, error) {
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	first, end, err := c.ReadOffsets()
	if err != nil {
		return nil, err
	}
	var out []changelogRecord
	for next := first; next < end; {
		if _, err := c.Seek(next, kafkago.SeekAbsolute); err != nil {
			return nil, err
		}
		batch := c.ReadBatch(1, 16<<20)
		for {
			m, err := batch.ReadMessage()
			if err != nil {
				break
			}
			rec := changelogRecord{offset: m.Offset}
			for _, h := range m.Headers {
				switch h.Key {
				case kafka.HeaderEpoch:
					rec.epoch, _ = strconv.ParseInt(string(h.Value), 10, 64)
				case kafka.HeaderOp:
					rec.fence = string(h.Value) == "fence"
				}
			}
			out = append(out, rec)
			next = m.Offset + 1
		}
		if err := batch.Close(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// fencing is what the changelog says about its writers.
type fencing struct {
	// accepted counts records that a later restore applies although the
	// owner of the time never saw them: written by another instance between
	// the end its restore read to and its fence record. Two owners wrote the
	// partition; must be 0.
	accepted int
	// skipped counts records of a fenced owner (an epoch below a fence
	// already in the partition), which every restore skips.
	skipped int
	owners  int // restores checked
}

// checkFencing reads the changelog and the instances' restores.
func (f *fleet) checkFencing() (fencing, error) {
	log, err := f.readChangelog()
	if err != nil {
		return fencing{}, err
	}
	var v fencing
	for _, recs := range log {
		var top int64
		for _, r := range recs {
			if r.epoch < top {
				v.skipped++
			}
			top = max(top, r.epoch)
		}
	}
	for _, m := range f.members {
		for _, rs := range m.logs.restored() {
			recs := log[rs.Partition]
			i := slices.IndexFunc(recs, func(r changelogRecord) bool { return r.offset >= rs.To })
			if i < 0 {
				continue
			}
			v.owners++
			for _, r := range recs[i:] {
				if r.fence && r.epoch == rs.Epoch {
					break
				}
				if r.epoch >= rs.Epoch {
					break // no fence of its own: it lost the partition first
				}
				v.accepted++
			}
		}
	}
	return v, nil
}
