package kafka

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"runtime/pprof"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"

	"github.com/outboxd/outbox/internal/cputime"
	"github.com/outboxd/outbox/kafka/internal/changelog"
	"github.com/outboxd/outbox/outbox"
	"github.com/outboxd/outbox/store"
)

// nopSink accepts every delivery.
type nopSink struct{}

func (nopSink) Deliver(context.Context, *outbox.Delivery) outbox.Result {
	return outbox.Result{Action: outbox.ActionSuccess, Status: 200}
}

// BenchmarkIngest measures topic -> durable store (fsync on) against three
// baselines measured in the same iteration: kafka-go's own consumer group
// reading the same records from the same broker (consume only, no store);
// the store alone taking the same events the way ingest hands them over (one
// writer per partition, batches of 500), without Kafka; and the floor of
// the store's layout (store.Floor: bbolt alone writing what the
// store writes for each event, three puts) in commits of 8,000, with
// nothing else. Each phase also reports the CPU it used per event (the
// whole process: broker, client and store), which a busy machine changes
// far less than the rates.
//
// On two cores, ingest at a rate R needs R × (CPU per event consumed +
// CPU per event stored) ≤ 2 s of CPU per second; the floor phase's
// cpu-µs/event bounds the second term from below.
//
//	go test -run '^$' -bench Ingest -benchtime 3x ./kafka/
//	BENCH_BATCH=5000 go test -run '^$' -bench Ingest -benchtime 3x ./kafka/
func BenchmarkIngest(b *testing.B) {
	const parts, n = 6, 60_000
	c := newCluster(b, kfakeSeed(parts, "in")...)
	brokers := c.ListenAddrs()
	p := newProducer(b, brokers, "in")
	payload := bytes.Repeat([]byte("x"), 200)
	msgs := make([]kafkago.Message, n)
	for i := range msgs {
		msgs[i] = kafkago.Message{Key: []byte("k-" + strconv.Itoa(i%1000)), Value: payload}
	}
	p.produce(b, msgs...)

	var consumeSecs, ingestSecs, storeSecs, floorSecs float64
	var consumeCPU, ingestCPU, storeCPU, floorCPU time.Duration
	b.ResetTimer()
	for i := range b.N {
		// Floor: bbolt alone, the store's three puts per event.
		start, cpu0 := time.Now(), cputime.Process()
		layoutFloor(b, dbPath(b, fmt.Sprintf("floor-%d", i)), parts, n, payload)
		floorSecs += time.Since(start).Seconds()
		floorCPU += cputime.Process() - cpu0

		// Baseline: the store alone, the same events enqueued by one
		// writer per partition in batches of 500 (what ingest does).
		so, err := outbox.Open(dbPath(b, fmt.Sprintf("store-%d", i)), benchOutboxConfig())
		if err != nil {
			b.Fatal(err)
		}
		start, cpu0 = time.Now(), cputime.Process()
		var wg sync.WaitGroup
		for part := range parts {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for off := 0; off < n/parts; off += 500 {
					evs := make([]outbox.Event, 0, 500)
					for j := off; j < min(off+500, n/parts); j++ {
						evs = append(evs, outbox.Event{ID: RecordID("in", part, int64(j)), Key: "k-" + strconv.Itoa(j%1000),
							Destination: "dest", Payload: payload})
					}
					if _, err := so.Enqueue(context.Background(), evs...); err != nil {
						b.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		storeSecs += time.Since(start).Seconds()
		storeCPU += cputime.Process() - cpu0
		if err := so.Stop(context.Background()); err != nil {
			b.Fatal(err)
		}

		// Baseline: kafka-go's consumer group, FetchMessage only.
		tr := &kafkago.Transport{}
		start, cpu0 = time.Now(), cputime.Process()
		r := kafkago.NewReader(kafkago.ReaderConfig{Brokers: brokers, GroupID: fmt.Sprintf("base-%d", i), Topic: "in",
			StartOffset: kafkago.FirstOffset, MinBytes: 1, MaxBytes: 16 << 20, MaxWait: 100 * time.Millisecond,
			QueueCapacity: 500, HeartbeatInterval: 100 * time.Millisecond, SessionTimeout: time.Second})
		for got := 0; got < n; got++ {
			if _, err := r.FetchMessage(context.Background()); err != nil {
				b.Fatal(err)
			}
		}
		consumeSecs += time.Since(start).Seconds()
		consumeCPU += cputime.Process() - cpu0
		_ = r.Close()
		tr.CloseIdleConnections()

		// Ours: into an outbox on a durable file (not started: nothing is
		// delivered, so the store does only the ingest writes).
		o, err := outbox.Open(dbPath(b, fmt.Sprintf("ingest-%d", i)), benchOutboxConfig())
		if err != nil {
			b.Fatal(err)
		}
		cfg := Config{Brokers: brokers, Topic: "in", Group: fmt.Sprintf("ours-%d", i), Destination: "dest",
			HeartbeatInterval: 100 * time.Millisecond, SessionTimeout: time.Second, BatchSize: benchBatch}
		start, cpu0 = time.Now(), cputime.Process()
		run, err := Start(context.Background(), o, cfg, nil)
		if err != nil {
			b.Fatal(err)
		}
		pollUntil(func() bool { return run.met.enqueued.Load() >= n })
		ingestSecs += time.Since(start).Seconds()
		ingestCPU += cputime.Process() - cpu0
		if err := run.Close(context.Background()); err != nil {
			b.Fatal(err)
		}
		if st := o.Stats(); st.Pending != n {
			b.Fatalf("%d pending, want %d", st.Pending, n)
		}
		if err := o.Stop(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
	total := float64(n * b.N)
	b.ReportMetric(total/consumeSecs, "consume-only/s")
	b.ReportMetric(total/ingestSecs, "ingest/s")
	b.ReportMetric(total/storeSecs, "store-only/s")
	b.ReportMetric(total/floorSecs, "layout-floor/s")
	b.ReportMetric(consumeSecs/ingestSecs, "ingest/consume")
	b.ReportMetric(storeSecs/ingestSecs, "ingest/store")
	// bbolt has one writer: ingest cannot outrun the layout written alone.
	b.ReportMetric(consumeSecs/floorSecs, "floor/consume")
	perEvent := func(d time.Duration) float64 { return float64(d.Microseconds()) / total }
	b.ReportMetric(perEvent(consumeCPU), "consume-cpu-µs/event")
	b.ReportMetric(perEvent(ingestCPU), "ingest-cpu-µs/event")
	b.ReportMetric(perEvent(storeCPU), "store-cpu-µs/event")
	b.ReportMetric(perEvent(floorCPU), "floor-cpu-µs/event")
}

// layoutFloor writes n events to a new file at path with store.Floor, in
// commits of 8,000 (as the store's ingest commits gather them): the part of
// the store's cost that any implementation of its layout pays.
func layoutFloor(b *testing.B, path string, parts, n int, payload []byte) {
	b.Helper()
	f, err := store.OpenFloor(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	now := time.Now()
	r := &store.Record{ID: RecordID("in", parts-1, int64(n)), Key: "k-999", Destination: "dest",
		Payload: payload, CreatedAt: now, NextAttemptAt: now, Version: uint64(n)}
	rec := store.EncodeRecord(r)
	entry := store.EncodeEntry(&store.Entry{LSN: uint64(n), Op: store.OpEnqueue, ID: r.ID, Version: uint64(n),
		Time: now, Record: r})
	const perCommit = 8000
	evs := make([]store.FloorEvent, 0, perCommit)
	for off := 0; off < n; off += perCommit {
		evs = evs[:0]
		for j := off; j < min(off+perCommit, n); j++ {
			evs = append(evs, store.FloorEvent{ID: []byte(RecordID("in", j%parts, int64(j/parts))), Record: rec, Entry: entry})
		}
		if err := f.Write(evs); err != nil {
			b.Fatal(err)
		}
	}
}

// benchOutboxConfig opens the ingest benchmark's outboxes as outboxd opens
// its own: up to eight API batches (8,000 records) may share a store commit,
// where the library's default is 1,000 (with 1,000 a partition's batch of
// 1,000 records commits alone and waits for its two fsyncs), and without
// the key index, as outboxd runs unless delivery is ordered. BENCH_KEY_INDEX=1
// keeps the index, as an ordered outboxd does.
func benchOutboxConfig() outbox.Config {
	return outbox.Config{Sink: nopSink{}, MaxCommitBatch: 8000,
		NoKeyIndex: os.Getenv("BENCH_KEY_INDEX") != "1"}
}

// BenchmarkShipCapacity measures how fast a backlog of changelog entries is
// shipped (acks=all, shipped LSN recorded) against kafka-go's Writer
// producing the same records to the same broker in the same iteration.
//
//	go test -run '^$' -bench ShipCapacity -benchtime 3x ./kafka/
func BenchmarkShipCapacity(b *testing.B) {
	const n = 20_000 // events; 20,000 changelog entries
	c := newCluster(b)
	brokers := c.ListenAddrs()
	payload := bytes.Repeat([]byte("x"), 200)
	var writeSecs, shipSecs float64
	var entries int
	for i := range b.N {
		o, err := outbox.Open(dbPath(b, fmt.Sprintf("ship-%d", i)), outbox.Config{Sink: nopSink{}})
		if err != nil {
			b.Fatal(err)
		}
		evs := make([]outbox.Event, 0, 1000)
		for j := 0; j < n; j++ {
			evs = append(evs, outbox.Event{ID: fmt.Sprintf("ev-%d", j), Key: "k", Destination: "dest", Payload: payload})
			if len(evs) == cap(evs) {
				if _, err := o.Enqueue(context.Background(), evs...); err != nil {
					b.Fatal(err)
				}
				evs = evs[:0]
			}
		}
		st := o.Changelog()
		all, err := st.Entries(1, n)
		if err != nil || len(all) != n {
			b.Fatalf("%d entries, %v", len(all), err)
		}
		entries += len(all)

		// Baseline: the same records through a kafka-go Writer, acks=all.
		topic := fmt.Sprintf("base-%d", i)
		if _, err := admin(b, brokers).CreateTopics(context.Background(), &kafkago.CreateTopicsRequest{Topics: []kafkago.TopicConfig{{
			Topic: topic, NumPartitions: 1, ReplicationFactor: 1,
			ConfigEntries: []kafkago.ConfigEntry{{ConfigName: "max.message.bytes", ConfigValue: strconv.Itoa(DefaultChangelogMaxBytes)}},
		}}}); err != nil {
			b.Fatal(err)
		}
		p := newProducer(b, brokers, topic)
		p.w.BatchSize = DefaultShipBatch
		p.w.BatchBytes = DefaultChangelogMaxBytes
		msgs := make([]kafkago.Message, len(all))
		for j, e := range all {
			msgs[j] = changelog.EntryMessage(e)
		}
		p.produce(b, msgs[:1]...) // creates the topic
		start := time.Now()
		p.produce(b, msgs[1:]...)
		writeSecs += time.Since(start).Seconds()

		// Ours.
		cfg := Config{Brokers: brokers, ChangelogTopic: fmt.Sprintf("cl-%d", i), ShipInterval: time.Millisecond}
		start = time.Now()
		run, err := Start(context.Background(), o, cfg, nil)
		if err != nil {
			b.Fatal(err)
		}
		pollUntil(func() bool { shipped, _ := st.ShippedLSN(); return shipped >= all[len(all)-1].LSN })
		shipSecs += time.Since(start).Seconds()
		if err := run.Close(context.Background()); err != nil {
			b.Fatal(err)
		}
		if err := o.Stop(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(entries)/writeSecs, "writer-entries/s")
	b.ReportMetric(float64(entries)/shipSecs, "shipped-entries/s")
	b.ReportMetric(writeSecs/shipSecs, "ratio")
}

// BenchmarkShipKeepsUp runs a workload of up to 10,000 events/s (enqueue
// and delivery: two changelog entries per event) for three seconds with
// shipping on, and reports the event rate reached, the worst shipping lag
// seen (entries, and age of the oldest unshipped entry), and how long
// shipping needed to reach a lag of zero once the writers stopped.
//
//	go test -run '^$' -bench ShipKeepsUp -benchtime 1x ./kafka/
func BenchmarkShipKeepsUp(b *testing.B) {
	const rate, per = 10_000, 100 // events/s, events per enqueue
	const runFor = 3 * time.Second
	c := newCluster(b)
	brokers := c.ListenAddrs()
	payload := bytes.Repeat([]byte("x"), 200)
	for i := range b.N {
		o, err := outbox.Open(dbPath(b, fmt.Sprintf("keep-%d", i)), outbox.Config{Sink: nopSink{}, Interval: 10 * time.Millisecond})
		if err != nil {
			b.Fatal(err)
		}
		if err := o.Start(); err != nil {
			b.Fatal(err)
		}
		run, err := Start(context.Background(), o, Config{Brokers: brokers, ChangelogTopic: fmt.Sprintf("cl-%d", i), ShipInterval: 5 * time.Millisecond}, nil)
		if err != nil {
			b.Fatal(err)
		}
		// Four writers, each enqueueing 100 events every 40ms.
		const writers = 4
		var mu sync.Mutex
		var maxLag uint64
		var maxAge time.Duration
		var sent atomic.Int64
		start := time.Now()
		var wg sync.WaitGroup
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				tick := time.NewTicker(time.Second * per * writers / rate)
				defer tick.Stop()
				for k := 0; time.Since(start) < runFor; k++ {
					<-tick.C
					evs := make([]outbox.Event, per)
					for j := range evs {
						evs[j] = outbox.Event{ID: fmt.Sprintf("ev-%d-%d-%d-%d", i, w, k, j), Destination: "dest", Payload: payload}
					}
					if _, err := o.Enqueue(context.Background(), evs...); err != nil {
						b.Error(err)
						return
					}
					sent.Add(per)
					n, age := run.ShippingLag()
					mu.Lock()
					maxLag, maxAge = max(maxLag, n), max(maxAge, age)
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		elapsed := time.Since(start)
		stopAt := time.Now()
		pollUntil(func() bool { n, _ := run.ShippingLag(); return n == 0 })
		catchUp := time.Since(stopAt)
		shipped := run.met.shipping.Shipped.Load()
		if err := run.Close(context.Background()); err != nil {
			b.Fatal(err)
		}
		if err := o.Stop(context.Background()); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(sent.Load())/elapsed.Seconds(), "events/s")
		b.ReportMetric(float64(shipped)/(elapsed+catchUp).Seconds(), "shipped-entries/s")
		b.ReportMetric(float64(maxLag), "max-lag-entries")
		b.ReportMetric(maxAge.Seconds()*1000, "max-lag-ms")
		b.ReportMetric(catchUp.Seconds()*1000, "catch-up-ms")
	}
}

// pollUntil checks cond every millisecond until it holds.
func pollUntil(cond func() bool) {
	t := time.NewTicker(time.Millisecond)
	defer t.Stop()
	for !cond() {
		<-t.C
	}
}

// benchBatch is Config.BatchSize for BenchmarkIngest, from $BENCH_BATCH
// (0, the default: DefaultBatchSize), to compare batch sizes.
var benchBatch = func() int { n, _ := strconv.Atoi(os.Getenv("BENCH_BATCH")); return n }()

// benchRestoreRecords is the number of changelog records of
// BenchmarkGroupRestore, from $BENCH_RESTORE_RECORDS (default 100,000).
var benchRestoreRecords = func() int {
	if n, err := strconv.Atoi(os.Getenv("BENCH_RESTORE_RECORDS")); err == nil && n > 0 {
		return n
	}
	return 100_000
}()

// blockSink holds every delivery until it is cancelled: a store that
// delivers to it writes nothing to its changelog while it is measured.
type blockSink struct{}

func (blockSink) Deliver(ctx context.Context, _ *outbox.Delivery) outbox.Result {
	<-ctx.Done()
	return outbox.Result{Action: outbox.ActionRetry, Err: ctx.Err()}
}

// BenchmarkGroupRestore measures the rebuild of a partition store from its
// changelog partition (a Group assigned the partition with no local state:
// read, decode, apply in batches to a new store with fsync on, rename)
// against kafka-go's plain consume of the same records in the same
// iteration, once before and once after the restore (a Reader on the
// partition reading to the end offset and doing nothing with the records):
// "consume" with the restore's reader settings (8 MiB fetches, a queue of
// 1,000 messages), "consume-default" with kafka-go's defaults (1 MiB
// fetches, a queue of 100; MaxWait 250ms, so that closing the reader does
// not wait out a 10s fetch).
// The changelog partition holds $BENCH_RESTORE_RECORDS enqueue records
// (default 100,000, 200-byte payloads) as a partition store ships them:
// encoded by changelog.EntryMessage, stamped with an epoch and a generation, after
// the owner's fence record.
//
// The goroutines of the restore and of the consumes carry a profiler label
// (phase=restore, phase=consume): go tool pprof -tagfocus phase=restore
// shows the restore's CPU (the broker's, in the process too, is
// unlabelled).
//
//	go test -run '^$' -bench GroupRestore -benchtime 3x ./kafka/
//	BENCH_RESTORE_RECORDS=20000 go test -run '^$' -bench GroupRestore -benchtime 1x ./kafka/
func BenchmarkGroupRestore(b *testing.B) {
	n := benchRestoreRecords
	c := newCluster(b, kfakeSeed(1, "in")...)
	brokers := c.ListenAddrs()
	const changelog = "in-changelog"
	if _, err := admin(b, brokers).CreateTopics(context.Background(), &kafkago.CreateTopicsRequest{Topics: []kafkago.TopicConfig{{
		Topic: changelog, NumPartitions: 1, ReplicationFactor: 1,
		ConfigEntries: []kafkago.ConfigEntry{
			{ConfigName: "cleanup.policy", ConfigValue: "compact"},
			{ConfigName: "max.message.bytes", ConfigValue: strconv.Itoa(DefaultChangelogMaxBytes)},
		},
	}}}); err != nil {
		b.Fatal(err)
	}
	fillChangelog(b, brokers, changelog, n)

	var consumeSecs, defaultSecs, restoreSecs float64
	var consumeCPU, restoreCPU time.Duration
	var consumed, defaultConsumed, restored int64
	b.ResetTimer()
	for i := range b.N {
		pr := changelogEnd(b, brokers, changelog)

		// Baselines: kafka-go's Reader set as the restore's, and with its
		// defaults, before and after the restore (the machine's load
		// drifts).
		secs, cpu, k := plainConsume(b, restoreReader(brokers, changelog), pr)
		consumeSecs, consumeCPU, consumed = consumeSecs+secs, consumeCPU+cpu, consumed+k
		secs, _, k = plainConsume(b, kafkago.ReaderConfig{Brokers: brokers, Topic: changelog, MaxWait: 250 * time.Millisecond}, pr)
		defaultSecs, defaultConsumed = defaultSecs+secs, defaultConsumed+k

		// Ours: a group member with no local state rebuilds the store.
		cfg := Config{Brokers: brokers, Topic: "in", Group: fmt.Sprintf("restore-%d", i), ChangelogTopic: changelog,
			Destination: "dest", HeartbeatInterval: 100 * time.Millisecond, SessionTimeout: time.Second,
			HandoverTimeout: 100 * time.Millisecond}
		sc := StoreConfig{Dir: b.TempDir(), Outbox: outbox.Config{Sink: blockSink{}, Concurrency: 1,
			MaxCommitBatch: 8000, NoKeyIndex: true}}
		cpu0 := cputime.Process()
		var g *Group
		var st PartitionStatus
		// The group's goroutines carry the label (go tool pprof -tagfocus).
		pprof.Do(context.Background(), pprof.Labels("phase", "restore"), func(ctx context.Context) {
			var err error
			if g, err = StartGroup(ctx, cfg, sc, nil); err != nil {
				b.Fatal(err)
			}
			pollUntil(func() bool {
				ps := g.Partitions()
				if len(ps) == 1 && ps[0].State == PartitionActive {
					st = ps[0]
					return true
				}
				return false
			})
		})
		restoreCPU += cputime.Process() - cpu0
		if st.Restore.Mode != RestoreRebuild || st.Pending != n {
			b.Fatalf("restore %+v with %d pending, want a rebuild with %d", st.Restore, st.Pending, n)
		}
		restoreSecs += st.Restore.Duration.Seconds()
		restored += st.Restore.Records
		if err := g.Close(context.Background()); err != nil {
			b.Fatal(err)
		}
		secs, _, k = plainConsume(b, kafkago.ReaderConfig{Brokers: brokers, Topic: changelog, MaxWait: 250 * time.Millisecond}, pr)
		defaultSecs, defaultConsumed = defaultSecs+secs, defaultConsumed+k
		secs, cpu, k = plainConsume(b, restoreReader(brokers, changelog), pr)
		consumeSecs, consumeCPU, consumed = consumeSecs+secs, consumeCPU+cpu, consumed+k
	}
	restoreRate := float64(restored) / restoreSecs
	b.ReportMetric(float64(consumed)/consumeSecs, "consume-records/s")
	b.ReportMetric(float64(defaultConsumed)/defaultSecs, "consume-default-records/s")
	b.ReportMetric(restoreRate, "restore-records/s")
	b.ReportMetric(restoreRate/(float64(consumed)/consumeSecs), "restore/consume")
	b.ReportMetric(restoreRate/(float64(defaultConsumed)/defaultSecs), "restore/consume-default")
	b.ReportMetric(float64(consumeCPU.Microseconds())/float64(consumed), "consume-cpu-µs/record")
	// The group's start (joining, the topic check) is in this figure too.
	b.ReportMetric(float64(restoreCPU.Microseconds())/float64(restored), "restore-cpu-µs/record")
}

// restoreReader is the configuration of the restore's reader (changelog.ReadRange)
// on partition 0 of topic.
func restoreReader(brokers []string, topic string) kafkago.ReaderConfig {
	return kafkago.ReaderConfig{Brokers: brokers, Topic: topic, Partition: 0,
		MinBytes: 1, MaxBytes: restoreFetchBytes, MaxWait: 250 * time.Millisecond, QueueCapacity: restoreBatch}
}

// plainConsume reads pr with a kafka-go Reader configured by rc, doing
// nothing with the records, and returns the time and CPU it took and the
// records it read.
func plainConsume(b *testing.B, rc kafkago.ReaderConfig, pr changelog.Range) (secs float64, cpu time.Duration, n int64) {
	b.Helper()
	start, cpu0 := time.Now(), cputime.Process()
	var r *kafkago.Reader
	// The reader's goroutines carry the label (go tool pprof -tagfocus).
	pprof.Do(context.Background(), pprof.Labels("phase", "consume"), func(ctx context.Context) {
		r = kafkago.NewReader(rc)
		if err := r.SetOffset(pr.First); err != nil {
			b.Fatal(err)
		}
		for {
			m, err := r.FetchMessage(ctx)
			if err != nil {
				b.Fatal(err)
			}
			n++
			if m.Offset >= pr.Last-1 {
				return
			}
		}
	})
	secs, cpu = time.Since(start).Seconds(), cputime.Process()-cpu0
	// Not timed: closing waits for the fetch in flight (MaxWait).
	_ = r.Close()
	return secs, cpu, n
}

// fillChangelog produces n enqueue records to partition 0 of changelog as
// a partition store of Group ships them: a fence, then the store's entries
// encoded by changelog.EntryMessage and stamped with the owner's epoch and
// generation.
func fillChangelog(b *testing.B, brokers []string, topic string, n int) {
	b.Helper()
	st := changelog.Stamp{Partition: 0, Epoch: 1, Generation: 1}
	p := newProducer(b, brokers, topic)
	p.w.BatchSize = DefaultShipBatch
	p.w.BatchBytes = DefaultChangelogMaxBytes
	p.produce(b, changelog.FenceMessage(st))
	p.produce(b, stamped(st, storeEntries(b, 0, n)...)...)
}

// storeEntries returns the changelog entries of a store that ingested the
// records first to first+n-1 of partition 0 of topic "in" (200-byte
// payloads).
func storeEntries(t testing.TB, first, n int) []outbox.ChangelogEntry {
	t.Helper()
	o, err := outbox.Open(dbPath(t, "entries"), outbox.Config{Sink: nopSink{}, NoSync: true, NoKeyIndex: true, MaxCommitBatch: 8000})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = o.Stop(context.Background()) }()
	payload := bytes.Repeat([]byte("x"), 200)
	evs := make([]outbox.Event, 0, 1000)
	for j := first; j < first+n; j++ {
		evs = append(evs, outbox.Event{ID: RecordID("in", 0, int64(j)), Key: "k-" + strconv.Itoa(j%1000),
			Destination: "dest", Payload: payload})
		if len(evs) == cap(evs) || j == first+n-1 {
			if _, err := o.Ingest(context.Background(), evs...); err != nil {
				t.Fatal(err)
			}
			evs = evs[:0]
		}
	}
	var out []outbox.ChangelogEntry
	for from := uint64(1); ; {
		es, err := o.Changelog().Entries(from, 10_000)
		if err != nil {
			t.Fatal(err)
		}
		if len(es) == 0 {
			return out
		}
		out = append(out, es...)
		from = es[len(es)-1].LSN + 1
	}
}

// stamped returns the changelog topic records of entries as an owner with
// stamp st ships them.
func stamped(st changelog.Stamp, entries ...outbox.ChangelogEntry) []kafkago.Message {
	msgs := make([]kafkago.Message, len(entries))
	for i, e := range entries {
		msgs[i] = changelog.EntryMessage(e)
		st.Apply(&msgs[i])
	}
	return msgs
}

// changelogEnd returns the first and end offsets of partition 0 of topic.
func changelogEnd(b *testing.B, brokers []string, topic string) changelog.Range {
	b.Helper()
	cl := admin(b, brokers)
	resp, err := cl.ListOffsets(context.Background(), &kafkago.ListOffsetsRequest{Topics: map[string][]kafkago.OffsetRequest{
		topic: {kafkago.FirstOffsetOf(0), kafkago.LastOffsetOf(0)}}})
	if err != nil {
		b.Fatal(err)
	}
	for _, po := range resp.Topics[topic] {
		if po.Error != nil {
			b.Fatal(po.Error)
		}
		return changelog.Range{ID: 0, First: po.FirstOffset, Last: po.LastOffset}
	}
	b.Fatalf("no offsets of %s", topic)
	return changelog.Range{}
}

// countSink accepts every delivery and counts them.
type countSink struct{ n atomic.Int64 }

func (s *countSink) Deliver(context.Context, *outbox.Delivery) outbox.Result {
	s.n.Add(1)
	return outbox.Result{Action: outbox.ActionSuccess, Status: 200}
}

// benchGroupRecords is the number of records of BenchmarkGroupThroughput,
// from $BENCH_GROUP_RECORDS (default 60,000).
var benchGroupRecords = func() int {
	if n, err := strconv.Atoi(os.Getenv("BENCH_GROUP_RECORDS")); err == nil && n > 0 {
		return n
	}
	return 60_000
}()

// BenchmarkGroupThroughput measures ingest and delivery of
// $BENCH_GROUP_RECORDS records (default 60,000, 200-byte payloads) from a
// 6-partition topic to a sink that accepts at once, fsync on, in the two
// Kafka modes, one after the other in each iteration (each first every
// other iteration): "single" is the
// mode before partition-owned state (Start: one store for every partition,
// its changelog shipped to a topic of its own), "group" is StartGroup (a
// store per partition, each shipped to its changelog partition). Both open
// their stores as outboxd does (group commits of up to 8,000 records, no
// key index, the library's delivery defaults: each partition store has its
// own 64 delivery slots). The time runs from the first record enqueued
// (the group joined, the partitions restored) to the last delivery; the
// CPU of the whole process (broker, clients, stores) over that time is
// reported per record.
//
//	go test -run '^$' -bench GroupThroughput -benchtime 3x ./kafka/
func BenchmarkGroupThroughput(b *testing.B) {
	const parts = 6
	n := benchGroupRecords
	c := newCluster(b, kfakeSeed(parts, "in")...)
	brokers := c.ListenAddrs()
	p := newProducer(b, brokers, "in")
	payload := bytes.Repeat([]byte("x"), 200)
	msgs := make([]kafkago.Message, n)
	for i := range msgs {
		msgs[i] = kafkago.Message{Key: []byte("k-" + strconv.Itoa(i%1000)), Value: payload}
	}
	p.produce(b, msgs...)

	storeConfig := func(sink outbox.Sink) outbox.Config {
		return outbox.Config{Sink: sink, MaxCommitBatch: 8000, NoKeyIndex: true}
	}
	config := func(mode string, i int) Config {
		return Config{Brokers: brokers, Topic: "in", Group: fmt.Sprintf("%s-%d", mode, i), Destination: "dest",
			ChangelogTopic:    fmt.Sprintf("%s-%d-changelog", mode, i),
			HeartbeatInterval: 100 * time.Millisecond, SessionTimeout: time.Second}
	}
	// measure waits for the first enqueue and then for n deliveries.
	measure := func(met *metrics, sink *countSink) (float64, time.Duration) {
		pollUntil(func() bool { return met.enqueued.Load() > 0 })
		start, cpu0 := time.Now(), cputime.Process()
		pollUntil(func() bool { return sink.n.Load() >= int64(n) })
		return time.Since(start).Seconds(), cputime.Process() - cpu0
	}
	var singleSecs, groupSecs float64
	var singleCPU, groupCPU time.Duration
	single := func(i int) {
		sink := &countSink{}
		o, err := outbox.Open(dbPath(b, fmt.Sprintf("single-%d", i)), storeConfig(sink))
		if err != nil {
			b.Fatal(err)
		}
		if err := o.Start(); err != nil {
			b.Fatal(err)
		}
		run, err := Start(context.Background(), o, config("single", i), nil)
		if err != nil {
			b.Fatal(err)
		}
		secs, cpu := measure(run.met, sink)
		singleSecs, singleCPU = singleSecs+secs, singleCPU+cpu
		if err := run.Close(context.Background()); err != nil {
			b.Fatal(err)
		}
		if err := o.Stop(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
	group := func(i int) {
		sink := &countSink{}
		g, err := StartGroup(context.Background(), config("group", i),
			StoreConfig{Dir: b.TempDir(), Outbox: storeConfig(sink)}, nil)
		if err != nil {
			b.Fatal(err)
		}
		secs, cpu := measure(g.met, sink)
		groupSecs, groupCPU = groupSecs+secs, groupCPU+cpu
		if got := len(g.Stores()); got != parts {
			b.Fatalf("%d partition stores active, want %d", got, parts)
		}
		if err := g.Close(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for i := range b.N {
		// Each mode goes first every other iteration.
		if i%2 == 0 {
			single(i)
			group(i)
		} else {
			group(i)
			single(i)
		}
	}
	total := float64(n * b.N)
	b.ReportMetric(total/singleSecs, "single-records/s")
	b.ReportMetric(total/groupSecs, "group-records/s")
	b.ReportMetric(singleSecs/groupSecs, "group/single")
	b.ReportMetric(float64(singleCPU.Microseconds())/total, "single-cpu-µs/record")
	b.ReportMetric(float64(groupCPU.Microseconds())/total, "group-cpu-µs/record")
}
