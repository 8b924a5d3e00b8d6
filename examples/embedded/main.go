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

func run(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("embedded", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:8090", "address of the service's HTTP API (--demo: a free port on 127.0.0.1)")
	dir := fs.String("dir", "embedded-data", "directory of the outbox file, which holds the service's state too (--demo: a temporary directory)")
	receiver := fs.String("receiver", "", "base URL events are delivered to: <receiver>/orders and <receiver>/rooms (required unless --demo)")
	allowPrivate := fs.Bool("allow-private", false, "allow a receiver on a loopback or private address")
	interval := fs.Duration("interval", time.Second, "how often due deliveries are picked up")
	park := fs.Duration("park-interval", 30*time.Second, "how long an event answered 404 waits before the receiver is asked again")
	backoff := fs.Duration("backoff", time.Second, "wait before the first retry of a failed delivery (then doubling, jittered)")
	demo := fs.Bool("demo", false, "start a demo receiver and send demo traffic to the service")
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

	var recv *demoReceiver
	if *demo {
		if *receiver != "" {
			return errors.New("--demo brings its own receiver: drop --receiver")
		}
		console.DemoPace(set, interval, park, backoff)
		if !set["listen"] {
			*listen = "127.0.0.1:0"
		}
		if !set["dir"] {
			tmp, err := os.MkdirTemp("", "embedded-demo-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(tmp)
			*dir = tmp
		}
		var err error
		if recv, err = startDemoReceiver(out); err != nil {
			return err
		}
		defer recv.close()
		*receiver = recv.url()
		*allowPrivate = true
	} else if *receiver == "" {
		return errors.New("--receiver is required (or try --demo)")
	}
	u, err := url.Parse(*receiver)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("--receiver %q: want an absolute http(s) URL", *receiver)
	}
	if err := os.MkdirAll(*dir, 0o700); err != nil {
		return err
	}

	sink, err := httpsink.New(httpsink.Config{Endpoints: []httpsink.Endpoint{
		{Name: destOrders, URL: u.JoinPath("orders").String(), AllowPrivate: *allowPrivate},
		{Name: destRooms, URL: u.JoinPath("rooms").String(), AllowPrivate: *allowPrivate},
	}})
	if err != nil {
		return err
	}
	defer sink.Close()
	box, err := outbox.Open(filepath.Join(*dir, "outbox.db"), outbox.Config{
		Sink:           sink,
		Ordered:        true, // an order's events arrive in order
		Interval:       *interval,
		ParkInterval:   *park,
		BackoffInitial: *backoff,
		Hooks:          outbox.Hooks{OnDelivery: out.PrintDelivery},
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
	svc, err := openService(box)
	if err != nil {
		return err
	}
	if err := box.Start(); err != nil {
		return err
	}

	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: svc.routes(), ReadHeaderTimeout: 10 * time.Second}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	base := "http://" + ln.Addr().String()
	out.Printf("embedded service listening on %s (state and outbox in %s), events go to %s", base, *dir, *receiver)

	// The demo runs until it is done or the program stops, whichever comes
	// first; it is joined before the shutdown.
	var demoRun func(context.Context) error
	if *demo {
		demoRun = func(ctx context.Context) error { return recv.run(ctx, base, box) }
	}
	runErr := out.RunDemo(ctx, serveErr, demoRun, *demoExit,
		fmt.Sprintf("the service keeps running on %s (try curl %s/rooms/lobby), Ctrl-C to stop", base, base))

	// Stop taking requests first, then let deliveries in flight finish.
	shutCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutCtx); err != nil && runErr == nil {
		runErr = err
	}
	stopped = true
	if err := box.Stop(shutCtx); err != nil && runErr == nil {
		runErr = err
	}
	if runErr == nil {
		if *demo && !set["dir"] {
			out.Printf("stopped cleanly (the demo's temporary files are removed)")
		} else {
			out.Printf("stopped cleanly; undelivered events stay in %s for the next start", *dir)
		}
	}
	return runErr
}
