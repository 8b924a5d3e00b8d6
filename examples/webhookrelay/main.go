// Command webhookrelay receives signed webhooks from providers, verifies
// them, and relays them reliably to internal services.
//
// Providers post to /hooks/{source}. Each source names its signature scheme
// (Standard Webhooks, GitHub's X-Hub-Signature-256, Stripe's
// Stripe-Signature with its timestamp tolerance) and its secret; each
// internal target subscribes to the topics it wants:
//
//   - A request whose signature does not verify gets 401 and nothing is
//     stored.
//   - A verified request is stored as one outbox event on the topic
//     <source>.<provider's event type> ("stripe.invoice.paid"), and the
//     provider gets its 2xx only once it is durable: a crash after the
//     answer loses nothing. Every target subscribed to the topic gets its
//     own delivery of it, made in the same commit.
//   - The event ID is <source>:<provider delivery ID>, so when a provider
//     delivers the same webhook again (it never saw our answer, or someone
//     pressed "redeliver"), the outbox recognises the ID and the targets do
//     not get it twice; every target sees that ID as webhook-id.
//   - Each target is a named endpoint of the HTTP sink with its own retries:
//     a target answering 404 ("not there yet") is parked and checked again
//     later without spending attempts, a target that is down is retried with
//     backoff, a target that refuses an event (other 4xx) dead-letters that
//     one event, and none of this holds back the other targets.
//
// Run it with a configuration file (see Config for the format):
//
//	webhookrelay --config relay.yaml
//
// With admin set in the configuration (or --admin), the outbox's admin API
// (package outbox/httpapi) is served on its own address: list and replay
// dead letters, drop events, re-enable endpoints, stats.
//
// or see it work with nothing else running:
//
//	go run ./examples/webhookrelay --demo
//
// The demo starts four internal targets (one parks, one fails once, one
// dead-letters a kind of event), sends signed webhooks as GitHub, Stripe
// and a Standard Webhooks provider would, plus a forged one, a stale one and
// redeliveries, prints what happens, and finally replays the dead letter
// through the admin API once its target accepts it. Ctrl-C stops it cleanly; with
// --demo-exit it stops by itself once everything has settled.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/outboxd/outbox/examples/internal/console"
	"github.com/outboxd/outbox/httpsink"
	"github.com/outboxd/outbox/outbox"
	"github.com/outboxd/outbox/outbox/httpapi"
)

func main() {
	err := run(os.Args[1:], os.Stdout)
	switch {
	case errors.Is(err, flag.ErrHelp):
		os.Exit(0) // --help: the usage was printed
	case err != nil:
		fmt.Fprintln(os.Stderr, "webhookrelay:", err)
		os.Exit(1)
	}
}

// run is the program: it reads the flags, starts the demo targets with
// --demo (or loads the configuration file), opens the outbox, starts the
// deliveries, serves the webhooks and the admin API, runs the demo
// traffic (or waits for Ctrl-C) and shuts down: webhooks first, then the
// admin API, then the outbox.
func run(args []string, stdout io.Writer) error {
	opts, err := parseFlags(args)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	out := console.New(stdout)

	var (
		cfg     *Config
		targets *demoTargets
	)
	if opts.demo {
		var cleanup func()
		if cfg, targets, cleanup, err = startDemo(opts, out); err != nil {
			return err
		}
		defer cleanup()
	} else if cfg, err = opts.loadConfig(); err != nil {
		return err
	}
	if err := opts.override(cfg); err != nil {
		return err
	}
	box, closeSink, err := openOutbox(cfg, opts, out)
	if err != nil {
		return err
	}
	defer closeSink()
	stopped := false
	defer func() {
		if !stopped {
			_ = box.Stop(context.Background())
		}
	}()
	if err := box.Start(); err != nil {
		return err
	}
	serveErr := make(chan error, 2)
	srv, base, err := serveHooks(cfg, box, out, serveErr)
	if err != nil {
		return err
	}
	adminSrv, adminBase, err := serveAdmin(cfg, box, out, serveErr)
	if err != nil {
		_ = srv.Close()
		return err
	}

	runErr := runDemo(ctx, out, opts, targets, base, adminBase, box, serveErr)
	stopped = true
	runErr = shutdown(runErr, box, srv, adminSrv)
	if runErr == nil {
		reportStop(out, opts, cfg)
	}
	return runErr
}

// options are the program's flags.
type options struct {
	configPath, listen, admin, db string
	interval, park, backoff       time.Duration
	maxAttempts                   int
	demo, demoExit                bool
	set                           map[string]bool // the flags given on the command line
}

// parseFlags reads the command line.
func parseFlags(args []string) (*options, error) {
	o := &options{set: map[string]bool{}}
	fs := flag.NewFlagSet("webhookrelay", flag.ContinueOnError)
	fs.StringVar(&o.configPath, "config", "", "YAML configuration file (required unless --demo)")
	fs.StringVar(&o.listen, "listen", "", "address to receive webhooks on (default: the config's listen; --demo: a free port on 127.0.0.1)")
	fs.StringVar(&o.admin, "admin", "", "address of the outbox's admin API: dead letters, replay, stats (default: the config's admin.listen; --demo: a free port on 127.0.0.1)")
	fs.StringVar(&o.db, "db", "", "the outbox's file (default: the config's db; --demo: a temporary file)")
	fs.DurationVar(&o.interval, "interval", time.Second, "how often due deliveries are picked up")
	fs.DurationVar(&o.park, "park-interval", 30*time.Second, "how long a delivery answered 404 waits before the target is asked again")
	fs.DurationVar(&o.backoff, "backoff", time.Second, "wait before the first retry of a failed delivery (then doubling, jittered)")
	fs.IntVar(&o.maxAttempts, "max-attempts", outbox.DefaultMaxAttempts, "failed attempts (parks not counted) before a delivery becomes a dead letter")
	fs.BoolVar(&o.demo, "demo", false, "start demo targets and send demo webhooks to this relay")
	fs.BoolVar(&o.demoExit, "demo-exit", false, "with --demo: exit once the demo traffic has settled")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if o.demoExit && !o.demo {
		return nil, errors.New("--demo-exit needs --demo")
	}
	fs.Visit(func(f *flag.Flag) { o.set[f.Name] = true })
	return o, nil
}

// startDemo starts the demo targets and returns the configuration that
// relays to them, with a temporary outbox file unless --db is given, at
// the demo's quick pace. cleanup removes the file and closes the targets.
func startDemo(o *options, out *console.Console) (cfg *Config, targets *demoTargets, cleanup func(), err error) {
	if o.configPath != "" {
		return nil, nil, nil, errors.New("--demo brings its own configuration: drop --config")
	}
	console.DemoPace(o.set, &o.interval, &o.park, &o.backoff)
	if targets, err = startDemoTargets(out); err != nil {
		return nil, nil, nil, err
	}
	cfg = targets.config()
	dir := ""
	if o.db == "" {
		if dir, err = os.MkdirTemp("", "webhookrelay-demo-"); err != nil {
			targets.close()
			return nil, nil, nil, err
		}
		cfg.DB = filepath.Join(dir, "relay.db")
	}
	return cfg, targets, func() {
		_ = os.RemoveAll(dir)
		targets.close()
	}, nil
}

// loadConfig reads the configuration file.
func (o *options) loadConfig() (*Config, error) {
	if o.configPath == "" {
		return nil, errors.New("--config is required (or try --demo)")
	}
	return loadConfig(o.configPath)
}

// override puts the flags that replace a setting of the configuration
// (--listen, --db, --admin) in cfg.
func (o *options) override(cfg *Config) error {
	if o.listen != "" {
		cfg.Listen = o.listen
	}
	if o.db != "" {
		cfg.DB = o.db
	}
	if o.admin == "" {
		return nil
	}
	if cfg.Admin == nil {
		cfg.Admin = &Admin{}
	}
	cfg.Admin.Listen = o.admin
	return cfg.Admin.prepare(os.Getenv)
}

// openOutbox opens the outbox file, delivering to each target the topics
// it subscribes to through the HTTP sink, and keeping delivered and
// unrouted webhooks' IDs for the dedup window. closeSink closes the sink.
func openOutbox(cfg *Config, o *options, out *console.Console) (box *outbox.Outbox, closeSink func(), err error) {
	sink, err := newSink(cfg)
	if err != nil {
		return nil, nil, err
	}
	box, err = outbox.Open(cfg.DB, outbox.Config{
		Sink:               sink,
		Subscriptions:      subscriptions(cfg),
		UnroutedRetention:  cfg.DedupWindow,
		Hooks:              outbox.Hooks{OnDelivery: out.PrintDelivery},
		Interval:           o.interval,
		ParkInterval:       o.park,
		BackoffInitial:     o.backoff,
		MaxAttempts:        o.maxAttempts,
		TombstoneRetention: cfg.DedupWindow,
	})
	if err != nil {
		_ = sink.Close()
		return nil, nil, err
	}
	return box, func() { _ = sink.Close() }, nil
}

// serveHooks receives the providers' webhooks at POST /hooks/{source};
// serveErr receives what Serve returned.
func serveHooks(cfg *Config, box *outbox.Outbox, out *console.Console, serveErr chan<- error) (srv *http.Server, base string, err error) {
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, "", err
	}
	mux := http.NewServeMux()
	mux.Handle("POST /hooks/{source}", &relay{cfg: cfg, box: box, out: out, now: time.Now})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute}
	go func() { serveErr <- srv.Serve(ln) }()
	base = "http://" + ln.Addr().String()
	out.Printf("webhookrelay listening on %s/hooks/{source} (outbox file %s)", base, cfg.DB)
	return srv, base, nil
}

// serveAdmin serves the outbox's admin API (package outbox/httpapi) when
// the configuration has an admin address; otherwise it returns nil.
func serveAdmin(cfg *Config, box *outbox.Outbox, out *console.Console, serveErr chan<- error) (srv *http.Server, base string, err error) {
	if cfg.Admin == nil {
		return nil, "", nil
	}
	ln, err := net.Listen("tcp", cfg.Admin.Listen)
	if err != nil {
		return nil, "", fmt.Errorf("admin: %w", err)
	}
	srv = &http.Server{Handler: httpapi.New(box, httpapi.Config{Token: cfg.Admin.token}), ReadHeaderTimeout: 10 * time.Second}
	go func() { serveErr <- srv.Serve(ln) }()
	base = "http://" + ln.Addr().String()
	out.Printf("admin API on %s/v1/ (dead letters: GET /v1/events?state=dead, replay: POST /v1/events/{id}/replay)", base)
	return srv, base, nil
}

// runDemo runs the demo traffic (with --demo) until it is done or the
// program stops, whichever comes first, and then, unless --demo-exit,
// keeps relaying until Ctrl-C. The demo is joined before it returns.
func runDemo(ctx context.Context, out *console.Console, o *options, targets *demoTargets, base, adminBase string, box *outbox.Outbox, serveErr <-chan error) error {
	var demoRun func(context.Context) error
	if o.demo {
		demoRun = func(ctx context.Context) error { return targets.run(ctx, base, adminBase, box) }
	}
	return out.RunDemo(ctx, serveErr, demoRun, o.demoExit,
		fmt.Sprintf("the relay keeps running: post your own signed webhooks to %s/hooks/{source}, Ctrl-C to stop", base))
}

// shutdown stops taking webhooks first, then the admin API (nil: none),
// then lets deliveries in flight finish. It returns runErr, or else the
// first error of the three.
func shutdown(runErr error, box *outbox.Outbox, srv, adminSrv *http.Server) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil && runErr == nil {
		runErr = err
	}
	if adminSrv != nil {
		if err := adminSrv.Shutdown(ctx); err != nil && runErr == nil {
			runErr = err
		}
	}
	if err := box.Stop(ctx); err != nil && runErr == nil {
		runErr = err
	}
	return runErr
}

// reportStop says where undelivered events are kept.
func reportStop(out *console.Console, o *options, cfg *Config) {
	if o.demo && o.db == "" {
		out.Printf("stopped cleanly (the demo's temporary files are removed)")
	} else {
		out.Printf("stopped cleanly; undelivered events stay in %s for the next start", cfg.DB)
	}
}

// subscriptions subscribes each target to its topics.
func subscriptions(cfg *Config) []outbox.Subscription {
	var subs []outbox.Subscription
	for _, name := range slices.Sorted(maps.Keys(cfg.Targets)) {
		t := cfg.Targets[name]
		subs = append(subs, outbox.Subscription{Endpoint: name, Topics: t.Topics, Headers: t.Filter})
	}
	return subs
}

// newSink builds the HTTP sink with one named endpoint per target.
func newSink(cfg *Config) (*httpsink.Sink, error) {
	policy, err := httpsink.ParsePolicy(cfg.Policy...)
	if err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	hc := httpsink.Config{Policy: policy}
	for name, t := range cfg.Targets {
		hc.Endpoints = append(hc.Endpoints, httpsink.Endpoint{
			Name:         name,
			URL:          t.URL,
			Secrets:      t.Secrets,
			Timeout:      t.Timeout,
			AllowPrivate: t.AllowPrivate,
		})
	}
	return httpsink.New(hc)
}
