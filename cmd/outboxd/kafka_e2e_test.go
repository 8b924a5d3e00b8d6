package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"

	"github.com/outboxd/outbox/internal/testkit"
)

// kafkaTuning shortens the Kafka intervals for tests, through the YAML file
// (the way an operator sets what has no flag).
const kafkaTuning = `kafka:
  commit_interval: 50ms
  session_timeout: 1s
  heartbeat_interval: 100ms
  rebalance_timeout: 2s
  ship_interval: 10ms
  retry_backoff: 20ms
  retry_backoff_max: 200ms
  dial_timeout: 1s
  client_id: outboxd-e2e
`

// Ingest from a topic, ship the changelog, then rebuild a new database with
// outboxd restore --from-kafka: the pending events come back, the delivered
// ones do not.
func TestKafkaIngestShippingAndRestore(t *testing.T) {
	cluster := newEventsCluster(t, 1)
	defer cluster.Close()
	brokers := strings.Join(cluster.ListenAddrs(), ",")

	dir := t.TempDir()
	tuning := writeTuning(t, dir, kafkaTuning)
	rc := newReceiver(t, func(r *http.Request, id string) int {
		if strings.HasPrefix(id, "keep-") {
			return http.StatusServiceUnavailable
		}
		return http.StatusNoContent
	})
	p := start(t, dir, "--config", tuning, "--endpoint", rc.endpoint("orders"),
		"--kafka-brokers", brokers, "--kafka-topic", "events", "--kafka-group", "e2e",
		"--kafka-destination", "orders", "--changelog-topic", "outboxd-changelog",
		"--backoff-initial", "1h", "--backoff-max", "1h")
	testkit.WaitFor(t, 20*time.Second, "readyz with Kafka ingest connected", func() bool {
		code, _ := call(t, "GET", p.url("/readyz"), "", "")
		return code == http.StatusOK
	})
	if _, m := call(t, "GET", p.url("/readyz?verbose"), "", ""); !strings.Contains(fmt.Sprint(m["checks"]), "name:kafka ok:true") {
		t.Errorf("/readyz?verbose in Kafka mode: %v, want the kafka check listed, passing", m)
	}

	// Ten records to deliver, ten whose receiver keeps answering 503 (their
	// events stay pending), identified by the outbox-id header.
	tr := &kafkago.Transport{DialTimeout: time.Second}
	defer tr.CloseIdleConnections()
	w := &kafkago.Writer{Addr: kafkago.TCP(cluster.ListenAddrs()...), Topic: "events", Transport: tr,
		BatchTimeout: time.Millisecond, RequiredAcks: kafkago.RequireAll}
	var msgs []kafkago.Message
	var deliver, keep []string
	for i := range 20 {
		id := fmt.Sprintf("deliver-%d", i)
		hdr := []kafkago.Header{{Key: "outbox-id", Value: []byte(id)}}
		if i%2 == 1 {
			id = fmt.Sprintf("keep-%d", i)
			hdr = []kafkago.Header{{Key: "outbox-id", Value: []byte(id)}}
			keep = append(keep, id)
		} else {
			deliver = append(deliver, id)
		}
		msgs = append(msgs, kafkago.Message{Key: []byte(id), Value: []byte(`{"n":` + strconv.Itoa(i) + `}`), Headers: hdr})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 20*time.Second, "the ingested events delivered", func() bool { return len(rc.missing(deliver)) == 0 })
	for _, id := range keep {
		code, m := call(t, "GET", p.url("/v1/events/"+id), "", "")
		if code != http.StatusOK || m["state"] != "pending" {
			t.Errorf("%s: %d %v, want pending", id, code, m)
		}
	}
	lag := regexp.MustCompile(`(?m)^outboxd_kafka_changelog_lag_lsns (\S+)$`)
	testkit.WaitFor(t, 20*time.Second, "the changelog shipped", func() bool {
		resp, err := client.Get(p.url("/metrics"))
		if err != nil {
			return false
		}
		m := lag.FindStringSubmatch(readAll(t, resp))
		return m != nil && m[1] == "0"
	})

	p.signal(syscall.SIGTERM, 15*time.Second)
	if code := p.exitCode(); code != 0 {
		t.Errorf("exit code %d", code)
	}

	// Restore into a new file: the kept events are pending there.
	code, out := run(t, dir, "restore", "--from-kafka", "--config", tuning, "--kafka-brokers", brokers,
		"--changelog-topic", "outboxd-changelog", "--db", "restored.db")
	if code != 0 {
		t.Fatalf("restore: exit %d\n%s", code, out)
	}
	t.Logf("restore: %s", out)
	if !strings.Contains(out, "restore: done: ") || !strings.Contains(out, "offsets (100.0%)") {
		t.Errorf("restore output lacks its progress and final line: %q", out)
	}
	code, out = run(t, dir, "restore", "--from-kafka", "--kafka-brokers", brokers,
		"--changelog-topic", "outboxd-changelog", "--db", "restored.db")
	if code == 0 || !strings.Contains(out, "restored.db already exists") {
		t.Errorf("restore over an existing file: exit %d %q", code, out)
	}
	_, out = run(t, dir, "inspect", "--db", "restored.db", "--state", "pending", "--limit", "100", "--json")
	var summary struct {
		Stats  struct{ Pending, Dead int }
		Events map[string][]struct{ ID string }
	}
	if err := json.Unmarshal([]byte(out), &summary); err != nil {
		t.Fatalf("inspect: %v\n%s", err, out)
	}
	if summary.Stats.Pending != len(keep) {
		t.Errorf("restored %d pending events, want %d", summary.Stats.Pending, len(keep))
	}
	got := map[string]bool{}
	for _, e := range summary.Events["pending"] {
		got[e.ID] = true
	}
	for _, id := range keep {
		if !got[id] {
			t.Errorf("%s not pending after restore", id)
		}
	}
}
