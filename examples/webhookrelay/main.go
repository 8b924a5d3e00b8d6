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

func run(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("webhookrelay", flag.ContinueOnError)
	configPath := fs.String("config", "", "YAML configuration file (required unless --demo)")
	listen := fs.String("listen", "", "address to receive webhooks on (default: the config's listen; --demo: a free port on 127.0.0.1)")
	admin := fs.String("admin", "", "address of the outbox's admin API: dead letters, replay, stats (default: the config's admin.listen; --demo: a free port on 127.0.0.1)")
	db := fs.String("db", "", "the outbox's file (default: the config's db; --demo: a temporary file)")
	interval := fs.Duration("interval", time.Second, "how often due deliveries are picked up")
	park := fs.Duration("park-interval", 30*time.Second, "how long a delivery answered 404 waits before the target is asked again")
	backoff := fs.Duration("backoff", time.Second, "wait before the first retry of a failed delivery (then doubling, jittered)")
	maxAttempts := fs.Int("max-attempts", outbox.DefaultMaxAttempts, "failed attempts (parks not counted) before a delivery becomes a dead letter")
	demo := fs.Bool("demo", false, "start demo targets and send demo webhooks to this relay")
	demoExit := fs.Bool("demo-exit", false, "with --demo: exit once the demo traffic has settled")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if *demoExit && !*demo {
		return errors.New("--demo-exit needs --demo")
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	out := console.New(stdout)

	var (
		cfg     *Config
		targets *demoTargets
		err     error
	)
	if *demo {
		if *configPath != "" {
			return errors.New("--demo brings its own configuration: drop --config")
		}
		console.DemoPace(set, interval, park, backoff)
		targets, err = startDemoTargets(out)
		if err != nil {
			return err
		}
		defer targets.close()
		cfg = targets.config()
		if *db == "" {
			dir, err := os.MkdirTemp("", "webhookrelay-demo-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(dir)
			cfg.DB = filepath.Join(dir, "relay.db")
		}
	} else {
		if *configPath == "" {
			return errors.New("--config is required (or try --demo)")
		}
		if cfg, err = loadConfig(*configPath); err != nil {
			return err
		}
	}
	if *listen != "" {
		cfg.Listen = *listen
	}
	if *db != "" {
		cfg.DB = *db
	}
	if *admin != "" {
		if cfg.Admin == nil {
			cfg.Admin = &Admin{}
		}
		cfg.Admin.Listen = *admin
		if err := cfg.Admin.prepare(os.Getenv); err != nil {
			return err
		}
	}

	sink, err := newSink(cfg)
	if err != nil {
		return err
	}
	defer sink.Close()
	box, err := outbox.Open(cfg.DB, outbox.Config{
		Sink:               sink,
		Subscriptions:      subscriptions(cfg),
		UnroutedRetention:  cfg.DedupWindow,
		Hooks:              outbox.Hooks{OnDelivery: out.PrintDelivery},
		Interval:           *interval,
		ParkInterval:       *park,
		BackoffInitial:     *backoff,
		MaxAttempts:        *maxAttempts,
		TombstoneRetention: cfg.DedupWindow,
	})
	if err != nil {
		return err
	}
	stopped := false
	defer func() {
		if !stopped {
			_ = box.Stop(context.Background())
		}
	}()
	if err := box.Start(); err != nil {
		return err
	}

	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("POST /hooks/{source}", &relay{cfg: cfg, box: box, out: out, now: time.Now})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute}
	serveErr := make(chan error, 2)
	go func() { serveErr <- srv.Serve(ln) }()
	base := "http://" + ln.Addr().String()
	out.Printf("webhookrelay listening on %s/hooks/{source} (outbox file %s)", base, cfg.DB)

	var adminSrv *http.Server
	adminBase := ""
	if cfg.Admin != nil {
		aln, err := net.Listen("tcp", cfg.Admin.Listen)
		if err != nil {
			_ = srv.Close()
			return fmt.Errorf("admin: %w", err)
		}
		adminSrv = &http.Server{Handler: httpapi.New(box, httpapi.Config{Token: cfg.Admin.token}), ReadHeaderTimeout: 10 * time.Second}
		go func() { serveErr <- adminSrv.Serve(aln) }()
		adminBase = "http://" + aln.Addr().String()
		out.Printf("admin API on %s/v1/ (dead letters: GET /v1/events?state=dead, replay: POST /v1/events/{id}/replay)", adminBase)
	}

	// The demo runs until it is done or the program stops, whichever comes
	// first; it is joined before the shutdown.
	var demoRun func(context.Context) error
	if *demo {
		demoRun = func(ctx context.Context) error { return targets.run(ctx, base, adminBase, box) }
	}
	runErr := out.RunDemo(ctx, serveErr, demoRun, *demoExit,
		fmt.Sprintf("the relay keeps running: post your own signed webhooks to %s/hooks/{source}, Ctrl-C to stop", base))

	// Stop taking webhooks first, then let deliveries in flight finish.
	shutCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutCtx); err != nil && runErr == nil {
		runErr = err
	}
	if adminSrv != nil {
		if err := adminSrv.Shutdown(shutCtx); err != nil && runErr == nil {
			runErr = err
		}
	}
	stopped = true
	if err := box.Stop(shutCtx); err != nil && runErr == nil {
		runErr = err
	}
	if runErr == nil {
		if *demo && *db == "" {
			out.Printf("stopped cleanly (the demo's temporary files are removed)")
		} else {
			out.Printf("stopped cleanly; undelivered events stay in %s for the next start", cfg.DB)
		}
	}
	return runErr
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
