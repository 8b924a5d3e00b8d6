package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"
)

// The baselines: what the same machine does, in the same run, without the
// outbox in the way. Each outbox figure in the table is quoted as a ratio of
// one of these.

// openRawBolt opens a fresh bbolt file tuned as the store tunes its own
// (16 KiB pages, hashmap freelist not synced, a generous initial mmap), so
// that the baseline differs from the outbox only by what the outbox adds.
func openRawBolt(dir, name string) (*bolt.DB, error) {
	db, err := bolt.Open(filepath.Join(dir, name), 0o600, &bolt.Options{
		Timeout:         time.Second,
		NoFreelistSync:  true,
		FreelistType:    bolt.FreelistMapType,
		InitialMmapSize: 1 << 30,
		PageSize:        16 << 10,
	})
	if err != nil {
		return nil, err
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists([]byte("events"))
		return err
	}); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// newKey returns a UUIDv7 as the outbox generates for events without an ID:
// time-ordered keys that append at the right edge of the B+tree.
func newKey() []byte {
	id, err := uuid.NewV7()
	if err != nil {
		// NewV7 fails only when the system's random source does.
		panic(err)
	}
	return []byte(id.String())
}

// rawPuts measures durable bbolt puts of value into db for d. callers
// goroutines write concurrently; perTx puts share a transaction. With
// callers > 1 each caller's put goes through DB.Batch with MaxBatchSize set
// to the number of callers: bbolt's own group commit, sized to the
// concurrency (its best setting; the default 10 ms timer alone gives a
// fraction of this). It returns the puts done and the time taken.
func rawPuts(ctx context.Context, db *bolt.DB, callers, perTx int, value []byte, d time.Duration) (int64, time.Duration, error) {
	db.MaxBatchSize = callers
	put := func(tx *bolt.Tx, n int) error {
		b := tx.Bucket([]byte("events"))
		b.FillPercent = 0.9
		for range n {
			if err := b.Put(newKey(), value); err != nil {
				return err
			}
		}
		return nil
	}
	return timed(ctx, callers, d, func() error {
		if callers == 1 {
			return db.Update(func(tx *bolt.Tx) error { return put(tx, perTx) })
		}
		return db.Batch(func(tx *bolt.Tx) error { return put(tx, perTx) })
	}, perTx)
}

// timed runs fn from callers goroutines for d and returns calls*per and
// the time taken.
func timed(ctx context.Context, callers int, d time.Duration, fn func() error, per int) (int64, time.Duration, error) {
	var total atomic.Int64
	deadline := time.Now().Add(d)
	errc := make(chan error, callers)
	var wg sync.WaitGroup
	start := time.Now()
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) && ctx.Err() == nil {
				if err := fn(); err != nil {
					errc <- err
					return
				}
				total.Add(int64(per))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(errc)
	if err := <-errc; err != nil {
		return 0, 0, err
	}
	return total.Load(), elapsed, ctx.Err()
}

// receiver is a local HTTP endpoint that answers 200 to every delivery and
// records, per event ID (webhook-id header), when it first arrived.
type receiver struct {
	srv    *http.Server
	URL    string
	delay  time.Duration
	served chan struct{}

	mu   sync.Mutex
	seen map[string]time.Time
}

// startReceiver listens on a loopback port. delay is spent in each request
// before answering, to stand in for a remote endpoint's own work.
func startReceiver(delay time.Duration) (*receiver, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &receiver{URL: "http://" + ln.Addr().String() + "/hook", delay: delay, served: make(chan struct{})}
	r.reset()
	r.srv = &http.Server{Handler: r, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		defer close(r.served)
		r.srv.Serve(ln)
	}()
	return r, nil
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	now := time.Now()
	io.Copy(io.Discard, req.Body)
	if r.delay > 0 {
		time.Sleep(r.delay) // stands in for the receiver's own work
	}
	id := req.Header.Get("webhook-id")
	r.mu.Lock()
	if _, ok := r.seen[id]; id != "" && !ok {
		r.seen[id] = now
	}
	r.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

// reset forgets the requests seen so far.
func (r *receiver) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen = make(map[string]time.Time)
}

// arrival returns when the event with that ID first arrived.
func (r *receiver) arrival(id string) (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t, ok := r.seen[id]
	return t, ok
}

func (r *receiver) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := r.srv.Shutdown(ctx)
	<-r.served
	return err
}

// newClient returns an HTTP client that keeps enough idle connections for
// conc concurrent requests to one host.
func newClient(conc int) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = conc * 2
	tr.MaxIdleConnsPerHost = conc * 2
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

// clientLoop is the drain baseline: conc goroutines POST n requests to url
// with a plain net/http client, as a service without an outbox would. It
// returns requests per second and the latency of each request.
func clientLoop(ctx context.Context, url string, n, conc int, body []byte) (float64, []time.Duration, error) {
	client := newClient(conc)
	defer client.CloseIdleConnections()
	var next atomic.Int64
	lat := make([]time.Duration, n)
	errc := make(chan error, conc)
	var wg sync.WaitGroup
	start := time.Now()
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(n) || ctx.Err() != nil {
					return
				}
				req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
				if err != nil {
					errc <- err
					return
				}
				req.Header.Set("Content-Type", "application/json")
				t0 := time.Now()
				resp, err := client.Do(req)
				if err != nil {
					errc <- err
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				lat[i] = time.Since(t0)
				if resp.StatusCode/100 != 2 {
					errc <- fmt.Errorf("baseline POST: status %d", resp.StatusCode)
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(errc)
	if err := <-errc; err != nil {
		return 0, nil, err
	}
	return float64(n) / elapsed.Seconds(), lat, ctx.Err()
}

// noopIngest is the ingest baseline: a handler that reads the request and
// answers 202 with one made-up ID, storing nothing. It is what the HTTP
// layer alone costs.
func noopIngest() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusAccepted)
		io.WriteString(w, `{"ids":["0192f6a1-3c4d-7e5f-8a9b-0c1d2e3f4a5b"]}`)
	})
}

// serve runs h on a loopback port until the returned stop is called.
func serve(h http.Handler) (url string, stop func(), err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.Serve(ln)
	}()
	return "http://" + ln.Addr().String(), func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		<-done
	}, nil
}

// loadGen posts body to url from conc goroutines for d and returns accepted
// (2xx) requests per second. Any other answer is an error: a load generator
// that counts failures as throughput flatters the server.
func loadGen(ctx context.Context, url string, conc int, d time.Duration, body []byte) (float64, error) {
	client := newClient(conc)
	defer client.CloseIdleConnections()
	var ok atomic.Int64
	errc := make(chan error, conc)
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	start := time.Now()
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) && ctx.Err() == nil {
				req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
				if err != nil {
					errc <- err
					return
				}
				req.Header.Set("Content-Type", "application/json")
				resp, err := client.Do(req)
				if err != nil {
					errc <- err
					return
				}
				msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
				resp.Body.Close()
				if resp.StatusCode/100 != 2 {
					errc <- fmt.Errorf("POST %s: status %d: %s", url, resp.StatusCode, bytes.TrimSpace(msg))
					return
				}
				ok.Add(1)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(errc)
	if err := <-errc; err != nil {
		return 0, err
	}
	return float64(ok.Load()) / elapsed.Seconds(), ctx.Err()
}

// percentile returns the p-th percentile (0..100) of ds, sorting ds.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	i := int(p / 100 * float64(len(ds)-1))
	return ds[i]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
