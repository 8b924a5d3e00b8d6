// Command kafkarelay turns a Kafka topic into webhooks: every record of the
// topic becomes an outbox event, delivered over HTTP to the endpoint its
// outbox-destination header names (or --destination), with retries, parks
// and dead letters, while the outbox's changelog is shipped to a compacted
// topic so that another machine can restore what this one had not delivered
// yet.
//
// Records are consumed in a consumer group; the offsets are committed only
// once the records are durable in the outbox, and each record's event ID
// (kafka:<topic>:<partition>:<offset>, or its outbox-id header) makes a
// record read twice, after a crash or a rebalance, a duplicate. A record that
// cannot be delivered anywhere (no destination, an unknown endpoint) becomes a
// dead letter rather than being skipped.
//
// Run it against your brokers:
//
//	kafkarelay --brokers kafka-1:9092 --topic webhooks \
//	    --endpoint shipping=https://shipping.internal/hooks \
//	    --endpoint email=https://email.internal/hooks --destination shipping
//
// --tls and --sasl (with the password in an environment variable) connect to
// brokers that want them.
//
// or see it work with no Kafka installed:
//
//	go run ./examples/kafkarelay --demo
//
// The demo starts an in-process Kafka broker (franz-go's kfake), two HTTP
// receivers (one parks back-ordered shipments, one fails now and then),
// produces records, and prints every delivery, the dead letter of a record
// addressed to an endpoint that does not exist, and what was shipped to the
// changelog topic. Ctrl-C stops it cleanly; with --demo-exit it stops by
// itself once everything settled.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/outboxd/outbox/examples/internal/console"
	"github.com/outboxd/outbox/httpsink"
	"github.com/outboxd/outbox/kafka"
	"github.com/outboxd/outbox/outbox"
)

func main() {
	err := run(os.Args[1:], os.Stdout)
	switch {
	case errors.Is(err, flag.ErrHelp):
		os.Exit(0) // --help: the usage was printed
	case err != nil:
		fmt.Fprintln(os.Stderr, "kafkarelay:", err)
		os.Exit(1)
	}
}

// endpoints is the repeatable --endpoint name=URL flag.
type endpoints []httpsink.Endpoint

func (e *endpoints) String() string {
	var s []string
	for _, ep := range *e {
		s = append(s, ep.Name+"="+ep.URL)
	}
	return strings.Join(s, ",")
}

func (e *endpoints) Set(v string) error {
	name, raw, ok := strings.Cut(v, "=")
	if !ok || name == "" {
		return errors.New("want name=URL")
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%s: want an absolute http(s) URL", name)
	}
	if slices.ContainsFunc(*e, func(ep httpsink.Endpoint) bool { return ep.Name == name }) {
		return fmt.Errorf("endpoint %s given twice", name)
	}
	*e = append(*e, httpsink.Endpoint{Name: name, URL: raw})
	return nil
}

func run(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("kafkarelay", flag.ContinueOnError)
	brokers := fs.String("brokers", "localhost:9092", "comma-separated bootstrap brokers (--demo: an in-process broker)")
	topic := fs.String("topic", "webhooks", "topic whose records are delivered")
	group := fs.String("group", "kafkarelay", "consumer group")
	startOffset := fs.String("start-offset", kafka.DefaultStartOffset, `where a new group starts: "earliest" or "latest"`)
	changelog := fs.String("changelog-topic", "kafkarelay-changelog", `compacted topic the outbox's changelog is shipped to ("" to turn shipping off)`)
	useTLS := fs.Bool("tls", false, "connect to the brokers with TLS")
	tlsCA := fs.String("tls-ca", "", "with --tls: PEM file of the CAs to trust (default: the system roots)")
	saslMech := fs.String("sasl", "", `SASL mechanism: "plain", "scram-sha-256" or "scram-sha-512" (default: none)`)
	saslUser := fs.String("sasl-user", "", "with --sasl: the user name")
	saslPassEnv := fs.String("sasl-password-env", "KAFKARELAY_SASL_PASSWORD", "with --sasl: the environment variable that holds the password")
	db := fs.String("db", "kafkarelay.db", "the outbox's file (--demo: a temporary file)")
	var eps endpoints
	fs.Var(&eps, "endpoint", "a named HTTP endpoint, name=URL (repeat for more); records name it in their outbox-destination header")
	destination := fs.String("destination", "", "endpoint of records without an outbox-destination header (default: they become dead letters)")
	allowPrivate := fs.Bool("allow-private", false, "allow endpoints on loopback or private addresses")
	interval := fs.Duration("interval", time.Second, "how often due deliveries are picked up")
	park := fs.Duration("park-interval", 30*time.Second, "how long a delivery answered 404 waits before the endpoint is asked again")
	backoff := fs.Duration("backoff", time.Second, "wait before the first retry of a failed delivery (then doubling, jittered)")
	demo := fs.Bool("demo", false, "start an in-process broker, demo receivers and demo records")
	demoExit := fs.Bool("demo-exit", false, "with --demo: exit once the demo records have settled")
	demoRecords := fs.Int("demo-records", 12, "with --demo: how many records to produce")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if !*demo {
		for _, name := range []string{"demo-exit", "demo-records"} {
			if set[name] {
				return fmt.Errorf("--%s needs --demo", name)
			}
		}
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	out := console.New(stdout)

	var env *demoEnv
	if *demo {
		for _, name := range []string{"brokers", "endpoint", "destination", "tls", "tls-ca", "sasl", "sasl-user"} {
			if set[name] {
				return fmt.Errorf("--demo brings its own broker and endpoints: drop --%s", name)
			}
		}
		if *demoRecords < 1 {
			return errors.New("--demo-records: at least 1")
		}
		console.DemoPace(set, interval, park, backoff)
		if !set["db"] {
			tmp, err := os.MkdirTemp("", "kafkarelay-demo-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(tmp)
			*db = filepath.Join(tmp, "kafkarelay.db")
		}
		var err error
		if env, err = startDemo(out, *topic); err != nil {
			return err
		}
		defer env.close()
		*brokers = strings.Join(env.brokers, ",")
		eps = env.endpoints()
		*allowPrivate = true
	}
	if len(eps) == 0 {
		return errors.New("at least one --endpoint name=URL is needed (or try --demo)")
	}
	if *destination != "" && !slices.ContainsFunc(eps, func(ep httpsink.Endpoint) bool { return ep.Name == *destination }) {
		return fmt.Errorf("--destination %s: not one of the --endpoint names", *destination)
	}
	for i := range eps {
		eps[i].AllowPrivate = *allowPrivate
	}

	kcfg := kafka.Config{
		Brokers:        strings.Split(*brokers, ","),
		Topic:          *topic,
		Group:          *group,
		StartOffset:    *startOffset,
		Destination:    *destination,
		ChangelogTopic: *changelog,
		ClientID:       "kafkarelay",
		TLS:            kafka.TLSConfig{Enabled: *useTLS, CAFile: *tlsCA},
	}
	if *tlsCA != "" && !*useTLS {
		return errors.New("--tls-ca needs --tls")
	}
	if *saslMech != "" {
		kcfg.SASL = kafka.SASLConfig{Mechanism: *saslMech, Username: *saslUser, Password: os.Getenv(*saslPassEnv)}
		if kcfg.SASL.Password == "" {
			return fmt.Errorf("--sasl: environment variable %s (--sasl-password-env) is empty or not set", *saslPassEnv)
		}
	} else if *saslUser != "" {
		return errors.New("--sasl-user needs --sasl")
	}
	if err := kcfg.Validate(); err != nil {
		return err
	}

	sink, err := httpsink.New(httpsink.Config{Endpoints: eps})
	if err != nil {
		return err
	}
	defer sink.Close()
	box, err := outbox.Open(*db, outbox.Config{
		Sink:           sink,
		Interval:       *interval,
		ParkInterval:   *park,
		BackoffInitial: *backoff,
		Hooks: outbox.Hooks{
			OnEnqueue: func(n int) {
				out.Printf("← %d record(s) from %s stored durably (their offsets can be committed)", n, *topic)
			},
			OnDuplicate: func(n int) { out.Printf("= %d record(s) read again: duplicates, dropped", n) },
			OnDelivery:  out.PrintDelivery,
		},
	})
	if err != nil {
		return err
	}
	boxStopped := false
	defer func() {
		if !boxStopped {
			_ = box.Stop(context.Background())
		}
	}()
	if err := box.Start(); err != nil {
		return err
	}
	runner, err := kafka.Start(ctx, box, kcfg, nil)
	if err != nil {
		return err
	}
	runnerClosed := false
	defer func() {
		if !runnerClosed {
			_ = runner.Close(context.Background())
		}
	}()
	shipping := "off"
	if *changelog != "" {
		shipping = "to " + *changelog
	}
	out.Printf("kafkarelay: %s on %s → %d endpoint(s), changelog shipped %s (outbox file %s)", *topic, *brokers, len(eps), shipping, *db)

	// The demo runs until it is done or the program stops, whichever comes
	// first; it is joined before the shutdown.
	var demoRun func(context.Context) error
	if *demo {
		demoRun = func(ctx context.Context) error { return env.run(ctx, *topic, *changelog, *demoRecords, box) }
	}
	runErr := out.RunDemo(ctx, nil, demoRun, *demoExit,
		fmt.Sprintf("the relay keeps running: produce to %s on %s, Ctrl-C to stop", *topic, *brokers))

	// Stop consuming first (committing what is durable), then let deliveries
	// in flight finish.
	shutCtx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	runnerClosed = true
	if err := runner.Close(shutCtx); err != nil && runErr == nil {
		runErr = err
	}
	boxStopped = true
	if err := box.Stop(shutCtx); err != nil && runErr == nil {
		runErr = err
	}
	if runErr == nil {
		if *demo && !set["db"] {
			out.Printf("stopped cleanly (the demo's temporary files are removed)")
		} else {
			out.Printf("stopped cleanly; undelivered events stay in %s for the next start", *db)
		}
	}
	return runErr
}
