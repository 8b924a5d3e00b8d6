package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.opentelemetry.io/otel/trace"

	"github.com/outboxd/outbox/cmd/outboxd/internal/config"
	"github.com/outboxd/outbox/cmd/outboxd/internal/managed"
	"github.com/outboxd/outbox/httpsink"
	"github.com/outboxd/outbox/kafka"
	"github.com/outboxd/outbox/kafka/kafkaprom"
	"github.com/outboxd/outbox/outbox"
	"github.com/outboxd/outbox/outbox/authguard"
	"github.com/outboxd/outbox/outbox/cluster"
	"github.com/outboxd/outbox/outbox/console"
	"github.com/outboxd/outbox/outbox/httpapi"
	"github.com/outboxd/outbox/outbox/outboxprom"
	"github.com/outboxd/outbox/outbox/union"
)

// serve runs the sidecar until SIGTERM or SIGINT.
func serve(e Env, args []string) int {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)

	l := config.NewLoader("outboxd serve", e.Stderr)
	cfg, err := l.Load(args, e.Getenv)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(e.Stderr, "outboxd serve: %v\n", err)
		return exitUsage
	}
	logger := newLogger(cfg.Log, e.Stderr)
	defer tuneRuntime(e.Getenv)()
	s := &server{cfg: &cfg, log: logger, env: e, guard: newGuard(&cfg, logger)}
	return s.run(sigs)
}

// server is one run of outboxd serve.
type server struct {
	cfg      *config.Config
	log      *slog.Logger
	env      Env
	o        *outbox.Outbox
	kafka    kafkaRunner
	producer *kafka.Producer      // group mode: POST /v1/events produces
	kcfg     kafka.Config         // the Kafka settings it started with
	cluster  *cluster.Handler     // nil unless in Kafka group mode
	static   *staticWatch         // nil unless in Kafka group mode
	ui       *console.Console     // nil when the ui setting is off
	guard    *authguard.Guard     // delays wrong tokens; nil: each handler its own
	eps      *managed.Registry    // the named endpoints, for the API
	table    *kafka.Table         // group mode: the endpoints topic eps reads
	tracer   trace.TracerProvider // nil: the global one (a no-op)
	// shared is the endpoint state of the local and partition stores in
	// group mode, and pub writes its transitions to table.
	shared *outbox.SharedEndpoints
	pub    *publisher
	// group is the running group in group mode, once started: the probe
	// decider of the shared endpoint state reads it.
	group    atomic.Pointer[kafka.Group]
	stopping atomic.Bool
	// lastPunct is when the local store's punctuation last ran (Unix ns).
	lastPunct atomic.Int64

	// Set by the components as they start.
	endTracing func()               // flushes and shuts the tracer provider down
	sink       *httpsink.Sink       // delivers to the endpoints of kind http
	kafkaSink  *kafka.Sink          // delivers to those of kind kafka; nil without any
	ocfg       outbox.Config        // the local store's settings
	reg        *prometheus.Registry // what GET /metrics serves
	collector  *outboxprom.Collector
	hooks      outbox.Hooks // the collector's, for the partition stores
	ln         net.Listener
	srv        *http.Server
	served     chan error // receives what srv.Serve returned
	serveDone  bool       // what srv.Serve returned was received
}

// fail reports an error that stops serve from starting.
func (s *server) fail(code int, format string, args ...any) int {
	fmt.Fprintf(s.env.Stderr, "outboxd serve: %s\n", fmt.Sprintf(format, args...))
	return code
}

// run starts the components in order, serves until a signal or a failure
// of the HTTP server, and stops them in reverse order.
func (s *server) run(sigs <-chan os.Signal) int {
	cs := []component{
		{name: "tracing", start: s.startTracing, stop: s.stopTracing},
		{name: "sink", start: s.startSink, stop: s.closeSink},
		{name: "endpoint state", start: s.makeSharedEndpoints, stop: s.closeGroupTable},
		{name: "outbox", start: s.openOutbox, stop: s.stopOutbox},
		{name: "endpoints", start: s.loadEndpoints},
		{name: "metrics", start: s.startMetrics},
		{name: "listener", start: s.listen, stop: s.closeListener},
		{name: "delivery", start: s.startDelivery},
	}
	if s.cfg.Kafka.Enabled() {
		cs = append(cs,
			component{name: "kafka", start: s.startKafka, stop: s.stopKafka},
			component{name: "producer", start: s.startKafkaProducer, stop: s.closeProducer})
	}
	cs = append(cs,
		component{name: "console", start: s.openConsole, stop: s.closeConsole},
		component{name: "http", start: s.serveHTTP, stop: s.stopHTTP, requests: true})

	started, err := startAll(context.Background(), cs)
	if err != nil {
		_ = stopAll(started, context.Background(), context.Background())
		var se *startError
		if !errors.As(err, &se) {
			se = &startError{code: exitError, msg: err.Error()}
		}
		return s.fail(se.code, "%s", se.msg)
	}
	code := s.wait(sigs)
	done := make(chan struct{})
	defer close(done)
	go s.exitOnSecondSignal(sigs, done)
	if err := s.shutdown(started); err != nil {
		code = exitError
	}
	return code
}

// component is one part of outboxd serve: run starts the components in
// order and stops those that started in reverse order.
type component struct {
	name  string
	start func(ctx context.Context) error
	// stop, when not nil, undoes start within ctx's deadline; it logs
	// its own failure, and an error it returns makes serve exit with
	// exitError.
	stop func(ctx context.Context) error
	// requests: stopped within the requests' share of the grace period,
	// not the deliveries'.
	requests bool
}

// startError is why a component did not start: what serve prints, and its
// exit code.
type startError struct {
	code int
	msg  string
}

func (e *startError) Error() string { return e.msg }

// failed returns the startError that ends serve with code and the message.
func failed(code int, format string, args ...any) error {
	return &startError{code: code, msg: fmt.Sprintf(format, args...)}
}

// startAll starts cs in order until one fails, and returns those started.
func startAll(ctx context.Context, cs []component) ([]component, error) {
	for i, c := range cs {
		if err := c.start(ctx); err != nil {
			return cs[:i], err
		}
	}
	return cs, nil
}

// stopAll stops cs in reverse order: those serving requests within
// requests, the others within work. It returns their errors joined.
func stopAll(cs []component, requests, work context.Context) error {
	var errs []error
	for i := len(cs) - 1; i >= 0; i-- {
		c := cs[i]
		if c.stop == nil {
			continue
		}
		ctx := work
		if c.requests {
			ctx = requests
		}
		if err := c.stop(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// startTracing makes the tracer provider the outbox and the API use.
func (s *server) startTracing(context.Context) error {
	tp, end, err := newTracerProvider(s.env.Getenv, s.log)
	if err != nil {
		return failed(exitUsage, "tracing: %v", err)
	}
	s.tracer, s.endTracing = tp, end
	return nil
}

// stopTracing flushes the last spans, after the outbox stopped.
func (s *server) stopTracing(context.Context) error {
	s.endTracing()
	return nil
}

// startSink makes the sinks that deliver the stores' events: the HTTP
// sink, and the Kafka sink when an endpoint is of kind kafka.
func (s *server) startSink(context.Context) error {
	var err error
	if s.sink, s.kafkaSink, err = s.cfg.NewSinks(s.log); err != nil {
		return failed(exitUsage, "%v", err)
	}
	return nil
}

func (s *server) closeSink(context.Context) error {
	_ = s.sink.Close()
	if s.kafkaSink != nil {
		_ = s.kafkaSink.Close()
	}
	return nil
}

// openOutbox opens the local store (it delivers once startDelivery ran).
func (s *server) openOutbox(context.Context) error {
	ocfg, err := s.cfg.OutboxConfig(routeSinks(s.sink, s.kafkaSink), s.log)
	if err != nil {
		return failed(exitUsage, "%v", err)
	}
	ocfg.TracerProvider = s.tracer
	ocfg.SharedEndpoints = s.shared
	s.ocfg = ocfg
	db := s.cfg.DB
	o, err := outbox.Open(db, ocfg)
	switch {
	case errors.Is(err, outbox.ErrLocked):
		return failed(exitError, "database %s is locked by another process (is another outboxd serve running on it?): %v", db, err)
	case errors.Is(err, outbox.ErrInvalidConfig):
		return failed(exitUsage, "%v", config.Explain(err))
	case err != nil:
		return failed(exitError, "opening database %s: %v", db, err)
	}
	s.o = o
	return nil
}

// makeSharedEndpoints makes, in group mode, the endpoint state that the
// local store and every partition store share: one breaker, throttle and
// disable per endpoint for the instance. The owner of the partition an
// endpoint's name hashes to sends its probes. Its transitions wait in a
// queue for the group's endpoints topic, which loadEndpoints opens (before
// any store delivers); those of the other instances come from that topic.
func (s *server) makeSharedEndpoints(context.Context) error {
	if !s.cfg.Kafka.Enabled() || s.cfg.Kafka.Topic == "" {
		return nil
	}
	log := s.log.With("component", "outbox")
	s.pub = newPublisher(log)
	s.shared = outbox.NewSharedEndpoints(outbox.SharedEndpointsConfig{
		Publish: s.pub.enqueue,
		Probes: func(endpoint string) bool {
			g := s.group.Load()
			return g != nil && g.OwnsKey(endpoint)
		},
		Logger: log,
	})
	return nil
}

// closeGroupTable, once every store stopped (its component comes before
// the outbox's), writes the transitions still queued to the group's
// endpoints topic within ctx, and stops reading it.
func (s *server) closeGroupTable(ctx context.Context) error {
	if s.pub != nil {
		s.pub.stop(ctx)
	}
	if s.table != nil {
		s.table.Close()
	}
	return nil
}

// stopOutbox finishes or cancels the deliveries in flight, commits their
// outcomes and closes the store. Deliveries cancelled at the deadline stay
// pending and are attempted again after a restart: that is not an error.
func (s *server) stopOutbox(ctx context.Context) error {
	err := s.o.Stop(ctx)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, context.DeadlineExceeded):
		s.log.Warn("deliveries still in flight at the grace deadline were cancelled; they stay pending", "err", err)
		return nil
	default:
		s.log.Error("stopping the outbox", "err", err)
		return err
	}
}

// loadEndpoints puts the named endpoints in force, before deliveries start.
func (s *server) loadEndpoints(context.Context) error {
	eps, err := s.openEndpoints(s.o, s.sink, s.ocfg.RateLimits)
	var se *startError
	if errors.As(err, &se) {
		return se
	}
	if err != nil {
		return failed(exitError, "loading the endpoints managed through the API: %v", err)
	}
	s.eps = eps
	return nil
}

// startMetrics makes the registry of GET /metrics, with the collector of
// the local store (it installs its hooks on it).
func (s *server) startMetrics(context.Context) error {
	s.reg = prometheus.NewRegistry()
	s.collector, s.hooks = outboxprom.New(s.o)
	s.reg.MustRegister(s.collector,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	s.reg.MustRegister(authMetrics(s.guard)...)
	if t := s.table; t != nil {
		s.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "outboxd_endpoints_topic_skipped_total",
			Help: "Records of the group's endpoints topic skipped because they do not decode.",
		}, func() float64 { return float64(t.Stats().Skipped) }))
	}
	if p := s.pub; p != nil {
		for reason, n := range map[string]*atomic.Uint64{"queue_full": &p.dropped, "error": &p.failed} {
			s.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
				Name:        "outboxd_endpoint_transitions_unpublished_total",
				Help:        "Endpoint transitions of this instance not written to the group's endpoints topic, by reason.",
				ConstLabels: prometheus.Labels{"reason": reason},
			}, func() float64 { return float64(n.Load()) }))
		}
	}
	return nil
}

// listen binds the API's address (before Kafka starts: group mode
// advertises the bound port).
func (s *server) listen(context.Context) error {
	ln, err := net.Listen("tcp", s.cfg.Listen)
	if err != nil {
		return failed(exitError, "listening on %s: %v", s.cfg.Listen, err)
	}
	s.ln = ln
	return nil
}

// closeListener closes the listener if nothing serves it yet (stopping
// the HTTP server closed it already).
func (s *server) closeListener(context.Context) error {
	_ = s.ln.Close()
	return nil
}

// startDelivery starts the local store's punctuator, watched by /readyz.
func (s *server) startDelivery(context.Context) error {
	s.watchPunctuator()
	if err := s.o.Start(); err != nil {
		return failed(exitError, "starting the outbox: %v", err)
	}
	return nil
}

// startKafka starts the Kafka integration: group mode or changelog
// shipping. In group mode every partition store counts into the same
// collector as the local store, and shares its rate limits and endpoint
// state; the instance announces its static endpoints' hashes, and /readyz
// reports those the members define differently.
func (s *server) startKafka(ctx context.Context) error {
	var err error
	if s.kcfg, err = s.kafkaSettings(s.ln); err != nil {
		return failed(exitUsage, "%v", err)
	}
	pcfg := s.ocfg
	pcfg.Hooks = s.hooks
	sc := partitionStores(s.cfg.DB, pcfg)
	if s.table != nil {
		sc.Prepare = s.eps.Prepare
	}
	sc.StaticEndpoints = s.cfg.StaticHashes()
	r, err := startKafka(ctx, s.o, s.kcfg, sc, s.log)
	if err != nil {
		var se *config.SettingError
		if errors.As(config.Explain(err), &se) {
			return failed(exitUsage, "%v", se)
		}
		return failed(exitError, "starting Kafka: %v", err)
	}
	s.kafka = r
	if g, ok := r.(*kafka.Group); ok {
		s.group.Store(g)
		// The outbox_* gauges sum the local and the partition stores.
		s.collector.AttachSource(union.New(s.o, g.Stores))
		s.static = watchStatic(g, s.log)
	}
	s.reg.MustRegister(kafkaprom.New(r))
	return nil
}

// stopKafka closes the cluster API and the static endpoints' watch over
// the group, then the Kafka integration.
func (s *server) stopKafka(ctx context.Context) error {
	if s.cluster != nil {
		s.cluster.Close()
	}
	if s.static != nil {
		s.static.close()
	}
	if err := s.kafka.Close(ctx); err != nil {
		s.log.Error("stopping Kafka", "err", err)
		return err
	}
	return nil
}

// startKafkaProducer starts the producer of POST /v1/events in group mode.
func (s *server) startKafkaProducer(context.Context) error {
	if err := s.startProducer(); err != nil {
		return failed(exitError, "starting the Kafka producer: %v", err)
	}
	if s.producer != nil {
		s.reg.MustRegister(kafkaprom.NewProducer(s.producer))
	}
	return nil
}

func (s *server) closeProducer(context.Context) error {
	if s.producer != nil {
		_ = s.producer.Close()
	}
	return nil
}

// openConsole builds the web console when the ui setting is on.
func (s *server) openConsole(context.Context) error {
	ui, err := s.startConsole()
	if err != nil {
		return failed(exitError, "starting the console: %v", err)
	}
	s.ui = ui
	return nil
}

// closeConsole stops its sampler and a replay by filter under way.
func (s *server) closeConsole(context.Context) error {
	if s.ui != nil {
		s.ui.Close()
	}
	return nil
}

// serveHTTP serves the API, the metrics, the health checks and the console
// on the listener, and says so.
func (s *server) serveHTTP(context.Context) error {
	lim := s.cfg.Limits
	s.srv = &http.Server{
		Handler:           overLimit(lim.MaxConnections, s.routes(s.reg)),
		ReadHeaderTimeout: lim.ReadHeaderTimeout,
		// The API sets a body's deadline itself when it starts reading
		// it; this one bounds every other request (a body nobody reads
		// is still drained before the connection is reused).
		ReadTimeout:    lim.ReadHeaderTimeout + lim.ReadBodyTimeout,
		IdleTimeout:    lim.IdleTimeout,
		MaxHeaderBytes: int(lim.MaxHeaderBytes),
		ConnContext:    connContext,
		ErrorLog:       slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	if s.cluster != nil {
		s.reg.MustRegister(newClusterCollector(s.cluster))
	}
	s.served = make(chan error, 1)
	go func() { s.served <- s.srv.Serve(newConnLimiter(s.ln, lim.MaxConnections)) }()
	s.logListening()
	return nil
}

// logListening logs the address served, and warns when anyone who can
// reach it may use the API.
func (s *server) logListening() {
	cfg, addr := s.cfg, s.ln.Addr()
	if cfg.Token == "" && !loopback(addr) {
		s.log.Warn("the HTTP API listens beyond loopback WITHOUT A TOKEN: anyone who can reach "+addr.String()+
			" can enqueue, list, replay and delete events; set a token (OUTBOXD_TOKEN, or token in the file) or listen on 127.0.0.1",
			"addr", addr.String())
	}
	s.log.Info("listening", "addr", addr.String(), "db", cfg.DB,
		"endpoints", len(cfg.Endpoints), "managed_endpoints", s.eps.Managed(), "kafka", cfg.Kafka.Enabled())
	if hint := noEndpointHint(cfg); hint != "" && s.eps.Managed() == 0 {
		s.log.Info(hint)
	}
}

// stopHTTP stops accepting requests and lets those under way finish until
// ctx's deadline, then closes their connections; it returns once Serve
// returned.
func (s *server) stopHTTP(ctx context.Context) error {
	if err := s.srv.Shutdown(ctx); err != nil {
		s.log.Warn("requests still running at the deadline: closing their connections", "err", err)
		_ = s.srv.Close()
	}
	if !s.serveDone {
		<-s.served
		s.serveDone = true
	}
	return nil
}

// wait returns when a signal came (exitOK) or the HTTP server failed
// (exitError).
func (s *server) wait(sigs <-chan os.Signal) int {
	select {
	case sig := <-sigs:
		s.log.Info("shutting down", "signal", sig.String(), "grace", s.cfg.ShutdownGrace.String())
		return exitOK
	case err := <-s.served:
		s.serveDone = true
		s.log.Error("HTTP server failed", "err", err)
		return exitError
	}
}

// exitOnSecondSignal ends the process at once on a second signal, until
// done is closed. Everything acknowledged is already durable; in-flight
// deliveries are attempted again after the restart.
func (s *server) exitOnSecondSignal(sigs <-chan os.Signal, done <-chan struct{}) {
	select {
	case sig := <-sigs:
		s.log.Warn("second signal: exiting at once", "signal", sig.String())
		s.env.Exit(exitError)
	case <-done:
	}
}

// loopback reports whether addr is a loopback address (127.0.0.0/8 or
// ::1): only processes on the same machine can reach it.
func loopback(addr net.Addr) bool {
	ta, ok := addr.(*net.TCPAddr)
	return ok && ta.IP.IsLoopback()
}

// shutdown stops the components in reverse order within the shutdown
// grace period: in Kafka group mode the instance first hands its
// partitions over and leaves the group while its API still answers, and
// keeps answering while the other members may still forward requests to
// it (kafka.MembersMaxAge); then the HTTP server stops accepting requests
// and lets those under way finish, then the console, Kafka and the outbox
// stop (finishing or cancelling in-flight deliveries and committing their
// outcomes).
func (s *server) shutdown(cs []component) error {
	s.stopping.Store(true)
	start := time.Now()
	grace := s.cfg.ShutdownGrace
	// Requests get a third of the grace once the group is left. Deliveries
	// may run until a reserve before the end, kept for cancelling them,
	// committing the outcomes and closing the file: a third of the grace
	// (at most 5s), measured to cover a thousand cancelled deliveries under
	// the race detector on a busy two-core machine.
	reserve := min(max(grace/3, 250*time.Millisecond), 5*time.Second)
	stopCtx, stopCancel := context.WithDeadline(context.Background(), start.Add(grace-reserve))
	defer stopCancel()
	if g := s.group.Load(); g != nil {
		_ = g.Close(stopCtx) // its error is stopKafka's, which asks again
		// The other members may still forward requests here until what
		// they last learned of the members is too old.
		linger(stopCtx, kafka.MembersMaxAge)
	}
	httpCtx, httpCancel := context.WithTimeout(stopCtx, grace/3)
	defer httpCancel()
	err := stopAll(cs, httpCtx, stopCtx)
	s.log.Info("stopped", "took", time.Since(start).Round(time.Millisecond))
	return err
}

// linger waits for d, or until ctx ends.
func linger(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// routes is the process's mux: the API, metrics, health checks and the
// console (when on).
func (s *server) routes(reg *prometheus.Registry) http.Handler {
	mux := newRouteMux()
	mux.Handle("GET /metrics", s.metrics(reg))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeStatus(w, http.StatusOK, "ok")
	})
	mux.HandleFunc("GET /readyz", readyz(s.readyChecks()))
	for _, p := range []string{"/metrics", "/healthz", "/readyz"} {
		mux.Handle(p, httpapi.MethodNotAllowed(http.MethodGet))
	}
	if s.ui != nil {
		mux.Handle("/ui/", s.ui)
		mux.Handle("/ui", s.ui)
	}
	mux.Handle("/", s.api())
	return mux
}

// api is the HTTP API: over the local store, and in Kafka group mode over
// the stores of the partitions this instance owns too, with their status
// in /v1/stats under "kafka".
func (s *server) api() http.Handler {
	cfg := apiConfig(s.cfg, s.log)
	cfg.TracerProvider = s.tracer
	cfg.Endpoints = s.eps
	cfg.Guard = s.guard
	g, ok := s.kafka.(*kafka.Group)
	if !ok {
		return httpapi.New(s.o, cfg)
	}
	cfg.ExtraStats = func() map[string]any {
		h := g.Health()
		k := map[string]any{
			"joined":     h.Joined,
			"generation": h.Generation,
			"partitions": g.Partitions(),
			"standbys":   g.Standbys(),
		}
		if h.Err != nil {
			k["error"] = h.Err.Error()
		}
		return map[string]any{"kafka": k}
	}
	local := s.backend(union.New(s.o, g.Stores).WithSettle(g.WaitShipped))
	return s.clusterAPI(httpapi.New(local, cfg), staleAPI(local, g, cfg), g, s.kcfg)
}

// commitStallLimit is how long a store commit may run before /readyz's store
// check fails: commits take milliseconds, so one running this long means the
// disk is not answering (an fsync that does not return), and every enqueue
// and delivery outcome waits behind it.
var commitStallLimit = 30 * time.Second

func writeStatus(w http.ResponseWriter, code int, status string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	fmt.Fprintf(w, "{\"status\":%q}\n", status)
}
