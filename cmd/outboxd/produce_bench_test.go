package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/outboxd/outbox/internal/testkit"
	"github.com/outboxd/outbox/kafka"
)

// BenchmarkKafkaModeIngest measures POST /v1/events in Kafka group mode,
// where a 202 means the broker acknowledged the events (acks=all), against
// two baselines measured in the same run:
//
//   - "writer/batchN": kafka-go's Writer writing the same batches (the
//     records outboxd produces for N events: key, ID and destination
//     headers, payload; partitioned by the same KeyBalancer, acks=all,
//     BatchTimeout 1ms) from 64 concurrent callers to the same kfake
//     broker, for batches of 100 and of 1,000 events.
//     outboxd-kafka/batchN over it is what HTTP, decoding and validation
//     cost on top of producing, the load generator's HTTP client included
//     (it shares the two cores).
//   - "outboxd-local/single": single-machine mode (no Kafka), single events
//     stored durably in the local file. outboxd-kafka/single over it
//     compares a 202 after the broker's ack with a 202 after an fsync.
//
// The broker is kfake, in the benchmark's process. The group-mode outboxd
// has joined its group and restored its partitions, but its fetches of the
// ingest topic are refused during the runs: what its partition stores
// would ingest meanwhile is a cost of the consumer, not of the way to the
// broker's acknowledgement that a 202 waits for, and on two cores it would
// load whichever side it overlapped. Each side runs twice, alternating, so
// that a drift of the machine's load does not favour one. Run:
//
//	go test -run '^$' -bench KafkaModeIngest -benchtime 3s ./cmd/outboxd/
//
// and compare the events/s of each outboxd-kafka run with the run of its
// baseline next to it.
func BenchmarkKafkaModeIngest(b *testing.B) {
	const parts = 6
	// kfake keeps its log in a file (not fsynced, as Kafka by default):
	// its in-memory log copies itself whole each time it doubles, which
	// would make every run slower than the one before.
	cluster := newEventsCluster(b, parts, kfake.DataDir(b.TempDir()))
	defer cluster.Close()
	brokers := strings.Join(cluster.ListenAddrs(), ",")

	hang := http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		<-r.Context().Done() // deliveries hang: only ingest writes to the stores
	})}
	addr, stop := serveLoopback(b, &hang)
	defer stop()
	endpoint := "sink=http://" + addr + "/,allow-private,timeout=15m"

	dir := b.TempDir()
	tuning := writeTuning(b, dir, failoverTuning)
	kdir := filepath.Join(dir, "kafka")
	ldir := filepath.Join(dir, "local")
	for _, d := range []string{kdir, ldir} {
		if err := os.Mkdir(d, 0o700); err != nil {
			b.Fatal(err)
		}
	}
	kp := start(b, kdir, "--config", tuning, "--endpoint", endpoint, "--max-body-bytes", "5MiB",
		"--kafka-brokers", brokers, "--kafka-topic", "events", "--kafka-group", "bench", "--kafka-destination", "sink")
	testkit.WaitFor(b, time.Minute, "the group-mode instance ready", func() bool {
		resp, err := http.Get(kp.url("/readyz"))
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	lp := start(b, ldir, "--endpoint", endpoint, "--max-body-bytes", "5MiB")
	// From here the group-mode instance's fetches of the ingest topic are
	// refused (it backs off and retries), so that its own ingest of what
	// is produced does not share the two cores with the runs: they measure
	// the way to the broker's acknowledgement, which is what a 202 waits
	// for. The group and its changelog work as usual.
	// Every run reports the produce requests the broker got per event
	// (partition batches: a request carries one per partition).
	var partBatches atomic.Int64
	cluster.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		for _, t := range req.(*kmsg.ProduceRequest).Topics {
			if t.Topic == "events" {
				partBatches.Add(int64(len(t.Partitions)))
			}
		}
		return nil, nil, false
	})
	batches := func(b *testing.B, events int, run func()) {
		before := partBatches.Load()
		run()
		if n := partBatches.Load() - before; n > 0 {
			b.ReportMetric(float64(events)/float64(n), "events/partition-batch")
		}
	}
	cluster.ControlKey(int16(kmsg.Fetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		fr := req.(*kmsg.FetchRequest)
		if len(fr.Topics) == 0 || fr.Topics[0].Topic != "events" {
			return nil, nil, false
		}
		resp := fr.ResponseKind().(*kmsg.FetchResponse)
		for _, t := range fr.Topics {
			rt := kmsg.NewFetchResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewFetchResponseTopicPartition()
				rp.Partition = p.Partition
				rp.ErrorCode = kerr.KafkaStorageError.Code
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp, nil, true
	})

	single := []byte(eventJSON(1))
	batchBody := func(n int) []byte {
		var batch strings.Builder
		batch.WriteByte('[')
		for i := range n {
			if i > 0 {
				batch.WriteByte(',')
			}
			batch.WriteString(eventJSON(i))
		}
		batch.WriteByte(']')
		return []byte(batch.String())
	}

	tr := &kafkago.Transport{DialTimeout: time.Second}
	defer tr.CloseIdleConnections()
	w := &kafkago.Writer{Addr: kafkago.TCP(cluster.ListenAddrs()...), Topic: "events", Transport: tr,
		Balancer: kafka.KeyBalancer{}, RequiredAcks: kafkago.RequireAll,
		BatchSize: 1000, BatchBytes: 5 << 20, BatchTimeout: time.Millisecond}
	defer w.Close()

	// Each side runs twice, alternating, so that a drift of the machine's
	// load over the run does not favour one side.
	for _, size := range []int{100, 1000} {
		body := batchBody(size)
		for round := range 2 {
			b.Run(fmt.Sprintf("writer/batch%d/round%d", size, round), func(b *testing.B) {
				batches(b, b.N*size, func() { writerLoad(b, w, size) })
			})
			b.Run(fmt.Sprintf("outboxd-kafka/batch%d/round%d", size, round), func(b *testing.B) {
				batches(b, b.N*size, func() { load(b, kp.url("/v1/events"), body, size, kp.cmd.Process.Pid) })
			})
		}
	}
	for round := range 2 {
		b.Run(fmt.Sprintf("outboxd-local/single/round%d", round), func(b *testing.B) {
			load(b, lp.url("/v1/events"), single, 1, lp.cmd.Process.Pid)
		})
		b.Run(fmt.Sprintf("outboxd-kafka/single/round%d", round), func(b *testing.B) {
			batches(b, b.N, func() { load(b, kp.url("/v1/events"), single, 1, kp.cmd.Process.Pid) })
		})
	}
}

// writerLoad writes b.N batches of perCall records, the records outboxd
// produces for eventJSON's events, from 64 concurrent callers, and reports
// calls and events per second.
func writerLoad(b *testing.B, w *kafkago.Writer, perCall int) {
	b.Helper()
	const callers = 64
	var seq atomic.Int64
	batchOf := func() []kafkago.Message {
		msgs := make([]kafkago.Message, perCall)
		for i := range msgs {
			n := int(seq.Add(1))
			msgs[i] = kafkago.Message{Key: fmt.Appendf(nil, "customer-%d", i%1000),
				Value: fmt.Appendf(nil, `{"order":%d,"status":"paid","total":"129.90","currency":"EUR"}`, i),
				Headers: []kafkago.Header{
					{Key: kafka.DefaultIDHeader, Value: fmt.Appendf(nil, "writer-%012d", n)},
					{Key: kafka.DefaultDestinationHeader, Value: []byte("sink")},
				}}
		}
		return msgs
	}
	ctx := context.Background()
	concurrently(b, callers, perCall, "writes", func() error { return w.WriteMessages(ctx, batchOf()...) })
}
