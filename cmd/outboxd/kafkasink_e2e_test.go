package main

import (
	"context"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/outboxd/outbox/internal/testkit"
)

// partitionRecords reads every record of partition 0 of topic.
func partitionRecords(t *testing.T, brokers []string, topic string) []kafkago.Message {
	t.Helper()
	tr := &kafkago.Transport{DialTimeout: time.Second}
	defer tr.CloseIdleConnections()
	cl := &kafkago.Client{Addr: kafkago.TCP(brokers...), Transport: tr}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := cl.Fetch(ctx, &kafkago.FetchRequest{Topic: topic, Partition: 0, Offset: 0, MaxBytes: 1 << 20})
	if err != nil || res.Error != nil {
		t.Fatalf("fetch %s: %v %v", topic, err, res.Error)
	}
	var out []kafkago.Message
	for {
		r, err := res.Records.ReadRecord()
		if err != nil {
			return out
		}
		m := kafkago.Message{Headers: r.Headers}
		m.Key, _ = kafkago.ReadAll(r.Key)
		m.Value, _ = kafkago.ReadAll(r.Value)
		out = append(out, m)
	}
}

// outboxd with an endpoint of kind kafka, not in group mode: an event
// POSTed to it is produced to its topic, keyed, with its ID header, and
// shown delivered; an event for an HTTP endpoint beside it still goes
// over HTTP.
func TestServeDeliversToAKafkaEndpoint(t *testing.T) {
	cluster := newEventsCluster(t, 1, kfake.SeedTopics(1, "audit"))
	defer cluster.Close()
	brokers := cluster.ListenAddrs()
	rc := newReceiver(t, nil)
	p := start(t, t.TempDir(), "--endpoint", "audit=kafka://audit", "--kafka-brokers", strings.Join(brokers, ","),
		"--endpoint", rc.endpoint("orders"))
	code, m := call(t, "POST", p.url("/v1/events"), "", `{"destination":"audit","key":"order-1","payload":{"order":1}}`)
	if code != http.StatusAccepted {
		t.Fatalf("POST: %d %v", code, m)
	}
	id := m["ids"].([]any)[0].(string)
	testkit.WaitFor(t, 10*time.Second, "the event delivered", func() bool {
		_, m := call(t, "GET", p.url("/v1/events/"+id), "", "")
		return m["state"] == "delivered"
	})
	recs := partitionRecords(t, brokers, "audit")
	if len(recs) != 1 || string(recs[0].Key) != "order-1" || string(recs[0].Value) != `{"order":1}` {
		t.Fatalf("records %+v; want the event keyed order-1", recs)
	}
	if h := recs[0].Headers; len(h) == 0 || !containsHeader(h, "outbox-id", id) {
		t.Errorf("headers %v; want outbox-id %s", h, id)
	}
	// The attempt log and the metrics have it as for an HTTP endpoint.
	_, att := call(t, "GET", p.url("/v1/events/"+id+"/attempts"), "", "")
	if list, _ := att["attempts"].([]any); len(list) != 1 || list[0].(map[string]any)["outcome"] != "success" {
		t.Errorf("attempt log %v; want one success", att)
	}
	testkit.WaitFor(t, 10*time.Second, "the delivery in /metrics", func() bool {
		resp, err := client.Get(p.url("/metrics"))
		if err != nil {
			t.Fatal(err)
		}
		return strings.Contains(readAll(t, resp), `outbox_deliveries_total{action="success",endpoint="audit"} 1`)
	})
	code, m = call(t, "POST", p.url("/v1/events"), "", `{"destination":"orders","payload":{"order":2}}`)
	if code != http.StatusAccepted {
		t.Fatalf("POST: %d %v", code, m)
	}
	hid := m["ids"].([]any)[0].(string)
	testkit.WaitFor(t, 10*time.Second, "the HTTP delivery", func() bool { return rc.ackedCount(hid) > 0 })
	if d := p.signal(syscall.SIGTERM, 10*time.Second); p.exitCode() != 0 {
		t.Errorf("exit code %d after SIGTERM (%s)", p.exitCode(), d)
	}
}

func containsHeader(hs []kafkago.Header, k, v string) bool {
	for _, h := range hs {
		if h.Key == k && string(h.Value) == v {
			return true
		}
	}
	return false
}

// A Kafka endpoint without brokers stops serve at start with exit code 2,
// naming the setting.
func TestServeRefusesAKafkaEndpointWithoutBrokers(t *testing.T) {
	code, out := run(t, t.TempDir(), "serve", "--endpoint", "audit=kafka://audit")
	if code != 2 || !strings.Contains(out, "kafka.brokers (--kafka-brokers, OUTBOXD_KAFKA_BROKERS): required by endpoint audit, of kind kafka") {
		t.Errorf("exit %d, %q", code, out)
	}
}
