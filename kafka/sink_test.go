package kafka

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
	"github.com/segmentio/kafka-go/sasl/plain"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.opentelemetry.io/otel/trace"

	"github.com/outboxd/outbox/internal/sinktest"
	"github.com/outboxd/outbox/internal/testkit"
	"github.com/outboxd/outbox/outbox"
)

// newTestSink makes a Sink of the endpoints and topics (name, topic, ...)
// with test timings; it is closed at cleanup.
func newTestSink(t testing.TB, brokers []string, tweak func(*Config), endpoints ...string) *Sink {
	t.Helper()
	cfg := testConfig(brokers, "")
	cfg.ProduceTimeout = 2 * time.Second
	if tweak != nil {
		tweak(&cfg)
	}
	topics := map[string]string{}
	for i := 0; i+1 < len(endpoints); i += 2 {
		topics[endpoints[i]] = endpoints[i+1]
	}
	s, err := NewSink(SinkConfig{Kafka: cfg, Topics: topics, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// topicRecords returns every record of topic's partitions, partition by
// partition.
func topicRecords(t testing.TB, brokers []string, topic string, partitions int) []kafkago.Message {
	t.Helper()
	cl := admin(t, brokers)
	var out []kafkago.Message
	for p := range partitions {
		out = append(out, fetchPartition(t, cl, topic, p)...)
	}
	return out
}

func headerMap(hs []kafkago.Header) map[string]string {
	m := make(map[string]string, len(hs))
	for _, h := range hs {
		m[h.Key] = string(h.Value)
	}
	return m
}

// The Sink passes the suite every sink that publishes to a broker passes.
func TestSinkConformance(t *testing.T) {
	sinktest.RunBroker(t, func(t *testing.T, unreachable bool) sinktest.Broker {
		if unreachable {
			s := newTestSink(t, []string{testkit.FreeAddr(t)}, func(c *Config) { c.ProduceTimeout = 300 * time.Millisecond },
				sinktest.Destination, "out")
			return sinktest.Broker{Sink: s}
		}
		c := newCluster(t, kfakeSeed(3, "out")...)
		return sinktest.Broker{
			Sink: newTestSink(t, c.ListenAddrs(), nil, sinktest.Destination, "out"),
			Published: func(t *testing.T) []sinktest.Published {
				var out []sinktest.Published
				for _, m := range topicRecords(t, c.ListenAddrs(), "out", 3) {
					h := headerMap(m.Headers)
					out = append(out, sinktest.Published{ID: h[SinkIDHeader], Key: string(m.Key), Payload: m.Value, Headers: h})
				}
				return out
			},
			Stall: func() (<-chan struct{}, func()) { return stallProduce(t, c) },
		}
	})
}

// stallProduce holds the next produce request c receives until resume.
func stallProduce(t testing.TB, c *kfake.Cluster) (<-chan struct{}, func()) {
	arrived := make(chan struct{}, 1)
	release := make(chan struct{})
	c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		arrived <- struct{}{}
		c.SleepControl(func() { <-release })
		return nil, nil, false
	})
	var once sync.Once
	resume := func() { once.Do(func() { close(release) }) }
	t.Cleanup(resume)
	return arrived, resume
}

// A delivery's record: the event's key (the ID without one; a binary key
// as its bytes), the payload verbatim, the event's headers, and outbox-id,
// outbox-topic and the delivery span's traceparent, which an event header
// of the same name cannot replace. It lands on the partition Kafka's
// default partitioner picks for the key.
func TestSinkRecord(t *testing.T) {
	c := newCluster(t, kfakeSeed(3, "audit")...)
	s := newTestSink(t, c.ListenAddrs(), nil, "audit-ep", "audit")
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}, TraceFlags: trace.FlagsSampled})
	ctx := trace.ContextWithSpanContext(context.Background(), sc)
	ds := []*outbox.Delivery{
		{ID: "e1", Key: "order-7", Endpoint: "audit-ep", Destination: "audit-ep", Topic: "order.paid",
			Headers: map[string]string{"X-Tenant": "acme", "outbox-id": "forged"}, Payload: []byte("\x00{\"a\":1}")},
		{ID: "e2", Endpoint: "audit-ep", Destination: "audit-ep", Payload: []byte("no key")},
		{ID: "e3", Key: mapKey([]byte{0xff, 0x00}), Endpoint: "audit-ep", Destination: "audit-ep"},
	}
	for _, d := range ds {
		if res := s.Deliver(ctx, d); res.Action != outbox.ActionSuccess {
			t.Fatalf("%s: %+v", d.ID, res)
		}
	}
	byID := map[string]kafkago.Message{}
	for _, m := range topicRecords(t, c.ListenAddrs(), "audit", 3) {
		byID[headerMap(m.Headers)[SinkIDHeader]] = m
	}
	wantKeys := map[string]string{"e1": "order-7", "e2": "e2", "e3": "\xff\x00"}
	for _, d := range ds {
		m, ok := byID[d.ID]
		if !ok {
			t.Fatalf("%s: not on the topic (%d records)", d.ID, len(byID))
		}
		h := headerMap(m.Headers)
		if string(m.Key) != wantKeys[d.ID] || string(m.Value) != string(d.Payload) {
			t.Errorf("%s: key %q value %q; want %q, %q", d.ID, m.Key, m.Value, wantKeys[d.ID], d.Payload)
		}
		if want := (KeyBalancer{}).Balance(kafkago.Message{Key: m.Key}, 0, 1, 2); m.Partition != want {
			t.Errorf("%s: on partition %d, want %d (the key's)", d.ID, m.Partition, want)
		}
		if h[SinkIDHeader] != d.ID || h["traceparent"] != "00-01000000000000000000000000000000-0200000000000000-01" {
			t.Errorf("%s: headers %v; want the ID and the span's traceparent", d.ID, h)
		}
	}
	if h := headerMap(byID["e1"].Headers); h["X-Tenant"] != "acme" || h[SinkTopicHeader] != "order.paid" {
		t.Errorf("e1: headers %v; want the event's and its topic", h)
	}
	if _, ok := headerMap(byID["e2"].Headers)[SinkTopicHeader]; ok {
		t.Errorf("e2 has no topic, yet the record has the topic header")
	}
}

// Concurrent deliveries to one partition share produce requests.
func TestSinkBatchesConcurrentDeliveries(t *testing.T) {
	c := newCluster(t, kfakeSeed(1, "out")...)
	produces := countProduces(c, "out")
	s := newTestSink(t, c.ListenAddrs(), nil, "ep", "out")
	const n = 200
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			if res := s.Deliver(context.Background(), &outbox.Delivery{ID: fmt.Sprint("e", i), Endpoint: "ep"}); res.Action != outbox.ActionSuccess {
				t.Errorf("%d: %+v", i, res)
			}
		})
	}
	wg.Wait()
	if got := len(topicRecords(t, c.ListenAddrs(), "out", 1)); got != n {
		t.Fatalf("%d records, want %d", got, n)
	}
	if reqs := produces()[0]; reqs >= n {
		t.Errorf("%d produce requests for %d concurrent deliveries; want them shared", reqs, n)
	}
}

// The policy table with the brokers' real error values: refusals that
// sending again cannot change are dead letters, the rest are retried.
func TestSinkPolicyTable(t *testing.T) {
	cases := []struct {
		err  error
		want outbox.Action
	}{
		{kafkago.TopicAuthorizationFailed, outbox.ActionDead},
		{kafkago.MessageSizeTooLarge, outbox.ActionDead},
		{kafkago.UnknownTopicOrPartition, outbox.ActionDead},
		{kafkago.InvalidTopic, outbox.ActionDead},
		{fmt.Errorf("record 0 of the batch refused: %w", kafkago.MessageSizeTooLarge), outbox.ActionDead},
		{&timeoutError{err: context.DeadlineExceeded, last: kafkago.UnknownTopicOrPartition}, outbox.ActionDead},
		{&timeoutError{err: context.DeadlineExceeded, last: kafkago.LeaderNotAvailable}, outbox.ActionRetry},
		{&timeoutError{err: context.DeadlineExceeded}, outbox.ActionRetry},
		{kafkago.LeaderNotAvailable, outbox.ActionRetry},
		{kafkago.NotLeaderForPartition, outbox.ActionRetry},
		{kafkago.NotEnoughReplicas, outbox.ActionRetry},
		{kafkago.NotEnoughReplicasAfterAppend, outbox.ActionRetry},
		{kafkago.RequestTimedOut, outbox.ActionRetry},
		{protocol.ErrNoLeader, outbox.ActionRetry},
		{&net.OpError{Op: "dial", Err: errors.New("connection refused")}, outbox.ActionRetry},
		{context.Canceled, outbox.ActionRetry},
	}
	for _, c := range cases {
		if got := errorAction(c.err); got != c.want {
			t.Errorf("%v: %v, want %v", c.err, got, c.want)
		}
	}
}

// What the brokers refuse for good becomes a dead letter with the
// broker's reason, and holds up nothing else: a topic the sink's user may
// not write to (ACLs), a record larger than the broker takes, a topic
// that does not exist.
func TestSinkRefusalsAreDeadLetters(t *testing.T) {
	c := newCluster(t, kfake.EnableSASL(), kfake.EnableACLs(), kfake.Superuser("PLAIN", "admin", "admin"),
		kfake.User("PLAIN", "app", "app-secret",
			kfake.ACL{Resource: kmsg.ACLResourceTypeTopic, Name: "allowed", Pattern: kmsg.ACLResourcePatternTypeLiteral, Operation: kmsg.ACLOperationAll, Allow: true},
			kfake.ACL{Resource: kmsg.ACLResourceTypeTopic, Name: "denied", Pattern: kmsg.ACLResourcePatternTypeLiteral, Operation: kmsg.ACLOperationDescribe, Allow: true}),
		kfake.BrokerConfigs(map[string]string{"message.max.bytes": "2048"}),
		kfake.SeedTopics(1, "allowed", "denied"))
	s := newTestSink(t, c.ListenAddrs(), func(cfg *Config) {
		cfg.SASL = SASLConfig{Mechanism: "plain", Username: "app", Password: "app-secret"}
		cfg.ProduceTimeout = 500 * time.Millisecond
	}, "ok", "allowed", "denied", "denied", "missing", "no-such-topic")
	o := openOutbox(t, dbPath(t, "refusals"), s, nil)
	ctx := context.Background()
	events := []outbox.Event{
		{ID: "big", Destination: "ok", Payload: []byte(strings.Repeat("x", 4096))},
		{ID: "denied", Destination: "denied", Payload: []byte("{}")},
		{ID: "missing", Destination: "missing", Payload: []byte("{}")},
		{ID: "fine", Destination: "ok", Payload: []byte("{}")},
	}
	if _, err := o.Enqueue(ctx, events...); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 20*time.Second, "three dead letters and one delivery", func() bool {
		st := o.Stats()
		return st.Dead == 3 && st.Pending == 0
	})
	reasons := map[string]string{
		"big":     "Message Size Too Large",
		"denied":  "Topic Authorization Failed",
		"missing": "Unknown Topic Or Partition",
	}
	for id, want := range reasons {
		ev, err := o.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if ev.State != outbox.StateDead || !strings.Contains(ev.LastError, want) {
			t.Errorf("%s: %s, last error %q; want dead with %q", id, ev.State, ev.LastError, want)
		}
	}
	tr := &kafkago.Transport{DialTimeout: time.Second, SASL: plain.Mechanism{Username: "admin", Password: "admin"}}
	t.Cleanup(tr.CloseIdleConnections)
	got := fetchPartition(t, &kafkago.Client{Addr: kafkago.TCP(c.ListenAddrs()...), Transport: tr}, "allowed", 0)
	if len(got) != 1 || headerMap(got[0].Headers)[SinkIDHeader] != "fine" {
		t.Errorf("allowed topic holds %d records; want only the event fine", len(got))
	}
}

// A stopped broker opens the endpoint's breaker (the deliveries fail as
// a receiver that does not answer); when the broker is back, every event
// is delivered, none lost.
func TestSinkBrokerStoppedAndBack(t *testing.T) {
	c := newCluster(t, kfakeSeed(3, "out")...)
	addr := c.ListenAddrs()[0]
	_, port, _ := net.SplitHostPort(addr)
	s := newTestSink(t, []string{addr}, func(cfg *Config) { cfg.ProduceTimeout = 300 * time.Millisecond }, "ep", "out")
	o := openOutbox(t, dbPath(t, "stopped"), s, func(cfg *outbox.Config) {
		cfg.Breaker = outbox.Breaker{Threshold: 3, CoolDown: 200 * time.Millisecond, MaxCoolDown: 400 * time.Millisecond}
	})
	ctx := context.Background()
	if _, err := o.Enqueue(ctx, outbox.Event{ID: "before", Destination: "ep"}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 10*time.Second, "the first event delivered", func() bool { return o.Stats().Pending == 0 })
	c.Close()

	var ids []string
	for i := range 50 {
		ids = append(ids, fmt.Sprint("during-", i))
		if _, err := o.Enqueue(ctx, outbox.Event{ID: ids[i], Key: fmt.Sprint("k", i%5), Destination: "ep"}); err != nil {
			t.Fatal(err)
		}
	}
	testkit.WaitFor(t, 20*time.Second, "the breaker open", func() bool {
		eps, err := o.Endpoints(ctx)
		return err == nil && slices.ContainsFunc(eps, func(e outbox.EndpointState) bool {
			return e.Name == "ep" && e.Breaker != outbox.BreakerClosed
		})
	})
	c2 := newCluster(t, append(kfakeSeed(3, "out"), kfake.Ports(atoi(t, port)))...)
	testkit.WaitFor(t, 30*time.Second, "every event delivered", func() bool { return o.Stats().Pending == 0 })
	seen := map[string]int{}
	for _, m := range topicRecords(t, c2.ListenAddrs(), "out", 3) {
		seen[headerMap(m.Headers)[SinkIDHeader]]++
	}
	for _, id := range ids {
		if seen[id] == 0 {
			t.Errorf("%s: not on the topic after the broker came back", id)
		}
	}
	if st := o.Stats(); st.Dead != 0 {
		t.Errorf("%d dead letters; want none", st.Dead)
	}
}

func atoi(t testing.TB, s string) int {
	t.Helper()
	var n int
	if _, err := fmt.Sscan(s, &n); err != nil {
		t.Fatal(err)
	}
	return n
}
