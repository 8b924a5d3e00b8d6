package managed

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/outboxd/outbox/httpsink"
	"github.com/outboxd/outbox/outbox"
	"github.com/outboxd/outbox/outbox/httpapi"
)

// benchEndpoints is the number of managed endpoints of the benchmarks: an
// operator's trial had 20,000.
const benchEndpoints = 20_000

// benchFile writes a file holding n managed endpoints, each subscribed to
// a topic of its own and one in ten rate-limited, and returns its path.
func benchFile(b *testing.B, n int) string {
	b.Helper()
	path := filepath.Join(b.TempDir(), "outboxd.db")
	sink, err := httpsink.New(httpsink.Config{AllowPrivateNetworks: true})
	if err != nil {
		b.Fatal(err)
	}
	defer sink.Close()
	o, err := outbox.Open(path, outbox.Config{Sink: sink, NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer o.Stop(context.Background())
	now := time.Now().UTC()
	err = o.Update(context.Background(), func(tx *outbox.Tx) error {
		bk, err := tx.CreateBucketIfNotExists(bucket)
		if err != nil {
			return err
		}
		for i := range n {
			e := benchEndpoint(i, now)
			if err := bk.Put([]byte(e.name), encode(e)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return path
}

func benchEndpoint(i int, now time.Time) *endpoint {
	s := spec{URL: fmt.Sprintf("http://127.0.0.1:9/hooks/%d", i), Topics: []string{fmt.Sprintf("tenant-%d.*", i)}}
	if i%10 == 0 {
		s.Rate, s.Burst = 5, 10
	}
	return &endpoint{name: fmt.Sprintf("ep-%06d", i), spec: s, managed: true, secret: newSecret(), createdAt: now, updatedAt: now}
}

// benchNode is the outbox, sink and registry of outboxd serve on a file.
type benchNode struct {
	o    *outbox.Outbox
	sink *httpsink.Sink
	reg  *Registry
}

// openBench opens path as outboxd serve does: the outbox (not started),
// the sink and the registry that loads the managed endpoints into them.
func openBench(b *testing.B, path string) *benchNode {
	b.Helper()
	sink, err := httpsink.New(httpsink.Config{AllowPrivateNetworks: true})
	if err != nil {
		b.Fatal(err)
	}
	limits, err := outbox.NewRateLimits(nil)
	if err != nil {
		b.Fatal(err)
	}
	o, err := outbox.Open(path, outbox.Config{Sink: sink, RateLimits: limits, NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	reg, err := Open(context.Background(), Config{Outbox: o, Sink: sink, Limits: limits})
	if err != nil {
		b.Fatal(err)
	}
	return &benchNode{o: o, sink: sink, reg: reg}
}

func (n *benchNode) close() {
	n.o.Stop(context.Background())
	n.sink.Close()
}

// BenchmarkOpenRegistry20000 measures the start of outboxd serve's
// endpoints with 20,000 managed ones: the outbox's Open, the sink's
// set-up and the registry's Open, which loads them into both.
func BenchmarkOpenRegistry20000(b *testing.B) {
	path := benchFile(b, benchEndpoints)
	for b.Loop() {
		n := openBench(b, path)
		if got := n.reg.Managed(); got != benchEndpoints {
			b.Fatalf("%d managed endpoints, want %d", got, benchEndpoints)
		}
		b.StopTimer()
		n.close()
		b.StartTimer()
	}
}

// BenchmarkCreateEndpointAt20000 measures one CreateEndpoint (stored,
// defined in the sink, rate-limited, and subscribed to a topic or not)
// beside 20,000 managed endpoints, against the same beside 100: its cost
// should not grow with the count. The ratio is reported as x-at-100.
func BenchmarkCreateEndpointAt20000(b *testing.B) {
	paths := map[int]string{}
	for _, topics := range []bool{false, true} {
		var at100 float64
		for _, n := range []int{100, benchEndpoints} {
			if paths[n] == "" {
				paths[n] = benchFile(b, n)
			}
			b.Run(fmt.Sprintf("topics=%v/endpoints=%d", topics, n), func(b *testing.B) {
				per := benchCreate(b, paths[n], topics)
				if n == 100 {
					at100 = per
				} else if at100 > 0 {
					b.ReportMetric(per/at100, "x-at-100")
				}
			})
		}
	}
}

// benchCreate creates b.N endpoints on the file at path and returns the
// time each took.
func benchCreate(b *testing.B, path string, topics bool) float64 {
	node := openBench(b, path)
	defer node.close()
	ctx := context.Background()
	i := 0
	start := time.Now()
	for b.Loop() {
		name := fmt.Sprintf("new-%v-%09d", topics, i)
		i++
		s := httpapi.EndpointSpec{URL: "http://127.0.0.1:9/new", Rate: 5, Burst: 10}
		if topics {
			s.Topics = []string{"new." + name}
		}
		if _, _, err := node.reg.CreateEndpoint(ctx, name, s); err != nil {
			b.Fatal(err)
		}
	}
	return float64(time.Since(start)) / float64(b.N)
}

// BenchmarkRefuseManyHeaders measures the API's answer to a creation with
// far more headers than MaxHeaders: the request is read, checked and
// refused in time linear in its size. The time per header at 100,000 is
// reported against the same at 1,000 as x-per-header-at-1000 (about 1
// when linear; it was 100-fold when each key was compared with every
// other).
func BenchmarkRefuseManyHeaders(b *testing.B) {
	node := openBench(b, filepath.Join(b.TempDir(), "outboxd.db"))
	defer node.close()
	api := httpapi.New(node.o, httpapi.Config{Endpoints: node.reg, MaxBodyBytes: 8 << 20})
	var at1000 float64
	for _, n := range []int{1000, 100_000} {
		var body strings.Builder
		body.WriteString(`{"url": "https://example.com/hook", "headers": {`)
		for i := range n {
			if i > 0 {
				body.WriteByte(',')
			}
			fmt.Fprintf(&body, `"X-H-%d": "v"`, i)
		}
		body.WriteString("}}")
		b.Run(fmt.Sprintf("headers=%d", n), func(b *testing.B) {
			start := time.Now()
			for b.Loop() {
				w := httptest.NewRecorder()
				r := httptest.NewRequest("POST", "/v1/endpoints/many", strings.NewReader(body.String()))
				r.Header.Set("Content-Type", "application/json")
				api.ServeHTTP(w, r)
				if w.Code != http.StatusBadRequest {
					b.Fatalf("%d headers: %d %s; want 400", n, w.Code, w.Body)
				}
			}
			perHeader := float64(time.Since(start)) / float64(b.N) / float64(n)
			if n == 1000 {
				at1000 = perHeader
			} else if at1000 > 0 {
				b.ReportMetric(perHeader/at1000, "x-per-header-at-1000")
			}
		})
	}
}
