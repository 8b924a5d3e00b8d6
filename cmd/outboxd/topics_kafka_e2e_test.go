package main

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"

	"github.com/outboxd/outbox/internal/testkit"
)

// In Kafka group mode the API and the console serve the topic events of
// every partition's store: records naming a topic that no endpoint
// subscribes to are listed, counted and shown as unrouted, and a record
// naming a destination beside them is not.
func TestKafkaTopicEventsAreServedOverEveryPartition(t *testing.T) {
	cluster := newEventsCluster(t, 3)
	defer cluster.Close()
	dir := t.TempDir()
	tuning := writeTuning(t, dir, kafkaTuning)
	rc := newReceiver(t, func(*http.Request, string) int { return http.StatusServiceUnavailable })
	p := start(t, dir, "--config", tuning, "--endpoint", rc.endpoint("orders"),
		"--kafka-brokers", strings.Join(cluster.ListenAddrs(), ","), "--kafka-topic", "events", "--kafka-group", "e2e-topics",
		"--kafka-destination", "orders", "--changelog-topic", "outboxd-changelog",
		"--backoff-initial", "1h", "--backoff-max", "1h")
	testkit.WaitFor(t, 20*time.Second, "readyz with Kafka ingest connected", func() bool {
		code, _ := call(t, "GET", p.url("/readyz"), "", "")
		return code == http.StatusOK
	})

	tr := &kafkago.Transport{DialTimeout: time.Second}
	defer tr.CloseIdleConnections()
	w := &kafkago.Writer{Addr: kafkago.TCP(cluster.ListenAddrs()...), Topic: "events", Transport: tr,
		Balancer: &kafkago.Hash{}, BatchTimeout: time.Millisecond, RequiredAcks: kafkago.RequireAll}
	var msgs []kafkago.Message
	var unrouted []string
	for i := range 9 {
		id := fmt.Sprintf("paid-%d", i)
		unrouted = append(unrouted, id)
		msgs = append(msgs, kafkago.Message{Key: []byte(id), Value: []byte(`{}`), Headers: []kafkago.Header{
			{Key: "outbox-id", Value: []byte(id)}, {Key: "outbox-topic", Value: []byte("order.paid")},
		}})
	}
	msgs = append(msgs, kafkago.Message{Key: []byte("direct"), Value: []byte(`{}`), Headers: []kafkago.Header{{Key: "outbox-id", Value: []byte("direct")}}})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 30*time.Second, "every record ingested", func() bool {
		_, m := call(t, "GET", p.url("/v1/stats"), "", "")
		return m["unrouted"] == float64(len(unrouted)) && m["pending"] == 1.0
	})

	// Listed over the partitions' stores, a page at a time.
	var listed []string
	after := ""
	for range 10 {
		code, m := call(t, "GET", p.url("/v1/events?state=unrouted&topic=order.paid&limit=4&after="+url.QueryEscape(after)), "", "")
		if code != http.StatusOK {
			t.Fatalf("GET unrouted: %d %v", code, m)
		}
		for _, e := range m["events"].([]any) {
			ev := e.(map[string]any)
			if ev["state"] != "unrouted" || ev["topic"] != "order.paid" {
				t.Errorf("listed %v, want an unrouted event of order.paid", ev)
			}
			listed = append(listed, ev["id"].(string))
		}
		if after = m["next"].(string); after == "" {
			break
		}
	}
	slices.Sort(listed)
	if !slices.Equal(listed, unrouted) {
		t.Errorf("unrouted events listed: %v, want %v", listed, unrouted)
	}
	code, m := call(t, "GET", p.url("/v1/events/paid-4"), "", "")
	if code != http.StatusOK || m["state"] != "unrouted" || m["topic"] != "order.paid" {
		t.Errorf("GET paid-4: %d %v, want it unrouted", code, m)
	}
	if code, m := call(t, "GET", p.url("/v1/events"), "", ""); code != http.StatusOK || len(m["events"].([]any)) != 1 {
		t.Errorf("pending events: %d %v, want only direct", code, m)
	}

	resp, err := client.Get(p.url("/ui/events?state=unrouted"))
	if err != nil {
		t.Fatal(err)
	}
	if page := readAll(t, resp); resp.StatusCode != http.StatusOK || strings.Count(page, `class="topic">order.paid<`) != len(unrouted) {
		t.Errorf("the console's unrouted events: %d, want the %d of order.paid:\n%s", resp.StatusCode, len(unrouted), page)
	}
}
