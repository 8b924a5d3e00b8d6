//go:build unix

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/outboxd/outbox/internal/testkit"
)

// The tests of HTTP ingest in Kafka group mode (issue 22): POST /v1/events
// produces to the ingest topic and answers 202 once the broker
// acknowledged. They run on the failover harness (failover_harness_test.go).

// postEvents POSTs body to the instance and returns the status and the
// decoded answer.
func (in *instance) postEvents(t *testing.T, body string) (int, map[string]any) {
	t.Helper()
	return call(t, "POST", in.p.url("/v1/events"), "", body)
}

// idsOf reads the "ids" of a 202.
func idsOf(t *testing.T, m map[string]any) []string {
	t.Helper()
	raw, _ := m["ids"].([]any)
	out := make([]string, len(raw))
	for i, v := range raw {
		out[i], _ = v.(string)
	}
	return out
}

// Must show 1: events POSTed to one of three instances and acknowledged
// with 202, that instance SIGKILLed and its disk deleted before anything
// was delivered: the survivors deliver every acknowledged event, under the
// ID the 202 gave (generated ones included), with the method, headers and
// payload that were POSTed.
func TestPostedEventsSurviveTheLossOfTheInstanceThatAcceptedThem(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	f.rc.setRespond(answerAll503) // nothing is delivered before the kill
	a, b, c := f.add("a"), f.add("b"), f.add("c")
	f.waitBalanced(waitLong, a, b, c)

	var acked []string
	for batch := range 6 {
		var evs []string
		for i := range 100 {
			n := batch*100 + i
			switch n % 3 {
			case 0: // a caller's ID and a key
				evs = append(evs, fmt.Sprintf(`{"id":"posted-%04d","key":"customer-%d","destination":"orders","payload":{"n":%d}}`, n, n%17, n))
			case 1: // a caller's ID, no key
				evs = append(evs, fmt.Sprintf(`{"id":"posted-%04d","destination":"orders","method":"PUT","headers":{"X-N":"%d"},"payload":{"n":%d}}`, n, n, n))
			default: // the ID is generated
				evs = append(evs, fmt.Sprintf(`{"destination":"orders","payload":{"n":%d}}`, n))
			}
		}
		code, m := a.postEvents(t, "["+strings.Join(evs, ",")+"]")
		if code != http.StatusAccepted {
			t.Fatalf("POST batch %d: %d %v", batch, code, m)
		}
		acked = append(acked, idsOf(t, m)...)
	}
	code, m := a.postEvents(t, `{"destination":"orders","payload":"single"}`)
	if code != http.StatusAccepted {
		t.Fatalf("POST one event: %d %v", code, m)
	}
	acked = append(acked, idsOf(t, m)...)
	if len(acked) != 601 {
		t.Fatalf("%d IDs acknowledged for 601 events", len(acked))
	}

	killed := time.Now()
	a.kill()
	a.deleteState()
	if n := f.rc.Successes(); n != 0 {
		t.Fatalf("%d events delivered before the kill; the test needs none", n)
	}
	f.rc.setRespond(nil)
	took := f.waitDelivered(waitLong, acked)
	t.Logf("SIGKILL of the instance that accepted the events (disk deleted) to every acknowledged event delivered: %s", took.Round(time.Millisecond))
	logTimeline(t, killed, []string{"kafka: partitions assigned", "kafka: partition restored"}, b, c)

	// What the receiver got is what was POSTed, under the 202's IDs.
	h := lastAcked(f.rc, "posted-0001")
	if h == nil || h.Method != http.MethodPut || h.Header.Get("X-N") != "1" || string(h.Body) != `{"n":1}` {
		t.Errorf("posted-0001 arrived as %+v; want PUT with X-N: 1 and {\"n\":1}", h)
	}
	if h := lastAcked(f.rc, acked[2]); h == nil || h.Method != http.MethodPost || string(h.Body) != `{"n":2}` {
		t.Errorf("the event with the generated ID %s arrived as %+v", acked[2], h)
	}
	t.Logf("duplicates: %d of %d events delivered more than once", f.duplicates(acked), len(acked))
}

// produceTuning is fleetTuning with a short produce timeout.
const produceTuning = fleetTuning + "  produce_timeout: 2s\n"

// Must show 4: a broker that refuses the produce (not authorised, topic
// gone) is a 503 naming the reason, and nothing is acknowledged; a POST
// while the broker is unreachable is a 503 within the produce timeout,
// never a hang and never a 202. Bad input is still the same 400 as in
// single-machine mode, and produces nothing; events POSTed again are
// duplicates on their owner, as in single-machine mode.
func TestPostIsA503WhenKafkaRefusesOrCannotBeReached(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	if err := os.WriteFile(f.tuning, []byte(produceTuning), 0o600); err != nil {
		t.Fatal(err)
	}
	var refuse atomic.Int32 // the error code to refuse produces to the ingest topic with, 0: none
	f.cluster.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		f.cluster.KeepControl()
		code := int16(refuse.Load())
		pr := req.(*kmsg.ProduceRequest)
		if code == 0 || len(pr.Topics) == 0 || pr.Topics[0].Topic != fleetTopic {
			return nil, nil, false
		}
		return refusal(pr, code), nil, true
	})
	a := f.add("a")
	f.waitBalanced(waitLong, a)

	ok := `[{"id":"fine-1","key":"k","destination":"orders"},{"id":"fine-2","destination":"orders"}]`
	if code, m := a.postEvents(t, ok); code != http.StatusAccepted {
		t.Fatalf("POST with the broker up: %d %v", code, m)
	}
	f.waitDelivered(waitLong, []string{"fine-1", "fine-2"})
	// The same events again: a 202, and duplicates on their owner.
	if code, m := a.postEvents(t, ok); code != http.StatusAccepted {
		t.Fatalf("POST of the same events again: %d %v", code, m)
	}
	testkit.WaitFor(t, waitLong, "the repeated events counted as duplicates", func() bool {
		n, _ := a.metric("outbox_duplicates_total", "")
		return n == 2
	})
	if got := f.rc.Acked("fine-1") + f.rc.Acked("fine-2"); got != 2 {
		t.Errorf("%d deliveries of fine-1 and fine-2 after they were POSTed twice; want one each", got)
	}

	// The same 400s as in single-machine mode, and nothing produced.
	for _, bad := range []struct{ body, field string }{
		{`[{"destination":"orders"},{"destination":"nowhere"}]`, "events[1].destination"},
		{`{"destination":"orders","headers":{"outbox-id":"x"}}`, "headers"},
		{`{"destination":"orders","method":"get"}`, "method"},
	} {
		code, m := a.postEvents(t, bad.body)
		if msg, _ := m["error"].(string); code != http.StatusBadRequest || !strings.HasPrefix(msg, bad.field+": ") {
			t.Errorf("POST %s: %d %v; want 400 naming %s", bad.body, code, m, bad.field)
		}
	}

	refuse.Store(int32(kerr.TopicAuthorizationFailed.Code))
	code, m := a.postEvents(t, `[{"id":"refused-1","destination":"orders"},{"id":"refused-2","key":"k","destination":"orders"}]`)
	if msg, _ := m["error"].(string); code != http.StatusServiceUnavailable || !strings.Contains(msg, "Topic Authorization Failed") {
		t.Fatalf("POST while the broker refuses (not authorised): %d %v; want 503 with the reason", code, m)
	}
	t.Logf("not authorised: %d %v", code, m["error"])
	refuse.Store(int32(kerr.UnknownTopicOrPartition.Code))
	began := time.Now()
	code, m = a.postEvents(t, `{"id":"refused-3","destination":"orders"}`)
	// The producer retries this error until kafka.produce_timeout; on a
	// loaded machine its last attempt may end in a read timeout instead of
	// the broker's answer, and the 503 then says the produce timed out.
	if msg, _ := m["error"].(string); code != http.StatusServiceUnavailable ||
		!strings.Contains(msg, "Unknown Topic Or Partition") && !strings.Contains(msg, "not acknowledged within") {
		t.Fatalf("POST while the broker says the topic is gone: %d %v; want 503 with the reason", code, m)
	}
	t.Logf("topic gone (retried until the produce timeout): %d after %s: %v", code, time.Since(began).Round(time.Millisecond), m["error"])
	refuse.Store(0)
	if got := topicRecords(t, f); got != 4 {
		t.Errorf("%d records in the ingest topic; want only the 4 acknowledged", got)
	}
	produced, _ := a.metric("outboxd_kafka_produced_total", "")
	refused, _ := a.metric("outboxd_kafka_produce_refused_total", "")
	if produced != 4 || refused != 3 {
		t.Errorf("metrics: %v produced, %v refused; want 4 and 3", produced, refused)
	}

	// The topic is really deleted: 503 naming it as unknown.
	tr := &kafkago.Transport{DialTimeout: time.Second}
	defer tr.CloseIdleConnections()
	admin := &kafkago.Client{Addr: kafkago.TCP(f.cluster.ListenAddrs()...), Transport: tr, Timeout: 10 * time.Second}
	if res, err := admin.DeleteTopics(context.Background(), &kafkago.DeleteTopicsRequest{Topics: []string{fleetTopic}}); err != nil || res.Errors[fleetTopic] != nil {
		t.Fatalf("deleting the topic: %v %v", err, res)
	}
	code, m = a.postEvents(t, `{"id":"deleted-1","destination":"orders"}`)
	// The reason is what the broker did within the timeout: usually that
	// the topic is unknown, at times (a loaded machine) that it did not
	// answer; the deterministic refusals are those above.
	if msg, _ := m["error"].(string); code != http.StatusServiceUnavailable || !strings.HasPrefix(msg, "Kafka did not acknowledge the events") {
		t.Fatalf("POST after the topic was deleted: %d %v; want 503 with the reason", code, m)
	}
	t.Logf("topic deleted: %d %v", code, m["error"])
	// Created again, the topic takes events again, once the instance's
	// metadata has it.
	if _, err := admin.CreateTopics(context.Background(), &kafkago.CreateTopicsRequest{Topics: []kafkago.TopicConfig{{
		Topic: fleetTopic, NumPartitions: fleetPartitions, ReplicationFactor: 1}}}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, waitLong, "a POST accepted once the topic is back", func() bool {
		code, _ := a.postEvents(t, `{"id":"recreated-1","destination":"orders"}`)
		return code == http.StatusAccepted
	})

	// The broker goes away: 503 within the produce timeout, never a hang.
	f.cluster.Close()
	hang := &http.Client{Timeout: 30 * time.Second}
	for _, body := range []string{`{"id":"unreachable-1","destination":"orders"}`, ok} {
		began := time.Now()
		resp, err := hang.Post(a.p.url("/v1/events"), "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatalf("POST while the broker is unreachable: %v (a hang)", err)
		}
		var ans map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&ans)
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
			t.Fatalf("POST while the broker is unreachable: %d %v; want 503 with Retry-After", resp.StatusCode, ans)
		}
		t.Logf("broker unreachable: %d after %s: %v", resp.StatusCode, time.Since(began).Round(time.Millisecond), ans["error"])
	}
}

// refusal answers a produce request with code for every partition.
func refusal(pr *kmsg.ProduceRequest, code int16) kmsg.Response {
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
	return resp
}

// topicRecords counts the records of the fleet's ingest topic.
func topicRecords(t *testing.T, f *fleet) int64 {
	t.Helper()
	tr := &kafkago.Transport{DialTimeout: time.Second}
	defer tr.CloseIdleConnections()
	cl := &kafkago.Client{Addr: kafkago.TCP(f.cluster.ListenAddrs()...), Transport: tr, Timeout: 10 * time.Second}
	req := &kafkago.ListOffsetsRequest{Topics: map[string][]kafkago.OffsetRequest{}}
	for p := range fleetPartitions {
		req.Topics[fleetTopic] = append(req.Topics[fleetTopic], kafkago.LastOffsetOf(p))
	}
	res, err := cl.ListOffsets(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, po := range res.Topics[fleetTopic] {
		if po.Error != nil {
			t.Fatal(po.Error)
		}
		n += po.LastOffset
	}
	return n
}

// lastAcked is the last acknowledged delivery of id, nil when none.
func lastAcked(rc receiver, id string) *testkit.Request {
	reqs := rc.Requests()
	for i := len(reqs) - 1; i >= 0; i-- {
		if reqs[i].ID == id && reqs[i].Acked {
			return &reqs[i]
		}
	}
	return nil
}
