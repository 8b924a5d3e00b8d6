package kafka

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"

	"github.com/outboxd/outbox/internal/testkit"
	"github.com/outboxd/outbox/outbox"
)

// byEndpoint is a sink that counts deliveries by event ID and endpoint.
type byEndpoint struct {
	mu  sync.Mutex
	got map[string]int // ID + " " + endpoint
}

func (s *byEndpoint) Deliver(_ context.Context, d *outbox.Delivery) outbox.Result {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.got[d.ID+" "+d.Endpoint]++
	return outbox.Result{Action: outbox.ActionSuccess, Status: 200}
}

func (s *byEndpoint) count(id, endpoint string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.got[id+" "+endpoint]
}

// A record with an outbox-topic header becomes a topic event, delivered to
// every endpoint subscribed to the topic; a record with neither header
// takes the default topic; one with both, or with a malformed topic,
// becomes a dead letter with the reason.
func TestIngestTopics(t *testing.T) {
	c := newCluster(t, kfakeSeed(1, "in")...)
	brokers := c.ListenAddrs()
	sink := &byEndpoint{got: map[string]int{}}
	o := openOutbox(t, dbPath(t, "topics"), sink, func(cfg *outbox.Config) {
		cfg.Subscriptions = []outbox.Subscription{
			{Endpoint: "billing", Topics: []string{"order.*"}},
			{Endpoint: "audit", Topics: []string{"*"}},
		}
	})
	cfg := testConfig(brokers, "in")
	cfg.Destination, cfg.DefaultTopic = "", "audit.misc"
	p := newProducer(t, brokers, "in")
	hdr := func(kv ...string) []kafkago.Header {
		var hs []kafkago.Header
		for i := 0; i < len(kv); i += 2 {
			hs = append(hs, kafkago.Header{Key: kv[i], Value: []byte(kv[i+1])})
		}
		return hs
	}
	p.produce(t,
		kafkago.Message{Value: []byte("paid"), Headers: hdr("outbox-topic", "order.paid", "outbox-id", "o-1")},
		kafkago.Message{Value: []byte("misc")},
		kafkago.Message{Value: []byte("both"), Headers: hdr("outbox-topic", "order.paid", "outbox-destination", "dest")},
		kafkago.Message{Value: []byte("bad"), Headers: hdr("outbox-topic", "order..paid")},
	)
	startRunner(t, o, cfg)
	testkit.WaitFor(t, 10*time.Second, "the topic events to reach their subscribers", func() bool {
		return sink.count("o-1", "billing") == 1 && sink.count("o-1", "audit") == 1 &&
			sink.count(RecordID("in", 0, 1), "audit") == 1
	})
	if n := sink.count(RecordID("in", 0, 1), "billing"); n != 0 {
		t.Fatalf("the default topic's event reached billing %d times", n)
	}
	ctx := context.Background()
	testkit.WaitFor(t, 10*time.Second, "two dead letters", func() bool { return o.Stats().Dead == 2 })
	for off, want := range map[int64]string{2: "not both", 3: "empty segment"} {
		ev, err := o.Get(ctx, RecordID("in", 0, off))
		if err != nil {
			t.Fatal(err)
		}
		if ev.State != outbox.StateDead || !strings.Contains(ev.DeadReason, want) {
			t.Fatalf("record %d: %s, %q; want dead with %q", off, ev.State, ev.DeadReason, want)
		}
	}
}

func TestTopicSettings(t *testing.T) {
	ok := Config{Brokers: []string{"localhost:9092"}, Topic: "events"}
	for _, tc := range []struct {
		edit  func(*Config)
		field string
	}{
		{func(c *Config) { c.DefaultTopic = "order..paid" }, "DefaultTopic"},
		{func(c *Config) { c.DefaultTopic, c.Destination = "order.paid", "dest" }, "DefaultTopic"},
		{func(c *Config) { c.TopicHeader = "a b" }, "TopicHeader"},
		{func(c *Config) { c.TopicHeader = "outbox-id" }, "TopicHeader"},
	} {
		c := ok
		tc.edit(&c)
		var ce *ConfigError
		if err := c.Validate(); !errors.As(err, &ce) || ce.Field != tc.field {
			t.Errorf("%+v: %v, want an error for %s", c, err, tc.field)
		}
	}
	c := ok
	c.DefaultTopic = "order.paid"
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
}
