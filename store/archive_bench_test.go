package store

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// deliverPhase inserts n records and applies their delete outcomes in
// batches of 100, durable, and returns how long that took.
func deliverPhase(b *testing.B, s *Store, prefix string, from uint64, n int) time.Duration {
	start := time.Now()
	recs := make([]*Record, n)
	for i := range recs {
		recs[i] = benchRecord(prefix, from+uint64(i), time.Time{})
		recs[i].Topic, recs[i].Key = "order.created", fmt.Sprintf("cust-%d", i%100)
	}
	if _, err := s.Insert(b.Context(), recs); err != nil {
		b.Fatal(err)
	}
	for batch := range slices.Chunk(recs, 100) {
		outs := make([]Outcome, len(batch))
		for i, r := range batch {
			outs[i] = Outcome{Kind: OutcomeDelete, ID: r.ID, Version: r.Version, Deliveries: 1, LastStatus: 200}
		}
		if _, err := s.Apply(b.Context(), outs, nil); err != nil {
			b.Fatal(err)
		}
	}
	return time.Since(start)
}

// BenchmarkDeliverRetain delivers 1,000 records per iteration (one insert,
// ten outcome batches, durable) into a store without the archive and into
// one with it, alternating, and reports both rates, their ratio and the
// files' sizes: the archive's price, and that a store without it writes
// what it wrote before (BenchmarkDeliverNoArchive is the same phase alone,
// to compare with a build before the archive).
func BenchmarkDeliverRetain(b *testing.B) {
	off := openTest(b, Options{})
	on := openTest(b, Options{Archive: true})
	var tOff, tOn time.Duration
	n := uint64(0)
	for b.Loop() {
		tOff += deliverPhase(b, off, "d", n, 1000)
		tOn += deliverPhase(b, on, "d", n, 1000)
		n += 1000
	}
	b.ReportMetric(float64(n)/tOff.Seconds(), "off-rec/s")
	b.ReportMetric(float64(n)/tOn.Seconds(), "archive-rec/s")
	b.ReportMetric(tOff.Seconds()/tOn.Seconds(), "archive/off")
	so, _ := off.Stats()
	sa, _ := on.Stats()
	b.ReportMetric(float64(so.FileSize), "off-file-bytes")
	b.ReportMetric(float64(sa.FileSize), "archive-file-bytes")
}

// BenchmarkDeliverNoArchive is BenchmarkDeliverRetain's phase without the
// archive alone; it uses nothing newer than the archive, so the same file
// runs on a build from before it.
func BenchmarkDeliverNoArchive(b *testing.B) {
	s := openTest(b, Options{})
	n := uint64(0)
	var t time.Duration
	for b.Loop() {
		t += deliverPhase(b, s, "d", n, 1000)
		n += 1000
	}
	st, _ := s.Stats()
	b.ReportMetric(float64(n)/t.Seconds(), "rec/s")
	b.ReportMetric(float64(st.FileSize), "file-bytes")
}

// archiveFixture returns a closed store file holding n archived records,
// delivered one a millisecond from fixtureNow: topics order.created,
// order.paid, invoice.sent in turn, endpoints ep-0..ep-9, and 10,000 keys
// ("cust-00000".."cust-09999"), built with big unsynced transactions.
func archiveFixture(b *testing.B, n int) string {
	benchMu.Lock()
	defer benchMu.Unlock()
	if p, ok := benchFixtures[-n]; ok {
		return p
	}
	dir := os.Getenv("OUTBOX_BENCH_FIXTURES")
	if dir == "" {
		if benchDir == "" {
			d, err := os.MkdirTemp("", "store-bench-")
			if err != nil {
				b.Fatal(err)
			}
			benchDir = d
		}
		dir = benchDir
	}
	path := filepath.Join(dir, fmt.Sprintf("archive-%d-v%d.db", n, maxSchema))
	if _, err := os.Stat(path); err != nil {
		buildArchiveFixture(b, path, n)
	}
	benchFixtures[-n] = path
	return path
}

func buildArchiveFixture(b *testing.B, path string, n int) {
	start := time.Now()
	s, err := Open(path, Options{NoSync: true, Archive: true})
	if err != nil {
		b.Fatal(err)
	}
	topics := []string{"order.created", "order.paid", "invoice.sent"}
	payload := make([]byte, 64)
	const chunk = 20_000
	for from := 0; from < n; from += chunk {
		err := s.do(b.Context(), chunk, func(w *wtx) error {
			for i := from; i < min(from+chunk, n); i++ {
				r := &Record{ID: benchID("a", uint64(i)), Topic: topics[i%3], Endpoint: fmt.Sprintf("ep-%d", i%10),
					Key: fmt.Sprintf("cust-%05d", i%10_000), Method: "POST", Payload: payload, CreatedAt: fixtureNow}
				w.now = fixtureNow.Add(time.Duration(i) * time.Millisecond)
				w.archive(r)
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	fi, _ := os.Stat(path)
	b.Logf("fixture: %d archived records, %d MiB, built in %v", n, fi.Size()>>20, time.Since(start).Round(time.Millisecond))
}

// BenchmarkSearchArchive1M searches 1,000,000 archived records for one key
// prefix (100 records), one endpoint in a time window, and a topic pattern
// in a time window, a page of 50 each: keys-read/op is what one page read
// (index entries and records), at most twice the page.
func BenchmarkSearchArchive1M(b *testing.B) {
	path := archiveFixture(b, 1_000_000)
	s := openAt(b, path, Options{ReadOnly: true})
	from := fixtureNow.Add(500 * time.Second)
	for _, c := range []struct {
		name string
		q    ArchiveQuery
	}{
		{"key-prefix", ArchiveQuery{KeyPrefix: "cust-04242", Limit: 50}},
		{"endpoint-window", ArchiveQuery{Endpoint: "ep-3", From: from, To: from.Add(time.Minute), Limit: 50}},
		{"topic-pattern-window", ArchiveQuery{TopicPrefix: "order.", From: from, To: from.Add(time.Minute), Limit: 50}},
		{"time-window", ArchiveQuery{From: from, Limit: 50}},
	} {
		b.Run(c.name, func(b *testing.B) {
			read, pages := 0, 0
			for b.Loop() {
				page, err := s.SearchArchive(c.q)
				if err != nil || len(page.Records) != 50 {
					b.Fatalf("page: %v records, %v", len(page.Records), err)
				}
				read += page.Read
				pages++
			}
			b.ReportMetric(float64(read)/float64(pages), "keys-read/op")
		})
	}
}

// BenchmarkTrimArchive1M trims the oldest 100,000 of 1,000,000 archived
// records and reports the longest, the 99th percentile and the mean
// transaction: what the trim holds the writer for. "fsync" commits as
// production does (its tail is the disk's: every commit waits for two
// fdatasyncs); "nosync" is the work the batch bounds control.
func BenchmarkTrimArchive1M(b *testing.B) {
	fixture := archiveFixture(b, 1_000_000)
	for _, sync := range []bool{true, false} {
		b.Run(map[bool]string{true: "fsync", false: "nosync"}[sync], func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				path := filepath.Join(b.TempDir(), "trim.db")
				if err := copyFile(fixture, path); err != nil {
					b.Fatal(err)
				}
				s := openAt(b, path, Options{Archive: true, NoSync: !sync})
				b.StartTimer()
				trimAndReport(b, s)
				b.StopTimer()
				_ = s.Close()
				b.StartTimer()
			}
		})
	}
}

// trimAndReport trims the archive fixture's first 100 seconds (100,000
// records) chunk by chunk, timing each transaction.
func trimAndReport(b *testing.B, s *Store) {
	cutoff := fixtureNow.Add(100 * time.Second)
	var ds []time.Duration
	var total time.Duration
	removed := 0
	for {
		start := time.Now()
		n, more, err := s.trimArchiveChunk(b.Context(), cutoff, 0)
		d := time.Since(start)
		if err != nil {
			b.Fatal(err)
		}
		if !more {
			break
		}
		ds, total, removed = append(ds, d), total+d, removed+n
	}
	if removed != 100_000 {
		b.Fatalf("removed %d", removed)
	}
	slices.Sort(ds)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(ds[len(ds)-1]), "longest-tx-ms")
	b.ReportMetric(ms(ds[len(ds)*99/100]), "p99-tx-ms")
	b.ReportMetric(ms(ds[len(ds)/2]), "median-tx-ms")
	b.ReportMetric(ms(total)/float64(len(ds)), "mean-tx-ms")
}
