package store

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

var benchPayload = make([]byte, 256)

// benchID returns sequential IDs shaped like UUIDv7 (time-ordered text).
func benchID(prefix string, n uint64) string {
	return fmt.Sprintf("%s-%016x-7000-8000-000000000000", prefix, n)
}

func benchRecord(prefix string, n uint64, next time.Time) *Record {
	return &Record{ID: benchID(prefix, n), Destination: "https://example.com/hook", Endpoint: "example.com",
		Method: "POST", Headers: map[string]string{"Content-Type": "application/json"},
		Payload: benchPayload, NextAttemptAt: next}
}

func recsPerSec(b *testing.B, n int) {
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "rec/s")
}

// BenchmarkInsertConcurrent64: 64 goroutines each insert one record per
// call, durable on return. The baseline, measured in the same iterations
// (alternating phases, so machine noise hits both alike), is a plain
// DB.Batch put of the same payload by 64 callers, without changelog or
// index, with bbolt's default batch settings. Each iteration is one phase of
// 64x10 records per side.
func BenchmarkInsertConcurrent64(b *testing.B) {
	const callers, perCaller = 64, 10
	s := openTest(b, Options{})
	db := openRawBolt(b)
	ctx := b.Context()
	phase := func(insert func(n uint64) error, next *atomic.Uint64) time.Duration {
		var wg sync.WaitGroup
		start := time.Now()
		for range callers {
			wg.Go(func() {
				for range perCaller {
					if err := insert(next.Add(1)); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		return time.Since(start)
	}
	var nStore, nRaw atomic.Uint64
	var tStore, tRaw time.Duration
	for b.Loop() {
		tStore += phase(func(n uint64) error {
			_, err := s.Insert(ctx, []*Record{benchRecord("c", n, time.Time{})})
			return err
		}, &nStore)
		tRaw += phase(func(n uint64) error {
			id := []byte(benchID("c", n))
			return db.Batch(func(tx *bolt.Tx) error { return tx.Bucket(bucketEvents).Put(id, benchPayload) })
		}, &nRaw)
	}
	reportPair(b, float64(nStore.Load())/tStore.Seconds(), float64(nRaw.Load())/tRaw.Seconds(), "dbbatch")
}

// reportPair reports the store's and the baseline's records per second and
// their ratio.
func reportPair(b *testing.B, store, base float64, baseName string) {
	b.ReportMetric(store, "store-rec/s")
	b.ReportMetric(base, baseName+"-rec/s")
	b.ReportMetric(store/base, "ratio")
}

func openRawBolt(b *testing.B) *bolt.DB {
	db, err := bolt.Open(filepath.Join(b.TempDir(), "raw.db"), 0o600, &bolt.Options{
		NoFreelistSync: true, FreelistType: bolt.FreelistMapType, InitialMmapSize: 1 << 30})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	if err := db.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucket(bucketEvents); return err }); err != nil {
		b.Fatal(err)
	}
	return db
}

// BenchmarkInsertBatch1000: one Insert of 1,000 records (one transaction)
// against a raw bbolt transaction of 1,000 puts of the same IDs and payload,
// alternating in each iteration. Building the records and IDs is not timed
// on either side.
func BenchmarkInsertBatch1000(b *testing.B) {
	const per = 1000
	s := openTest(b, Options{})
	db := openRawBolt(b)
	ctx := b.Context()
	n := uint64(0)
	recs := make([]*Record, per)
	ids := make([][]byte, per)
	var tStore, tRaw time.Duration
	for b.Loop() {
		for i := range recs {
			n++
			recs[i] = benchRecord("b", n, time.Time{})
			ids[i] = []byte(recs[i].ID)
		}
		start := time.Now()
		if _, err := s.Insert(ctx, recs); err != nil {
			b.Fatal(err)
		}
		tStore += time.Since(start)
		start = time.Now()
		err := db.Update(func(tx *bolt.Tx) error {
			bk := tx.Bucket(bucketEvents)
			for _, id := range ids {
				if err := bk.Put(id, benchPayload); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		tRaw += time.Since(start)
	}
	total := float64(b.N * per)
	reportPair(b, total/tStore.Seconds(), total/tRaw.Seconds(), "rawput")
}

// benchFixtures caches the big fixture files for one benchmark run; TestMain
// removes benchDir. With OUTBOX_BENCH_FIXTURES set to a directory they are
// kept there and reused across runs instead.
var (
	benchDir      string
	benchMu       sync.Mutex
	benchFixtures = map[int]string{}
)

var fixtureNow = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// backlogFixture returns a closed store file holding 100 due records and
// backlog records that are not yet due, built with big unsynced
// transactions.
func backlogFixture(b *testing.B, backlog int) string {
	benchMu.Lock()
	defer benchMu.Unlock()
	if p, ok := benchFixtures[backlog]; ok {
		return p
	}
	if dir := os.Getenv("OUTBOX_BENCH_FIXTURES"); dir != "" {
		// Kept between runs: the 1M fixture takes a while to build.
		path := filepath.Join(dir, fmt.Sprintf("backlog-%d-v%d.db", backlog, maxSchema))
		if _, err := os.Stat(path); err == nil {
			benchFixtures[backlog] = path
			return path
		}
		benchFixtures[backlog] = buildFixture(b, path, backlog)
		return path
	}
	if benchDir == "" {
		d, err := os.MkdirTemp("", "store-bench-")
		if err != nil {
			b.Fatal(err)
		}
		benchDir = d
	}
	path := buildFixture(b, filepath.Join(benchDir, fmt.Sprintf("backlog-%d.db", backlog)), backlog)
	benchFixtures[backlog] = path
	return path
}

func buildFixture(b *testing.B, path string, backlog int) string {
	start := time.Now()
	s, err := Open(path, Options{NoSync: true, MaxBatch: 20_000, Now: func() time.Time { return fixtureNow }})
	if err != nil {
		b.Fatal(err)
	}
	var recs []*Record
	for i := range 100 {
		recs = append(recs, benchRecord("due", uint64(i), fixtureNow.Add(-time.Minute)))
	}
	for i := 0; i < backlog; i++ {
		recs = append(recs, benchRecord("later", uint64(i), fixtureNow.Add(time.Hour+time.Duration(i)*time.Millisecond)))
		if len(recs) == 20_000 {
			if _, err := s.Insert(b.Context(), recs); err != nil {
				b.Fatal(err)
			}
			recs = recs[:0]
		}
	}
	if _, err := s.Insert(b.Context(), recs); err != nil {
		b.Fatal(err)
	}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	fi, _ := os.Stat(path)
	b.Logf("fixture: %d not-yet-due + 100 due records, %d MiB, built in %v", backlog, fi.Size()>>20, time.Since(start).Round(time.Millisecond))
	return path
}

func removeBenchFixtures() {
	if benchDir != "" {
		os.RemoveAll(benchDir)
	}
}

// BenchmarkDueSnapshot takes a snapshot of the 100 due records with 0, 10k
// and 1M records in the backlog that are not yet due: the time per snapshot
// must not grow with the backlog.
func BenchmarkDueSnapshot(b *testing.B) {
	for _, backlog := range []int{0, 10_000, 1_000_000} {
		b.Run(fmt.Sprintf("backlog=%d", backlog), func(b *testing.B) {
			s := openAt(b, backlogFixture(b, backlog), Options{})
			for b.Loop() {
				recs, err := s.Due(DueQuery{Now: fixtureNow, Limit: 100})
				if err != nil || len(recs) != 100 {
					b.Fatalf("Due = %d, %v", len(recs), err)
				}
			}
		})
	}
}

// BenchmarkOpen1M opens a store of 1M pending records; it reports the time
// per Open and the Go heap held by the open store. "clean" follows a Close
// (bbolt's freelist was written); "unclean" follows a crash (bbolt rebuilds
// the freelist by walking the whole file).
func BenchmarkOpen1M(b *testing.B) {
	clean := backlogFixture(b, 1_000_000)
	b.Run("clean", func(b *testing.B) { benchOpen(b, clean) })
	b.Run("unclean", func(b *testing.B) {
		path := filepath.Join(b.TempDir(), "unclean.db")
		if err := copyFile(clean, path); err != nil {
			b.Fatal(err)
		}
		benchOpen(b, path)
	})
}

func benchOpen(b *testing.B, path string) {
	var heap uint64
	for b.Loop() {
		var before, after runtime.MemStats
		b.StopTimer()
		if filepath.Base(path) == "unclean.db" {
			// Keep the freelist unsynced for every iteration: Close writes it.
			if err := dropFreelist(path); err != nil {
				b.Fatal(err)
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&before)
		b.StartTimer()
		s, err := Open(path, Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		runtime.GC()
		runtime.ReadMemStats(&after)
		if st, err := s.Stats(); err != nil || st.Pending != 1_000_100 {
			b.Fatalf("Stats = %+v, %v", st, err)
		}
		heap = max(heap, after.HeapAlloc-min(before.HeapAlloc, after.HeapAlloc))
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(heap)/(1<<20), "heap-MiB")
}

// dropFreelist commits once without writing bbolt's freelist, leaving the
// file as a crash would.
func dropFreelist(path string) error {
	db, err := bolt.Open(path, 0o600, &bolt.Options{NoFreelistSync: true, FreelistType: bolt.FreelistMapType})
	if err != nil {
		return err
	}
	err = db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Put([]byte("x"), nil) })
	return errors.Join(err, db.Close())
}

func copyFile(from, to string) error {
	src, err := os.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.Create(to)
	if err != nil {
		return err
	}
	_, err = io.Copy(dst, src)
	return errors.Join(err, dst.Close())
}

// BenchmarkInsertKeyed measures durable 4,000-record Inserts on top of a
// backlog of pending records, with no keys, with 1,000 keys (round robin),
// and with a new key for every record. Each keyed record also gets a key
// index entry (keyPrefix ‖ seq ‖ ID, see keyIndex) at a position set by its
// key, so a batch of keyed records dirties key index leaves all over the
// tree and the commit rewrites each of them: the cost of keyed inserts
// grows with the backlog, that of unkeyed ones does not. The "noindex"
// cases open the store with NoKeyIndex.
//
//	go test -run '^$' -bench InsertKeyed -benchtime 25x ./store/
func BenchmarkInsertKeyed(b *testing.B) {
	const per = 4000
	keyOf := map[string]func(n uint64) string{
		"none":   func(uint64) string { return "" },
		"1000":   func(n uint64) string { return fmt.Sprintf("k-%d", n%1000) },
		"unique": func(n uint64) string { return fmt.Sprintf("k-%x", n*0x9e3779b97f4a7c15) },
	}
	for _, keys := range []string{"none", "1000", "unique", "1000-noindex", "unique-noindex"} {
		for _, backlog := range []int{0, 300_000} {
			b.Run(fmt.Sprintf("keys=%s/backlog=%d", keys, backlog), func(b *testing.B) {
				keys, noIndex := strings.CutSuffix(keys, "-noindex")
				s := openTest(b, Options{MaxBatch: per, NoKeyIndex: noIndex})
				n := uint64(0)
				batch := func() []*Record {
					recs := make([]*Record, per)
					for i := range recs {
						n++
						recs[i] = benchRecord("k", n, time.Time{})
						recs[i].Key = keyOf[keys](n)
					}
					return recs
				}
				for n < uint64(backlog) {
					if _, err := s.Insert(b.Context(), batch()); err != nil {
						b.Fatal(err)
					}
				}
				var took time.Duration
				for b.Loop() {
					recs := batch()
					start := time.Now()
					if _, err := s.Insert(b.Context(), recs); err != nil {
						b.Fatal(err)
					}
					took += time.Since(start)
				}
				b.ReportMetric(float64(b.N*per)/took.Seconds(), "rec/s")
			})
		}
	}
}

// BenchmarkCheck1M checks a store of 1M pending records (Check reads every
// page and decodes every value once): the cost an operator pays for
// outboxd check, and why Open does not run it.
func BenchmarkCheck1M(b *testing.B) {
	path := backlogFixture(b, 1_000_000)
	for b.Loop() {
		rep, err := Check(path, CheckOptions{})
		if err != nil || keysRead(rep, "events") != 1_000_100 {
			b.Fatalf("Check: %v, %+v", err, rep)
		}
	}
}

// BenchmarkDueHeldBacklog: 50,000 due records of a held endpoint come
// first in due order, then 100 due records of each of four healthy
// endpoints. "due" is a punctuation on the global due index that skips the
// held endpoint's records (its default MaxScan runs out inside the held
// backlog); "by-endpoint" reads the due heads, passes over the held
// endpoint, and takes 25 records of each healthy one. healthy/op counts the
// healthy records a punctuation got.
func BenchmarkDueHeldBacklog(b *testing.B) {
	const held, healthy, perHealthy = 50_000, 4, 100
	s := openTest(b, Options{NoSync: true, MaxBatch: 20_000, Now: func() time.Time { return fixtureNow }})
	var recs []*Record
	for i := range held {
		r := benchRecord("held", uint64(i), fixtureNow.Add(-time.Hour+time.Duration(i)*time.Microsecond))
		r.Endpoint = "held"
		recs = append(recs, r)
	}
	for e := range healthy {
		for i := range perHealthy {
			r := benchRecord(fmt.Sprintf("ok%d", e), uint64(i), fixtureNow.Add(-time.Minute+time.Duration(i)*time.Millisecond))
			r.Endpoint = fmt.Sprintf("ok%d", e)
			recs = append(recs, r)
		}
	}
	for len(recs) > 0 {
		n := min(len(recs), 20_000)
		if _, err := s.Insert(b.Context(), recs[:n]); err != nil {
			b.Fatal(err)
		}
		recs = recs[n:]
	}
	skipHeld := func(r *Record) bool { return r.Endpoint == "held" }
	b.Run("due", func(b *testing.B) {
		got := 0
		for b.Loop() {
			due, err := s.Due(DueQuery{Now: fixtureNow, Limit: 100, Skip: skipHeld})
			if err != nil {
				b.Fatal(err)
			}
			got += len(due)
		}
		b.ReportMetric(float64(got)/float64(b.N), "healthy/op")
	})
	b.Run("by-endpoint", func(b *testing.B) {
		got := 0
		for b.Loop() {
			var eps []EndpointLimit
			if err := s.DueHeads(fixtureNow, func(ep string, _ time.Time) bool {
				if ep != "held" {
					eps = append(eps, EndpointLimit{Endpoint: ep, Limit: 25})
				}
				return true
			}); err != nil {
				b.Fatal(err)
			}
			res, err := s.DueByEndpoint(DueByEndpointQuery{Now: fixtureNow, Endpoints: eps})
			if err != nil {
				b.Fatal(err)
			}
			for _, r := range res {
				got += len(r.Records)
			}
		}
		b.ReportMetric(float64(got)/float64(b.N), "healthy/op")
	})
}
