package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"github.com/outboxd/outbox/httpsink"
	"github.com/outboxd/outbox/outbox"
	"github.com/outboxd/outbox/outbox/httpapi"
	"github.com/outboxd/outbox/store"
)

func scenarios() []scenario {
	return []scenario{
		{"enqueue", enqueueScenario},
		{"drain", drainScenario},
		{"ingest", ingestScenario},
		{"latency", latencyScenario},
		{"sweep", sweepScenario},
		{"punctuation", punctuationScenario},
		{"open", openScenario},
		{"isolation", isolationScenario},
	}
}

// machine describes where the figures were measured.
func machine() string {
	return fmt.Sprintf("%s/%s, %d CPUs, %s", runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.Version())
}

func (b *bench) payload() []byte {
	p := make([]byte, b.cfg.Payload)
	for i := range p {
		p[i] = 'a' + byte(i%26)
	}
	return p
}

// delivered counts successful deliveries (through Hooks.OnDelivery, called
// once the outcome is committed) and says when n of them happened.
type delivered struct {
	mu      sync.Mutex
	n, want int
	done    chan struct{}
	lat     []time.Duration // Sink durations of successful attempts
}

func newDelivered(want int) *delivered {
	return &delivered{want: want, done: make(chan struct{}), lat: make([]time.Duration, 0, want)}
}

func (d *delivered) hooks() outbox.Hooks {
	return outbox.Hooks{OnDelivery: func(info outbox.DeliveryInfo) {
		if info.Action != outbox.ActionSuccess {
			return
		}
		d.mu.Lock()
		defer d.mu.Unlock()
		d.n++
		d.lat = append(d.lat, info.Duration)
		if d.n == d.want {
			close(d.done)
		}
	}}
}

func (d *delivered) wait(ctx context.Context) error {
	select {
	case <-d.done:
		return nil
	case <-ctx.Done():
		d.mu.Lock()
		defer d.mu.Unlock()
		return fmt.Errorf("%d of %d events delivered: %w", d.n, d.want, ctx.Err())
	}
}

// newSink is the HTTP sink with one endpoint, "recv", at url on loopback.
func newSink(url string, pool int) (*httpsink.Sink, error) {
	return httpsink.New(httpsink.Config{
		Endpoints:            []httpsink.Endpoint{{Name: "recv", URL: url}},
		AllowPrivateNetworks: true,
		PoolSize:             pool,
	})
}

// openOutbox opens a new outbox file named name delivering to url.
func (b *bench) openOutbox(name, url string, cfg outbox.Config) (*outbox.Outbox, func(), error) {
	conc := cfg.Concurrency
	if conc == 0 {
		conc = outbox.DefaultConcurrency
	}
	sink, err := newSink(url, conc)
	if err != nil {
		return nil, nil, err
	}
	cfg.Sink = sink
	path := filepath.Join(b.dir, name)
	o, err := outbox.Open(path, cfg)
	if err != nil {
		sink.Close()
		return nil, nil, err
	}
	return o, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := o.Stop(ctx); err != nil {
			b.logf("stop: %v", err)
		}
		sink.Close()
		os.Remove(path)
	}, nil
}

func (b *bench) events(n int) []outbox.Event {
	p := b.payload()
	evs := make([]outbox.Event, n)
	for i := range evs {
		evs[i] = outbox.Event{Destination: "recv", Payload: p}
	}
	return evs
}

// enqueueScenario: durable enqueue (returns once fsynced) with 1 caller, with
// many callers sharing commits, and in batches, each against raw bbolt puts
// of the same payload in the same shape.
func enqueueScenario(ctx context.Context, b *bench) error {
	rcv, err := startReceiver(0)
	if err != nil {
		return err
	}
	defer rcv.Close()
	value := b.payload()
	d := b.cfg.Duration

	type shape struct {
		name, base       string
		callers, perCall int
	}
	shapes := []shape{
		{"durable enqueue, 1 caller", "bbolt put, 1 per transaction", 1, 1},
		{fmt.Sprintf("durable enqueue, %d callers", b.cfg.Callers), fmt.Sprintf("bbolt put, %d callers, DB.Batch sized to them", b.cfg.Callers), b.cfg.Callers, 1},
		{fmt.Sprintf("durable enqueue, %s-event calls", thousands(float64(b.cfg.Batch))), fmt.Sprintf("bbolt put, %s per transaction", thousands(float64(b.cfg.Batch))), 1, b.cfg.Batch},
	}
	// The baseline and the outbox take turns, in slices of a third of
	// -duration each, so that a change in the disk's speed during the run
	// (other tenants' fsyncs) hits both sides alike.
	const slices = 3
	for i, s := range shapes {
		raw, err := openRawBolt(b.dir, fmt.Sprintf("raw-%d.db", i))
		if err != nil {
			return err
		}
		o, closeFn, err := b.openOutbox(fmt.Sprintf("enqueue-%d.db", i), rcv.URL, outbox.Config{})
		if err != nil {
			raw.Close()
			return err
		}
		var baseN, outN int64
		var baseT, outT time.Duration
		var runErr error
		for range slices {
			n, t, err := rawPuts(ctx, raw, s.callers, s.perCall, value, d/slices)
			if err != nil {
				runErr = fmt.Errorf("baseline: %w", err)
				break
			}
			baseN, baseT = baseN+n, baseT+t
			n, t, err = timed(ctx, s.callers, d/slices, func() error {
				_, err := o.Enqueue(ctx, b.events(s.perCall)...)
				return err
			}, s.perCall)
			if err != nil {
				runErr = err
				break
			}
			outN, outT = outN+n, outT+t
		}
		closeFn()
		raw.Close()
		os.Remove(raw.Path())
		if runErr != nil {
			return runErr
		}
		b.add(row{s.name, figure{float64(outN) / outT.Seconds(), perSecond, "events"}, s.base, figure{float64(baseN) / baseT.Seconds(), perSecond, "puts"}})
	}
	return nil
}

// enqueueAll stores n events in calls of up to 1,000.
func (b *bench) enqueueAll(ctx context.Context, o *outbox.Outbox, n int) ([]string, error) {
	ids := make([]string, 0, n)
	for len(ids) < n {
		k := min(1000, n-len(ids))
		got, err := o.Enqueue(ctx, b.events(k)...)
		if err != nil {
			return nil, err
		}
		ids = append(ids, got...)
	}
	return ids, nil
}

// drainScenario: a backlog of -events events delivered to a local receiver
// that answers 200 at once, against a plain net/http client loop posting the
// same number of requests at the same concurrency; and the file's size with
// the backlog, after the drain, and after offline compaction, against the
// payload bytes it holds.
func drainScenario(ctx context.Context, b *bench) error {
	rcv, err := startReceiver(0)
	if err != nil {
		return err
	}
	defer rcv.Close()
	n := b.cfg.Events
	conc := b.cfg.Concurrency[len(b.cfg.Concurrency)-1]

	rcv.reset()
	base, _, err := clientLoop(ctx, rcv.URL, n, conc, b.payload())
	if err != nil {
		return fmt.Errorf("baseline: %w", err)
	}

	dl := newDelivered(n)
	path := filepath.Join(b.dir, "drain.db")
	sink, err := newSink(rcv.URL, conc)
	if err != nil {
		return err
	}
	defer sink.Close()
	o, err := outbox.Open(path, outbox.Config{Sink: sink, Concurrency: conc, Hooks: dl.hooks()})
	if err != nil {
		return err
	}
	defer o.Stop(context.Background())
	if _, err := b.enqueueAll(ctx, o, n); err != nil {
		return err
	}
	full, err := fileSize(path)
	if err != nil {
		return err
	}
	rcv.reset()
	start := time.Now()
	if err := o.Start(); err != nil {
		return err
	}
	if err := dl.wait(ctx); err != nil {
		return err
	}
	rate := float64(n) / time.Since(start).Seconds()
	b.add(row{fmt.Sprintf("drain %s events, concurrency %d", thousands(float64(n)), conc), figure{rate, perSecond, "events"},
		fmt.Sprintf("net/http client loop, concurrency %d", conc), figure{base, perSecond, "requests"}})

	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := o.Stop(sctx); err != nil {
		return err
	}
	drained, err := fileSize(path)
	if err != nil {
		return err
	}
	if err := store.Compact(path); err != nil {
		return err
	}
	compacted, err := fileSize(path)
	if err != nil {
		return err
	}
	payloadMiB := figure{float64(n*b.cfg.Payload) / (1 << 20), mebibytes, ""}
	payloadName := fmt.Sprintf("payload bytes of %s events", thousands(float64(n)))
	b.add(row{fmt.Sprintf("file size, %s pending", thousands(float64(n))), figure{full, mebibytes, ""}, payloadName, payloadMiB})
	b.add(row{"file size after the drain", figure{drained, mebibytes, ""}, payloadName, payloadMiB})
	b.add(row{"file size after offline compaction", figure{compacted, mebibytes, ""}, payloadName, payloadMiB})
	return nil
}

func fileSize(path string) (float64, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return 0, err
	}
	return float64(fi.Size()) / (1 << 20), nil
}

// ingestScenario: events POSTed to the sidecar's HTTP API (the handler
// outboxd mounts, storing durably before answering 202) by -callers
// concurrent clients, one event per request and -http-batch per request,
// against a handler that reads the same requests and answers 202 without
// storing anything. The outbox is not started: this is ingest alone.
func ingestScenario(ctx context.Context, b *bench) error {
	rcv, err := startReceiver(0)
	if err != nil {
		return err
	}
	defer rcv.Close()
	one := fmt.Appendf(nil, `{"destination":"recv","payload":{"data":%q}}`, b.payload())
	batch := []byte{'['}
	for i := range b.cfg.HTTPBatch {
		if i > 0 {
			batch = append(batch, ',')
		}
		batch = append(batch, one...)
	}
	batch = append(batch, ']')

	noopURL, stopNoop, err := serve(noopIngest())
	if err != nil {
		return err
	}
	defer stopNoop()
	o, closeFn, err := b.openOutbox("ingest.db", rcv.URL, outbox.Config{})
	if err != nil {
		return err
	}
	defer closeFn()
	apiURL, stopAPI, err := serve(httpapi.New(o, httpapi.Config{}))
	if err != nil {
		return err
	}
	defer stopAPI()

	c, d := b.cfg.Callers, b.cfg.Duration
	base, err := loadGen(ctx, noopURL+"/v1/events", c, d, one)
	if err != nil {
		return fmt.Errorf("baseline: %w", err)
	}
	rate, err := loadGen(ctx, apiURL+"/v1/events", c, d, one)
	if err != nil {
		return err
	}
	b.add(row{fmt.Sprintf("HTTP ingest, 1 event/request, %d clients", c), figure{rate, perSecond, "events"},
		"no-op 202 handler, same requests", figure{base, perSecond, "requests"}})

	k := float64(b.cfg.HTTPBatch)
	base, err = loadGen(ctx, noopURL+"/v1/events", c, d, batch)
	if err != nil {
		return fmt.Errorf("baseline: %w", err)
	}
	rate, err = loadGen(ctx, apiURL+"/v1/events", c, d, batch)
	if err != nil {
		return err
	}
	b.add(row{fmt.Sprintf("HTTP ingest, %d events/request, %d clients", b.cfg.HTTPBatch, c), figure{rate * k, perSecond, "events"},
		"no-op 202 handler, same requests", figure{base * k, perSecond, "events"}})
	return nil
}

// latencyScenario: from the start of Enqueue to the receiver seeing the
// event, at a steady 200 events/s from one caller, against the latency of
// the same POST sent directly with net/http.
func latencyScenario(ctx context.Context, b *bench) error {
	rcv, err := startReceiver(0)
	if err != nil {
		return err
	}
	defer rcv.Close()
	const rate = 200
	n := max(50, int(b.cfg.Duration.Seconds()*rate))

	rcv.reset()
	_, base, err := clientLoop(ctx, rcv.URL, n, 1, b.payload())
	if err != nil {
		return fmt.Errorf("baseline: %w", err)
	}

	dl := newDelivered(n)
	o, closeFn, err := b.openOutbox("latency.db", rcv.URL, outbox.Config{Hooks: dl.hooks()})
	if err != nil {
		return err
	}
	defer closeFn()
	if err := o.Start(); err != nil {
		return err
	}
	rcv.reset()
	starts := make(map[string]time.Time, n)
	tick := time.NewTicker(time.Second / rate)
	defer tick.Stop()
	for range n {
		select {
		case <-tick.C:
		case <-ctx.Done():
			return ctx.Err()
		}
		t0 := time.Now()
		ids, err := o.Enqueue(ctx, b.events(1)...)
		if err != nil {
			return err
		}
		starts[ids[0]] = t0
	}
	if err := dl.wait(ctx); err != nil {
		return err
	}
	lat := make([]time.Duration, 0, n)
	for id, t0 := range starts {
		t, ok := rcv.arrival(id)
		if !ok {
			return fmt.Errorf("event %s delivered but not seen by the receiver", id)
		}
		lat = append(lat, t.Sub(t0))
	}
	for _, p := range []float64{50, 99} {
		b.add(row{fmt.Sprintf("enqueue → delivery p%.0f, %d events/s", p, rate), figure{ms(percentile(lat, p)), millis, ""},
			fmt.Sprintf("direct POST p%.0f", p), figure{ms(percentile(base, p)), millis, ""}})
	}
	return nil
}

// sweepScenario: delivery at each -concurrency against a receiver that
// spends -receiver-delay per request, beside the net/http client loop at the
// same concurrency, each for -duration from a backlog larger than it can
// deliver in that time. It feeds the chart; the table gets the extremes.
func sweepScenario(ctx context.Context, b *bench) error {
	rcv, err := startReceiver(b.cfg.ReceiverDelay)
	if err != nil {
		return err
	}
	defer rcv.Close()
	d := b.cfg.Duration
	for _, c := range b.cfg.Concurrency {
		// The baseline posts as many requests as a perfect client could in
		// -duration; its rate sizes the outbox's backlog.
		n := b.cfg.Events
		if b.cfg.ReceiverDelay > 0 {
			n = min(n, int(d/b.cfg.ReceiverDelay)*c)
		}
		n = max(n, 100)
		rcv.reset()
		base, baseLat, err := clientLoop(ctx, rcv.URL, n, c, b.payload())
		if err != nil {
			return fmt.Errorf("baseline: %w", err)
		}
		backlog := max(100, int(base*d.Seconds()*1.5))

		dl := newDelivered(backlog)
		o, closeFn, err := b.openOutbox(fmt.Sprintf("sweep-%d.db", c), rcv.URL, outbox.Config{Concurrency: c, Hooks: dl.hooks()})
		if err != nil {
			return err
		}
		if _, err := b.enqueueAll(ctx, o, backlog); err != nil {
			closeFn()
			return err
		}
		rcv.reset()
		start := time.Now()
		if err := o.Start(); err != nil {
			closeFn()
			return err
		}
		window := time.NewTimer(d)
		select {
		case <-window.C:
		case <-dl.done:
			window.Stop()
		case <-ctx.Done():
			window.Stop()
		}
		dl.mu.Lock()
		got, elapsed := dl.n, time.Since(start)
		lat := append([]time.Duration(nil), dl.lat...)
		dl.mu.Unlock()
		closeFn()
		if err := ctx.Err(); err != nil {
			return err
		}
		if got == 0 {
			return fmt.Errorf("concurrency %d: nothing delivered in %s", c, d)
		}
		p := concPoint{
			Concurrency: c,
			Rate:        float64(got) / elapsed.Seconds(),
			P50:         ms(percentile(lat, 50)),
			P99:         ms(percentile(lat, 99)),
			BaseRate:    base,
			BaseP50:     ms(percentile(baseLat, 50)),
			BaseP99:     ms(percentile(baseLat, 99)),
		}
		b.points = append(b.points, p)
		b.logf("concurrency %d: %s events/s (p50 %.2f ms, p99 %.2f ms) vs %s requests/s (p50 %.2f ms, p99 %.2f ms)",
			c, thousands(p.Rate), p.P50, p.P99, thousands(p.BaseRate), p.BaseP50, p.BaseP99)
	}
	for _, p := range []concPoint{b.points[0], b.points[len(b.points)-1]} {
		b.add(row{fmt.Sprintf("delivery, receiver works %s, concurrency %d", b.cfg.ReceiverDelay, p.Concurrency),
			figure{p.Rate, perSecond, "events"}, "net/http client loop, same receiver and concurrency", figure{p.BaseRate, perSecond, "requests"}})
	}
	return nil
}
