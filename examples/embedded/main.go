// Command embedded is a small orders-and-rooms HTTP service that embeds the
// outbox as a library: it keeps its own state in buckets of its own in the
// outbox's file, each request changes that state and enqueues the event that
// tells the rest of the system about it in one transaction (Outbox.Update:
// both commit or neither does, the outbox pattern), and the outbox delivers
// those events in the background to a receiver, with retries, parks and
// dead letters.
//
// It shows two kinds of events in such a transaction:
//
//   - Enqueue with per-key ordering (Config.Ordered): an order's events
//     (order.created, order.paid, order.shipped) share the order as Key and
//     reach the receiver in that order, even when one of them has to be
//     retried or parked first.
//   - Upsert by key for state that only matters as its latest value: every
//     join or leave of a room replaces the room's pending membership
//     snapshot, so the receiver gets the current membership without
//     replaying each step, and two concurrent leaves never lose one of them
//     (see service.changeRoom for the race and how it is avoided).
//
// Run it against your receiver (events are POSTed to <receiver>/orders and
// <receiver>/rooms):
//
//	embedded --receiver https://hooks.example.com --listen 127.0.0.1:8090
//	curl -d '{"id":"o-1","customer":"ada","total_cents":1999}' localhost:8090/orders
//	curl -X POST localhost:8090/orders/o-1/pay
//	curl -d '{"user":"ada"}' localhost:8090/rooms/lobby/join
//
// or see it work with nothing else running:
//
//	go run ./examples/embedded --demo
//
// The demo starts a receiver that fails, parks and refuses some events, sends
// orders and 300 room joins and leaves (200 of them at once) to the service,
// and prints every delivery and what the receiver ends up with. Ctrl-C stops
// it cleanly; with --demo-exit it stops by itself once everything settled.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/outboxd/outbox/examples/internal/console"
	"github.com/outboxd/outbox/httpsink"
	"github.com/outboxd/outbox/outbox"
)

func main() {
	err := run(os.Args[1:], os.Stdout)
	switch {
	case errors.Is(err, flag.ErrHelp):
		os.Exit(0) // --help: the usage was printed
	case err != nil:
		fmt.Fprintln(os.Stderr, "embedded:", err)
		os.Exit(1)
	}
}

// run is the program: it reads the flags, starts the demo receiver with
// --demo, opens the outbox in the service's file, opens the service in the
// same file, starts the deliveries, serves the service's HTTP API, runs the
// demo traffic (or waits for Ctrl-C) and shuts down: HTTP first, then the
// outbox.
func run(args []string, stdout io.Writer) error {
	opts, err := parseFlags(args)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	out := console.New(stdout)

	var recv *demoReceiver
	if opts.demo {
		var cleanup func()
		if recv, cleanup, err = startDemo(opts, out); err != nil {
			return err
		}
		defer cleanup()
	}
	receiver, err := opts.receiverURL()
	if err != nil {
		return err
	}
	box, closeSink, err := openOutbox(opts, receiver, out)
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
	svc, err := openService(box)
	if err != nil {
		return err
	}
	if err := box.Start(); err != nil {
		return err
	}
	srv, base, serveErr, err := serveAPI(opts.listen, svc)
	if err != nil {
		return err
	}
	out.Printf("embedded service listening on %s (state and outbox in %s), events go to %s", base, opts.dir, opts.receiver)

	runErr := runDemo(ctx, out, opts, recv, base, box, serveErr)
	stopped = true
	runErr = shutdown(srv, box, runErr)
	if runErr == nil {
		reportStop(out, opts)
	}
	return runErr
}

// options are the program's flags.
type options struct {
	listen, dir, receiver   string
	allowPrivate            bool
	interval, park, backoff time.Duration
	demo, demoExit          bool
	set                     map[string]bool // the flags given on the command line
}

// parseFlags reads the command line.
func parseFlags(args []string) (*options, error) {
	o := &options{set: map[string]bool{}}
	fs := flag.NewFlagSet("embedded", flag.ContinueOnError)
	fs.StringVar(&o.listen, "listen", "127.0.0.1:8090", "address of the service's HTTP API (--demo: a free port on 127.0.0.1)")
	fs.StringVar(&o.dir, "dir", "embedded-data", "directory of the outbox file, which holds the service's state too (--demo: a temporary directory)")
	fs.StringVar(&o.receiver, "receiver", "", "base URL events are delivered to: <receiver>/orders and <receiver>/rooms (required unless --demo)")
	fs.BoolVar(&o.allowPrivate, "allow-private", false, "allow a receiver on a loopback or private address")
	fs.DurationVar(&o.interval, "interval", time.Second, "how often due deliveries are picked up")
	fs.DurationVar(&o.park, "park-interval", 30*time.Second, "how long an event answered 404 waits before the receiver is asked again")
	fs.DurationVar(&o.backoff, "backoff", time.Second, "wait before the first retry of a failed delivery (then doubling, jittered)")
	fs.BoolVar(&o.demo, "demo", false, "start a demo receiver and send demo traffic to the service")
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

// startDemo starts the demo receiver and points the service at it, on a
// free port, with a temporary directory and the demo's quick pace, except
// where the flags say otherwise. cleanup closes the receiver and removes
// the temporary directory.
func startDemo(o *options, out *console.Console) (recv *demoReceiver, cleanup func(), err error) {
	if o.receiver != "" {
		return nil, nil, errors.New("--demo brings its own receiver: drop --receiver")
	}
	console.DemoPace(o.set, &o.interval, &o.park, &o.backoff)
	if !o.set["listen"] {
		o.listen = "127.0.0.1:0"
	}
	tmp := ""
	if !o.set["dir"] {
		if tmp, err = os.MkdirTemp("", "embedded-demo-"); err != nil {
			return nil, nil, err
		}
		o.dir = tmp
	}
	if recv, err = startDemoReceiver(out); err != nil {
		_ = os.RemoveAll(tmp)
		return nil, nil, err
	}
	o.receiver = recv.url()
	o.allowPrivate = true
	return recv, func() {
		recv.close()
		_ = os.RemoveAll(tmp)
	}, nil
}

// receiverURL checks the receiver's URL and makes the directory of the
// outbox file.
func (o *options) receiverURL() (*url.URL, error) {
	if o.receiver == "" {
		return nil, errors.New("--receiver is required (or try --demo)")
	}
	u, err := url.Parse(o.receiver)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--receiver %q: want an absolute http(s) URL", o.receiver)
	}
	if err := os.MkdirAll(o.dir, 0o700); err != nil {
		return nil, err
	}
	return u, nil
}

// openOutbox opens the outbox file in the directory, delivering through
// an HTTP sink with two endpoints, <receiver>/orders and <receiver>/rooms,
// an order's events in order. closeSink closes the sink.
func openOutbox(o *options, receiver *url.URL, out *console.Console) (box *outbox.Outbox, closeSink func(), err error) {
	sink, err := httpsink.New(httpsink.Config{Endpoints: []httpsink.Endpoint{
		{Name: destOrders, URL: receiver.JoinPath("orders").String(), AllowPrivate: o.allowPrivate},
		{Name: destRooms, URL: receiver.JoinPath("rooms").String(), AllowPrivate: o.allowPrivate},
	}})
	if err != nil {
		return nil, nil, err
	}
	box, err = outbox.Open(filepath.Join(o.dir, "outbox.db"), outbox.Config{
		Sink:           sink,
		Ordered:        true, // an order's events arrive in order
		Interval:       o.interval,
		ParkInterval:   o.park,
		BackoffInitial: o.backoff,
		Hooks:          outbox.Hooks{OnDelivery: out.PrintDelivery},
	})
	if err != nil {
		_ = sink.Close()
		return nil, nil, err
	}
	return box, func() { _ = sink.Close() }, nil
}

// serveAPI serves the service's HTTP API on the listen address; serveErr
// receives what Serve returned.
func serveAPI(listen string, svc *service) (srv *http.Server, base string, serveErr chan error, err error) {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, "", nil, err
	}
	srv = &http.Server{Handler: svc.routes(), ReadHeaderTimeout: 10 * time.Second}
	serveErr = make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	return srv, "http://" + ln.Addr().String(), serveErr, nil
}

// runDemo runs the demo traffic (with --demo) until it is done or the
// program stops, whichever comes first, and then, unless --demo-exit,
// keeps serving until Ctrl-C. The demo is joined before it returns.
func runDemo(ctx context.Context, out *console.Console, o *options, recv *demoReceiver, base string, box *outbox.Outbox, serveErr <-chan error) error {
	var demoRun func(context.Context) error
	if o.demo {
		demoRun = func(ctx context.Context) error { return recv.run(ctx, base, box) }
	}
	return out.RunDemo(ctx, serveErr, demoRun, o.demoExit,
		fmt.Sprintf("the service keeps running on %s (try curl %s/rooms/lobby), Ctrl-C to stop", base, base))
}

// shutdown stops taking requests first, then lets deliveries in flight
// finish. It returns runErr, or else the first error of the two.
func shutdown(srv *http.Server, box *outbox.Outbox, runErr error) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil && runErr == nil {
		runErr = err
	}
	if err := box.Stop(ctx); err != nil && runErr == nil {
		runErr = err
	}
	return runErr
}

// reportStop says where undelivered events are kept.
func reportStop(out *console.Console, o *options) {
	if o.demo && !o.set["dir"] {
		out.Printf("stopped cleanly (the demo's temporary files are removed)")
	} else {
		out.Printf("stopped cleanly; undelivered events stay in %s for the next start", o.dir)
	}
}
