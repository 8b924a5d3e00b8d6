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
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/trace"

	"github.com/outboxd/outbox/cmd/outboxd/internal/config"
	"github.com/outboxd/outbox/cmd/outboxd/internal/managed"
	"github.com/outboxd/outbox/httpsink"
	"github.com/outboxd/outbox/kafka"
	"github.com/outboxd/outbox/kafka/kafkaprom"
	"github.com/outboxd/outbox/outbox"
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
	s := &server{cfg: &cfg, log: logger, env: e}
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
	ui       *console.Console     // nil when the ui setting is off
	eps      *managed.Registry    // the named endpoints, for the API
	tracer   trace.TracerProvider // nil: the global one (a no-op)
	stopping atomic.Bool
	// lastPunct is when the local store's punctuation last ran (Unix ns).
	lastPunct atomic.Int64
}

// fail reports an error that stops serve from starting.
func (s *server) fail(code int, format string, args ...any) int {
	fmt.Fprintf(s.env.Stderr, "outboxd serve: %s\n", fmt.Sprintf(format, args...))
	return code
}

func (s *server) run(sigs <-chan os.Signal) int {
	cfg := s.cfg
	tp, stopTracing, err := newTracerProvider(s.env.Getenv, s.log)
	if err != nil {
		return s.fail(exitUsage, "tracing: %v", err)
	}
	defer stopTracing() // after the outbox stopped: its last spans are flushed
	s.tracer = tp
	scfg, err := cfg.SinkConfig(s.log)
	if err != nil {
		return s.fail(exitUsage, "%v", err)
	}
	sink, err := httpsink.New(scfg)
	if err != nil {
		return s.fail(exitUsage, "%v", config.Explain(err))
	}
	defer sink.Close()

	ocfg, err := cfg.OutboxConfig(sink, s.log)
	if err != nil {
		return s.fail(exitUsage, "%v", err)
	}
	ocfg.TracerProvider = tp
	o, err := outbox.Open(cfg.DB, ocfg)
	if err != nil {
		if errors.Is(err, outbox.ErrLocked) {
			return s.fail(exitError, "database %s is locked by another process (is another outboxd serve running on it?): %v", cfg.DB, err)
		}
		if errors.Is(err, outbox.ErrInvalidConfig) {
			return s.fail(exitUsage, "%v", config.Explain(err))
		}
		return s.fail(exitError, "opening database %s: %v", cfg.DB, err)
	}
	s.o = o
	stopOutbox := func(ctx context.Context) error {
		if err := o.Stop(ctx); err != nil {
			s.log.Error("stopping the outbox", "err", err)
			return err
		}
		return nil
	}

	if s.eps, err = s.openEndpoints(o, sink, ocfg.RateLimits); err != nil {
		_ = stopOutbox(context.Background())
		return s.fail(exitError, "loading the endpoints managed through the API: %v", err)
	}

	reg := prometheus.NewRegistry()
	collector, hooks := outboxprom.New(o) // installs its hooks on o
	reg.MustRegister(collector,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		_ = stopOutbox(context.Background())
		return s.fail(exitError, "listening on %s: %v", cfg.Listen, err)
	}
	s.watchPunctuator()
	if err := o.Start(); err != nil {
		ln.Close()
		_ = stopOutbox(context.Background())
		return s.fail(exitError, "starting the outbox: %v", err)
	}
	if cfg.Kafka.Enabled() {
		// In group mode every partition store counts into the same
		// collector as the local store, and shares its rate limits.
		pcfg := ocfg
		pcfg.Hooks = hooks
		if s.kcfg, err = s.kafkaSettings(ln); err != nil {
			ln.Close()
			_ = stopOutbox(context.Background())
			return s.fail(exitUsage, "%v", err)
		}
		r, err := startKafka(context.Background(), o, s.kcfg, partitionStores(cfg.DB, pcfg), s.log)
		if err != nil {
			ln.Close()
			_ = stopOutbox(context.Background())
			var se *config.SettingError
			if errors.As(config.Explain(err), &se) {
				return s.fail(exitUsage, "%v", se)
			}
			return s.fail(exitError, "starting Kafka: %v", err)
		}
		s.kafka = r
		if err := s.startProducer(); err != nil {
			ln.Close()
			_ = r.Close(context.Background())
			_ = stopOutbox(context.Background())
			return s.fail(exitError, "starting the Kafka producer: %v", err)
		}
		if g, ok := r.(*kafka.Group); ok {
			// The outbox_* gauges sum the local and the partition stores.
			collector.AttachSource(union.New(o, g.Stores))
		}
		reg.MustRegister(kafkaprom.New(r))
		if s.producer != nil {
			reg.MustRegister(kafkaprom.NewProducer(s.producer))
		}
	}

	if s.ui, err = s.startConsole(); err != nil {
		ln.Close()
		_ = stopOutbox(context.Background())
		return s.fail(exitError, "starting the console: %v", err)
	}
	lim := cfg.Limits
	srv := &http.Server{
		Handler:           overLimit(lim.MaxConnections, s.routes(reg)),
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
		reg.MustRegister(newClusterCollector(s.cluster))
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(newConnLimiter(ln, lim.MaxConnections)) }()
	if cfg.Token == "" && !loopback(ln.Addr()) {
		s.log.Warn("the HTTP API listens beyond loopback WITHOUT A TOKEN: anyone who can reach "+ln.Addr().String()+
			" can enqueue, list, replay and delete events; set a token (OUTBOXD_TOKEN, or token in the file) or listen on 127.0.0.1",
			"addr", ln.Addr().String())
	}
	s.log.Info("listening", "addr", ln.Addr().String(), "db", cfg.DB,
		"endpoints", len(cfg.Endpoints), "managed_endpoints", s.eps.Managed(), "kafka", cfg.Kafka.Enabled())
	if hint := noEndpointHint(cfg); hint != "" && s.eps.Managed() == 0 {
		s.log.Info(hint)
	}

	code := exitOK
	select {
	case sig := <-sigs:
		s.log.Info("shutting down", "signal", sig.String(), "grace", cfg.ShutdownGrace.String())
	case err := <-served:
		s.log.Error("HTTP server failed", "err", err)
		code = exitError
	}
	done := make(chan struct{})
	defer close(done)
	go func() {
		// A second signal ends the process at once. Everything
		// acknowledged is already durable; in-flight deliveries are
		// attempted again after the restart.
		select {
		case sig := <-sigs:
			s.log.Warn("second signal: exiting at once", "signal", sig.String())
			s.env.Exit(exitError)
		case <-done:
		}
	}()
	if err := s.shutdown(srv); err != nil {
		code = exitError
	}
	<-served
	return code
}

// loopback reports whether addr is a loopback address (127.0.0.0/8 or
// ::1): only processes on the same machine can reach it.
func loopback(addr net.Addr) bool {
	ta, ok := addr.(*net.TCPAddr)
	return ok && ta.IP.IsLoopback()
}

// shutdown stops accepting requests, lets those under way finish, stops the
// Kafka runner and the outbox (finishing or cancelling in-flight deliveries
// and committing their outcomes), all within the shutdown grace period.
// Deliveries cancelled at the deadline stay pending and are attempted again
// after a restart: that is not an error.
func (s *server) shutdown(srv *http.Server) error {
	s.stopping.Store(true)
	start := time.Now()
	grace := s.cfg.ShutdownGrace
	// Requests get a third of the grace. Deliveries may run until a reserve
	// before the end, kept for cancelling them, committing the outcomes and
	// closing the file: a third of the grace (at most 5s), measured to
	// cover a thousand cancelled deliveries under the race detector on a
	// busy two-core machine.
	reserve := min(max(grace/3, 250*time.Millisecond), 5*time.Second)
	httpCtx, httpCancel := context.WithDeadline(context.Background(), start.Add(grace/3))
	defer httpCancel()
	stopCtx, stopCancel := context.WithDeadline(context.Background(), start.Add(grace-reserve))
	defer stopCancel()
	var errs []error
	if err := srv.Shutdown(httpCtx); err != nil {
		s.log.Warn("requests still running at the deadline: closing their connections", "err", err)
		_ = srv.Close()
	}
	if s.ui != nil {
		s.ui.Close() // stops its sampler and a replay by filter under way
	}
	if s.producer != nil {
		_ = s.producer.Close()
	}
	if s.cluster != nil {
		s.cluster.Close()
	}
	if s.kafka != nil {
		if err := s.kafka.Close(stopCtx); err != nil {
			s.log.Error("stopping Kafka", "err", err)
			errs = append(errs, err)
		}
	}
	if err := s.o.Stop(stopCtx); err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			s.log.Warn("deliveries still in flight at the grace deadline were cancelled; they stay pending", "err", err)
		} else {
			s.log.Error("stopping the outbox", "err", err)
			errs = append(errs, err)
		}
	}
	s.log.Info("stopped", "took", time.Since(start).Round(time.Millisecond))
	return errors.Join(errs...)
}

// routes is the process's mux: the API, metrics, health checks and the
// console (when on).
func (s *server) routes(reg *prometheus.Registry) http.Handler {
	mux := newRouteMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}))
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
	return s.clusterAPI(httpapi.New(s.backend(union.New(s.o, g.Stores)), cfg), g, s.kcfg)
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
