package kafka

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/outboxd/outbox/outbox"
)

// newTestProducer makes a Producer for topic with test timings; it is
// closed at cleanup.
func newTestProducer(t testing.TB, brokers []string, topic string, tweak func(*Config)) *Producer {
	t.Helper()
	cfg := testConfig(brokers, topic)
	cfg.ProduceTimeout = 2 * time.Second
	if tweak != nil {
		tweak(&cfg)
	}
	p, err := NewProducer(cfg, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// countProduces counts the produce requests to topic the cluster receives,
// by partition, and lets the cluster handle them.
func countProduces(c *kfake.Cluster, topic string) func() map[int32]int {
	var mu sync.Mutex
	counts := map[int32]int{}
	c.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		for _, tp := range req.(*kmsg.ProduceRequest).Topics {
			if tp.Topic != topic {
				continue
			}
			mu.Lock()
			for _, p := range tp.Partitions {
				counts[p.Partition]++
			}
			mu.Unlock()
		}
		return nil, nil, false
	})
	return func() map[int32]int {
		mu.Lock()
		defer mu.Unlock()
		out := make(map[int32]int, len(counts))
		for k, v := range counts {
			out[k] = v
		}
		return out
	}
}

// fetchPartition returns every record of one partition.
func fetchPartition(t testing.TB, cl *kafkago.Client, topic string, partition int) []kafkago.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out []kafkago.Message
	for offset := int64(0); ; {
		res, err := cl.Fetch(ctx, &kafkago.FetchRequest{Topic: topic, Partition: partition, Offset: offset, MaxBytes: 16 << 20})
		if err != nil {
			t.Fatal(err)
		}
		if res.Error != nil {
			t.Fatal(res.Error)
		}
		n := 0
		for {
			r, err := res.Records.ReadRecord()
			if err != nil {
				break
			}
			m := kafkago.Message{Topic: topic, Partition: partition, Offset: r.Offset, Headers: r.Headers}
			if r.Key != nil {
				m.Key, _ = kafkago.ReadAll(r.Key)
			}
			if r.Value != nil {
				m.Value, _ = kafkago.ReadAll(r.Value)
			}
			out = append(out, m)
			offset = r.Offset + 1
			n++
		}
		if n == 0 || offset >= res.HighWatermark {
			return out
		}
	}
}

// A batch goes out as one produce request per partition it touches; each
// event lands where Kafka's default partitioner puts its key (by ID without
// one) and reads back, on its partition, as the event that was sent, under
// the ID Produce returned.
func TestProducerPartitionsByKeyInOneRequestPerPartition(t *testing.T) {
	const parts = 6
	c := newCluster(t, kfakeSeed(parts, "in")...)
	produces := countProduces(c, "in")
	p := newTestProducer(t, c.ListenAddrs(), "in", nil)

	var evs []outbox.Event
	for i := range 40 {
		evs = append(evs, outbox.Event{Key: fmt.Sprintf("customer-%d", i%8), Destination: "orders",
			Payload: fmt.Appendf(nil, `{"n":%d}`, i), Headers: map[string]string{"X-N": fmt.Sprint(i)}})
	}
	for i := range 20 {
		evs = append(evs, outbox.Event{ID: fmt.Sprintf("given-%02d", i), Destination: "orders", Method: "PUT"})
	}
	ids, err := p.Produce(context.Background(), evs...)
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != len(evs) {
		t.Fatalf("%d IDs for %d events", len(ids), len(evs))
	}
	sent := map[string]outbox.Event{}
	for i, id := range ids {
		if evs[i].ID != "" && id != evs[i].ID {
			t.Errorf("event %d: ID %q, want the given %q", i, id, evs[i].ID)
		}
		ev := evs[i]
		ev.ID = id
		sent[id] = ev
	}

	cl := admin(t, c.ListenAddrs())
	m := newMapper(testConfig(nil, "in").WithDefaults())
	murmur := kafkago.Murmur2Balancer{Consistent: true}
	all := []int{0, 1, 2, 3, 4, 5}
	touched := 0
	seen := 0
	for part := range parts {
		recs := fetchPartition(t, cl, "in", part)
		if len(recs) > 0 {
			touched++
		}
		var lastKeyed = map[string]int{}
		for _, r := range recs {
			got := m.mapRecord(&r)
			want, ok := sent[got.ev.ID]
			if got.dead != "" || !ok || !sameEvent(&got.ev, &want) {
				t.Fatalf("partition %d offset %d reads as %+v (dead %q); sent %+v", part, r.Offset, got.ev, got.dead, want)
			}
			seen++
			hashed := r.Key
			if len(hashed) == 0 {
				hashed = []byte(got.ev.ID)
			}
			if exp := murmur.Balance(kafkago.Message{Key: hashed}, all...); exp != part {
				t.Errorf("event %s (key %q) on partition %d; Kafka's default partitioner puts it on %d", got.ev.ID, r.Key, part, exp)
			}
			// Per-key order: the events of a key are in the order sent.
			if want.Key != "" {
				var n int
				fmt.Sscanf(want.Headers["X-N"], "%d", &n)
				if prev, ok := lastKeyed[want.Key]; ok && n < prev {
					t.Errorf("key %s: event %d after %d", want.Key, n, prev)
				}
				lastKeyed[want.Key] = n
			}
		}
	}
	if seen != len(evs) {
		t.Errorf("%d records in the topic, %d events sent", seen, len(evs))
	}
	counts := produces()
	if len(counts) != touched {
		t.Errorf("produce requests went to partitions %v; the batch touched %d", counts, touched)
	}
	for part, n := range counts {
		if n != 1 {
			t.Errorf("partition %d: %d produce requests for one batch, want 1", part, n)
		}
	}
	if s := p.Stats(); s.Produced != uint64(len(evs)) || s.Refused != 0 {
		t.Errorf("stats %+v", s)
	}
}

// A broker that refuses the produce (here: not authorised) fails the call at
// once with a *ProduceError giving the broker's reason; nothing is
// written. Refusals worth retrying (an unknown topic) are retried until the
// produce timeout, then reported with the last reason.
func TestProducerReportsRefusals(t *testing.T) {
	c := newCluster(t, kfakeSeed(3, "in")...)
	p := newTestProducer(t, c.ListenAddrs(), "in", func(cfg *Config) { cfg.ProduceTimeout = 500 * time.Millisecond })
	refuse := func(code int16) {
		c.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
			c.KeepControl()
			pr := req.(*kmsg.ProduceRequest)
			resp := pr.ResponseKind().(*kmsg.ProduceResponse)
			for _, tp := range pr.Topics {
				rt := kmsg.NewProduceResponseTopic()
				rt.Topic = tp.Topic
				for _, pp := range tp.Partitions {
					rp := kmsg.NewProduceResponseTopicPartition()
					rp.Partition = pp.Partition
					rp.ErrorCode = code
					rt.Partitions = append(rt.Partitions, rp)
				}
				resp.Topics = append(resp.Topics, rt)
			}
			return resp, nil, true
		})
	}
	refuse(kerr.TopicAuthorizationFailed.Code)
	evs := []outbox.Event{{ID: "a", Key: "k1", Destination: "d"}, {ID: "b", Key: "k2", Destination: "d"}, {ID: "c", Key: "k3", Destination: "d"}}
	_, err := p.Produce(context.Background(), evs...)
	var pe *ProduceError
	if !errors.As(err, &pe) || !errors.Is(err, ErrProduce) || !errors.Is(err, kafkago.TopicAuthorizationFailed) {
		t.Fatalf("not authorised: %v; want a *ProduceError wrapping TopicAuthorizationFailed", err)
	}
	if pe.Events != len(evs) || pe.Acknowledged != 0 || !strings.Contains(pe.Reason, "Topic Authorization Failed") || pe.Topic != "in" {
		t.Errorf("not authorised: %+v", pe)
	}

	c.DropControl()
	c2 := newCluster(t, kfakeSeed(3, "other")...)
	p2 := newTestProducer(t, c2.ListenAddrs(), "gone", func(cfg *Config) { cfg.ProduceTimeout = 300 * time.Millisecond })
	_, err = p2.Produce(context.Background(), evs...)
	if !errors.As(err, &pe) || pe.Partition != -1 || !strings.Contains(pe.Reason, "Unknown Topic Or Partition") {
		t.Fatalf("topic missing: %v (%+v); want a *ProduceError for the whole topic naming the unknown topic", err, pe)
	}
	if got := endOffsets(t, admin(t, c.ListenAddrs()), "in", 3); got[0]+got[1]+got[2] != 0 {
		t.Errorf("end offsets %v after refused produces; want nothing written", got)
	}
}

// A broker that cannot be reached, or that takes the connection and never
// answers, fails the call with a *ProduceError once the produce timeout
// has passed: never a hang. The caller's context ends it sooner.
func TestProducerGivesUpOnUnreachableBrokers(t *testing.T) {
	c := newCluster(t, kfakeSeed(3, "in")...)
	p := newTestProducer(t, c.ListenAddrs(), "in", func(cfg *Config) { cfg.ProduceTimeout = 500 * time.Millisecond })
	ev := outbox.Event{ID: "a", Destination: "d"}
	if _, err := p.Produce(context.Background(), ev); err != nil {
		t.Fatal(err) // the metadata is cached from here on
	}
	c.Close()
	_, err := p.Produce(context.Background(), ev)
	var pe *ProduceError
	if !errors.As(err, &pe) || !strings.Contains(pe.Reason, "within 500ms") {
		t.Fatalf("stopped broker: %v; want a *ProduceError for the produce timeout", err)
	}

	// A listener that accepts connections and never answers.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns sync.WaitGroup
	done := make(chan struct{})
	conns.Go(func() {
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				<-done
				return
			}
			held = append(held, c)
		}
	})
	t.Cleanup(func() { ln.Close(); close(done); conns.Wait() })
	silent := newTestProducer(t, []string{ln.Addr().String()}, "in", func(cfg *Config) { cfg.ProduceTimeout = 300 * time.Millisecond })
	_, err = silent.Produce(context.Background(), ev)
	if !errors.As(err, &pe) || !strings.Contains(pe.Reason, "within 300ms") {
		t.Fatalf("silent broker: %v; want a *ProduceError for the produce timeout", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := silent.Produce(ctx, ev); !errors.Is(err, ErrProduce) || !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled call: %v; want a *ProduceError wrapping context.Canceled", err)
	}
}

// Concurrent calls are each acknowledged, with their events in the topic
// once, and a caller's events for one key stay in the order it sent them;
// Close ends a call that waits for a broker that does not answer.
func TestProducerConcurrentCallsAndClose(t *testing.T) {
	c := newCluster(t, kfakeSeed(3, "in")...)
	produces := countProduces(c, "in")
	p := newTestProducer(t, c.ListenAddrs(), "in", nil)
	const callers, calls, per = 16, 5, 4
	var wg sync.WaitGroup
	errs := make(chan error, callers*calls)
	for g := range callers {
		wg.Go(func() {
			for n := range calls {
				evs := make([]outbox.Event, per)
				for i := range evs {
					evs[i] = outbox.Event{ID: fmt.Sprintf("g%02d-%d-%d", g, n, i), Key: fmt.Sprintf("caller-%d", g), Destination: "d"}
				}
				if _, err := p.Produce(context.Background(), evs...); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	cl := admin(t, c.ListenAddrs())
	m := newMapper(testConfig(nil, "in").WithDefaults())
	seen := map[string]int{}
	last := map[string]string{}
	for part := range 3 {
		for _, r := range fetchPartition(t, cl, "in", part) {
			ev := m.mapRecord(&r).ev
			seen[ev.ID]++
			if prev := last[ev.Key]; prev > ev.ID {
				t.Errorf("key %s: %s after %s", ev.Key, ev.ID, prev)
			}
			last[ev.Key] = ev.ID
		}
	}
	if len(seen) != callers*calls*per {
		t.Errorf("%d distinct events in the topic, want %d", len(seen), callers*calls*per)
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("%s written %d times", id, n)
		}
	}
	requests := 0
	for _, n := range produces() {
		requests += n
	}
	t.Logf("%d calls went out in %d produce requests", callers*calls, requests)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	silent := newTestProducer(t, []string{ln.Addr().String()}, "in", func(cfg *Config) { cfg.ProduceTimeout = time.Hour })
	done := make(chan error, 1)
	go func() {
		_, err := silent.Produce(context.Background(), outbox.Event{ID: "a", Destination: "d"})
		done <- err
	}()
	conn, err := ln.Accept() // the call is under way
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := silent.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, ErrProduce) {
		t.Fatalf("call under way at Close: %v; want a *ProduceError", err)
	}
	if _, err := silent.Produce(context.Background(), outbox.Event{ID: "b", Destination: "d"}); !errors.Is(err, ErrProduce) {
		t.Fatalf("call after Close: %v; want a *ProduceError", err)
	}
}
