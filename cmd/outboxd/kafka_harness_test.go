package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
)

// newEventsCluster starts a one-broker kfake cluster holding the topic
// "events" with parts partitions, whose groups may use session timeouts
// down to 100ms, with opts besides; the caller closes it.
func newEventsCluster(tb testing.TB, parts int, opts ...kfake.Opt) *kfake.Cluster {
	tb.Helper()
	cluster, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1), kfake.SeedTopics(int32(parts), "events"),
		kfake.GroupMinSessionTimeout(100 * time.Millisecond)}, opts...)...)
	if err != nil {
		tb.Fatal(err)
	}
	return cluster
}

// writeTuning writes the settings text to kafka.yaml in dir and returns
// its path, for --config.
func writeTuning(tb testing.TB, dir, text string) string {
	tb.Helper()
	tuning := filepath.Join(dir, "kafka.yaml")
	if err := os.WriteFile(tuning, []byte(text), 0o600); err != nil {
		tb.Fatal(err)
	}
	return tuning
}

// startInstances starts n outboxd instances with args, each on its own
// state directory under base, and returns the directories and processes.
func startInstances(tb testing.TB, base string, n int, args ...string) ([]string, []*proc) {
	tb.Helper()
	dirs := make([]string, n)
	procs := make([]*proc, n)
	for i := range procs {
		dirs[i] = filepath.Join(base, fmt.Sprintf("instance-%d", i))
		if err := os.Mkdir(dirs[i], 0o700); err != nil {
			tb.Fatal(err)
		}
		procs[i] = start(tb, dirs[i], args...)
	}
	return dirs, procs
}

// writeOrders writes n order records to the topic "events", keyed by a
// thousand customers, in batches of a thousand acknowledged by all
// replicas, to the partitions balancer picks.
func writeOrders(ctx context.Context, tb testing.TB, brokers []string, tr *kafkago.Transport, balancer kafkago.Balancer, n int) {
	tb.Helper()
	w := &kafkago.Writer{Addr: kafkago.TCP(brokers...), Topic: "events", Transport: tr, Balancer: balancer,
		BatchSize: 1000, BatchTimeout: time.Millisecond, RequiredAcks: kafkago.RequireAll}
	payload := []byte(`{"order":1,"status":"paid","total":"129.90","currency":"EUR"}`)
	msgs := make([]kafkago.Message, 0, 1000)
	for i := range n {
		msgs = append(msgs, kafkago.Message{Key: []byte("customer-" + strconv.Itoa(i%1000)), Value: payload})
		if len(msgs) == cap(msgs) || i == n-1 {
			if err := w.WriteMessages(ctx, msgs...); err != nil {
				tb.Fatal(err)
			}
			msgs = msgs[:0]
		}
	}
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
}

// committedOffsets sums the offsets group has committed on parts of the
// topic "events" (a partition without a commit counts 0); ok is false when
// the broker did not answer.
func committedOffsets(ctx context.Context, cl *kafkago.Client, group string, parts []int) (committed int64, ok bool) {
	resp, err := cl.OffsetFetch(ctx, &kafkago.OffsetFetchRequest{GroupID: group, Topics: map[string][]int{"events": parts}})
	if err != nil {
		return 0, false
	}
	for _, p := range resp.Topics["events"] {
		committed += max(p.CommittedOffset, 0)
	}
	return committed, true
}

// takeOver is how the partitions of a killed instance moved, from the
// survivors' logs of the generations after the kill: the first "kafka:
// partitions assigned" and, for each of the killed instance's partitions,
// its first "kafka: partition restored".
type takeOver struct {
	assigned time.Time
	restored map[int]logRecord
}

// seen reads the logs of procs but the victim's for the generations after
// gen and says whether they hold the assignment and a restore of every
// partition in lost.
func (tk *takeOver) seen(procs []*proc, victim int, gen int32, lost []int) bool {
	if tk.restored == nil {
		tk.restored = map[int]logRecord{}
	}
	for i, p := range procs {
		if i == victim {
			continue
		}
		for _, rec := range kafkaLog(p) {
			if rec.Generation <= gen {
				continue
			}
			switch rec.Msg {
			case "kafka: partitions assigned":
				if tk.assigned.IsZero() || rec.Time.Before(tk.assigned) {
					tk.assigned = rec.Time
				}
			case "kafka: partition restored":
				if _, ok := tk.restored[rec.Partition]; slices.Contains(lost, rec.Partition) && !ok {
					tk.restored[rec.Partition] = rec
				}
			}
		}
	}
	return !tk.assigned.IsZero() && len(tk.restored) == len(lost)
}
