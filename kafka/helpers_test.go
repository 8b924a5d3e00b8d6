package kafka

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
	"go.uber.org/goleak"

	"github.com/outboxd/outbox/outbox"
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(childMain())
	}
	goleak.VerifyTestMain(m)
}

// newCluster starts an in-process Kafka-protocol broker on loopback.
func newCluster(t testing.TB, opts ...kfake.Opt) *kfake.Cluster {
	t.Helper()
	opts = append([]kfake.Opt{kfake.NumBrokers(1), kfake.GroupMinSessionTimeout(100 * time.Millisecond)}, opts...)
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// testConfig is a Config with intervals short enough for tests.
func testConfig(brokers []string, topic string) Config {
	return Config{
		Brokers:           brokers,
		Topic:             topic,
		Group:             "g",
		Destination:       "dest",
		BatchSize:         100,
		CommitInterval:    50 * time.Millisecond,
		SessionTimeout:    3 * time.Second,
		HeartbeatInterval: 200 * time.Millisecond,
		RebalanceTimeout:  5 * time.Second,
		ShipInterval:      10 * time.Millisecond,
		RetryBackoff:      20 * time.Millisecond,
		RetryBackoffMax:   200 * time.Millisecond,
		DialTimeout:       time.Second,
	}
}

// producer writes test records with its own transport (closed at cleanup).
type producer struct {
	tr *kafkago.Transport
	w  *kafkago.Writer
}

func newProducer(t testing.TB, brokers []string, topic string) *producer {
	t.Helper()
	tr := &kafkago.Transport{DialTimeout: time.Second}
	p := &producer{tr: tr, w: &kafkago.Writer{
		Addr: kafkago.TCP(brokers...), Topic: topic, Transport: tr,
		Balancer: &kafkago.Hash{}, BatchSize: 1000, BatchTimeout: time.Millisecond,
		RequiredAcks: kafkago.RequireAll,
	}}
	t.Cleanup(func() {
		_ = p.w.Close()
		tr.CloseIdleConnections()
	})
	return p
}

func (p *producer) produce(t testing.TB, msgs ...kafkago.Message) {
	t.Helper()
	if err := p.write(msgs...); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

func (p *producer) write(msgs ...kafkago.Message) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for len(msgs) > 0 {
		n := min(len(msgs), 1000)
		var err error
		for range 3 { // kfake's in-memory log now and then refuses a batch
			if err = p.w.WriteMessages(ctx, msgs[:n]...); err == nil {
				break
			}
		}
		if err != nil {
			return err
		}
		msgs = msgs[n:]
	}
	return nil
}

// records builds n records "v-<i>" with keys k-<i%keys>, i counting from first.
func records(first, n, keys int) []kafkago.Message {
	out := make([]kafkago.Message, n)
	for i := range out {
		j := first + i
		out[i] = kafkago.Message{Key: []byte("k-" + strconv.Itoa(j%keys)), Value: []byte("v-" + strconv.Itoa(j))}
	}
	return out
}

// admin is a kafka-go client for assertions on the broker.
func admin(t testing.TB, brokers []string) *kafkago.Client {
	t.Helper()
	tr := &kafkago.Transport{DialTimeout: time.Second}
	t.Cleanup(tr.CloseIdleConnections)
	return &kafkago.Client{Addr: kafkago.TCP(brokers...), Transport: tr, Timeout: 5 * time.Second}
}

// endOffsets returns the end offset of each partition.
func endOffsets(t testing.TB, cl *kafkago.Client, topic string, partitions int) map[int]int64 {
	t.Helper()
	out, err := listEndOffsets(cl, topic, partitions)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// listEndOffsets returns the end offsets of topic's partitions, or the
// error the broker answered (kfake answers a transient one while it
// elects a coordinator or creates the topic).
func listEndOffsets(cl *kafkago.Client, topic string, partitions int) (map[int]int64, error) {
	var reqs []kafkago.OffsetRequest
	for p := 0; p < partitions; p++ {
		reqs = append(reqs, kafkago.LastOffsetOf(p))
	}
	resp, err := cl.ListOffsets(context.Background(), &kafkago.ListOffsetsRequest{Topics: map[string][]kafkago.OffsetRequest{topic: reqs}})
	if err != nil {
		return nil, err
	}
	out := make(map[int]int64)
	for _, po := range resp.Topics[topic] {
		if po.Error != nil {
			return nil, po.Error
		}
		out[po.Partition] = po.LastOffset
	}
	return out, nil
}

// committedOffsets returns the group's committed offsets (-1: none).
func committedOffsets(t testing.TB, cl *kafkago.Client, group, topic string, partitions int) map[int]int64 {
	t.Helper()
	ps := make([]int, partitions)
	for i := range ps {
		ps[i] = i
	}
	resp, err := cl.OffsetFetch(context.Background(), &kafkago.OffsetFetchRequest{GroupID: group, Topics: map[string][]int{topic: ps}})
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[int]int64)
	for _, p := range resp.Topics[topic] {
		out[p.Partition] = p.CommittedOffset
	}
	return out
}

// recorder is a Sink that records deliveries and answers by ID.
type recorder struct {
	name   string
	mu     sync.Mutex
	got    map[string]int    // deliveries per ID
	by     map[string]string // first deliverer per ID
	body   map[string]string
	action func(d *outbox.Delivery) outbox.Action
	shared *recorder // when set, deliveries are recorded there too
}

func newRecorder(name string) *recorder {
	return &recorder{name: name, got: map[string]int{}, by: map[string]string{}, body: map[string]string{}}
}

func (r *recorder) Deliver(_ context.Context, d *outbox.Delivery) outbox.Result {
	a := outbox.ActionSuccess
	if r.action != nil {
		a = r.action(d)
	}
	for _, x := range []*recorder{r, r.shared} {
		if x == nil {
			continue
		}
		x.mu.Lock()
		x.got[d.ID]++
		if _, ok := x.by[d.ID]; !ok {
			x.by[d.ID] = r.name
		}
		x.body[d.ID] = string(d.Payload)
		x.mu.Unlock()
	}
	status := 200
	switch a {
	case outbox.ActionPark:
		status = 404
	case outbox.ActionDead:
		status = 400
	case outbox.ActionRetry:
		status = 503
	}
	return outbox.Result{Action: a, Status: status}
}

func (r *recorder) distinct() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.got)
}

func (r *recorder) count(id string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.got[id]
}

func (r *recorder) snapshot() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]int, len(r.got))
	for k, v := range r.got {
		out[k] = v
	}
	return out
}

// openOutbox opens and starts an outbox on a file in dir; it is stopped at
// cleanup.
func openOutbox(t testing.TB, path string, sink outbox.Sink, tweak func(*outbox.Config)) *outbox.Outbox {
	t.Helper()
	cfg := outbox.Config{
		Sink:           sink,
		Interval:       20 * time.Millisecond,
		BackoffInitial: 20 * time.Millisecond,
		BackoffMax:     100 * time.Millisecond,
		NoSync:         true,
		// The test sinks fail events by their ID or key, not because a
		// receiver is down: the breaker would hold their endpoint.
		Breaker: outbox.Breaker{Threshold: -1},
	}
	if tweak != nil {
		tweak(&cfg)
	}
	o, err := outbox.Open(path, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := o.Stop(ctx); err != nil {
			t.Errorf("outbox stop: %v", err)
		}
	})
	return o
}

// startRunner starts a Runner closed at cleanup (before its outbox stops).
func startRunner(t testing.TB, o *outbox.Outbox, cfg Config) *Runner {
	t.Helper()
	r, err := Start(context.Background(), o, cfg, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeRunner(t, r) })
	return r
}

func closeRunner(t testing.TB, r *Runner) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := r.Close(ctx); err != nil {
		t.Errorf("runner close: %v", err)
	}
}

func dbPath(t testing.TB, name string) string {
	return filepath.Join(t.TempDir(), name+".db")
}

// expectedIDs lists the IDs of every record of the topic.
func expectedIDs(topic string, ends map[int]int64) []string {
	var ids []string
	for p, end := range ends {
		for off := int64(0); off < end; off++ {
			ids = append(ids, RecordID(topic, p, off))
		}
	}
	sort.Strings(ids)
	return ids
}

func keysOf(m map[string]int) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func sameStrings(a, b []string) error {
	if len(a) != len(b) {
		return fmt.Errorf("%d vs %d items", len(a), len(b))
	}
	for i := range a {
		if a[i] != b[i] {
			return fmt.Errorf("item %d: %q vs %q", i, a[i], b[i])
		}
	}
	return nil
}

// testLogger logs to the test output when KAFKA_TEST_LOG is set (debug
// level with "debug"), and discards otherwise.
func testLogger(t testing.TB) *slog.Logger {
	v := os.Getenv("KAFKA_TEST_LOG")
	if v == "" {
		return slog.New(slog.DiscardHandler)
	}
	level := slog.LevelInfo
	if v == "debug" {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})).With("test", t.Name())
}

func kfakeSeed(partitions int32, topics ...string) []kfake.Opt {
	return []kfake.Opt{kfake.SeedTopics(partitions, topics...)}
}

func sortStrings(s []string) []string {
	sort.Strings(s)
	return s
}
