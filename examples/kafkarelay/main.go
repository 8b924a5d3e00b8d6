// Command kafkarelay turns a Kafka topic into webhooks: every record of the
// topic becomes an outbox event, delivered over HTTP to the endpoint its
// outbox-destination header names (or --destination), with retries, parks
// and dead letters.
//
// Run as many relays as you like in one consumer group: the state follows
// the partitions (kafka.StartGroup). Each partition of the topic has a
// store of its own (--dir/<topic>-<p>.db) kept by the relay the group
// assigned it to, and all the stores ship their changelogs to one compacted
// topic (--changelog-topic), partition p to partition p. When a relay is
// lost, disk and all, its partitions move to the others, which rebuild
// their stores from the changelog before they ingest or deliver anything:
// its pending events are delivered by them, no restore by hand.
//
// Offsets are committed only once the records' store entries are shipped,
// and each record's event ID (kafka:<topic>:<partition>:<offset>, or its
// outbox-id header) makes a record read twice, after a crash or a
// rebalance, a duplicate. A record that cannot be delivered anywhere (no
// destination, an unknown endpoint) becomes a dead letter rather than being
// skipped.
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
// receivers that answer 503 for a while, and two relays in one group, each
// with its own directory, sharing the partitions. It produces records
// (one for an endpoint that does not exist, a dead letter), crashes one
// relay while its events are pending and deletes its directory, and prints
// how the other takes its partitions over, rebuilds their stores from the
// changelog and delivers every event. Ctrl-C stops it cleanly; with
// --demo-exit it stops by itself once everything settled.
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

// run is the program: it reads the flags, starts the demo's broker and
// receivers with --demo, checks the endpoints, builds the Kafka settings,
// starts the relay (two with --demo), runs the demo (or waits for
// Ctrl-C) and hands every partition over.
func run(args []string, stdout io.Writer) error {
	opts, err := parseFlags(args)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	out := console.New(stdout)

	var env *demoEnv
	if opts.demo {
		var cleanup func()
		if env, cleanup, err = prepareDemo(opts, out); err != nil {
			return err
		}
		defer cleanup()
	}
	if err := opts.checkEndpoints(); err != nil {
		return err
	}
	kcfg, err := opts.kafkaConfig()
	if err != nil {
		return err
	}
	settings := relaySettings{
		kafka:     kcfg,
		endpoints: opts.eps,
		outbox:    outbox.Config{Interval: opts.interval, ParkInterval: opts.park, BackoffInitial: opts.backoff},
		out:       out,
	}
	var relays []*relay
	defer func() {
		for _, r := range relays {
			_ = r.close(context.Background()) // idempotent: a no-op after the hand-over below
		}
	}()
	relays, err = startRelays(ctx, opts, settings, env, out)
	if err != nil && opts.demo && ctx.Err() != nil {
		out.Printf("interrupted: shutting down")
		return nil
	}
	if err != nil {
		return err
	}

	runErr := runDemo(ctx, out, opts, env, relays)
	runErr = handOver(relays, runErr)
	if runErr == nil {
		reportStop(out, opts)
	}
	return runErr
}

// options are the program's flags.
type options struct {
	brokers, topic, group, startOffset, changelog, dir string
	session                                            time.Duration
	useTLS                                             bool
	tlsCA, saslMech, saslUser, saslPassEnv             string
	eps                                                endpoints
	destination                                        string
	allowPrivate                                       bool
	interval, park, backoff                            time.Duration
	demo, demoExit                                     bool
	demoRecords                                        int
	set                                                map[string]bool // the flags given on the command line
}

// parseFlags reads the command line and checks the flags that stand
// alone.
func parseFlags(args []string) (*options, error) {
	o := &options{set: map[string]bool{}}
	fs := flag.NewFlagSet("kafkarelay", flag.ContinueOnError)
	fs.StringVar(&o.brokers, "brokers", "localhost:9092", "comma-separated bootstrap brokers (--demo: an in-process broker)")
	fs.StringVar(&o.topic, "topic", "webhooks", "topic whose records are delivered")
	fs.StringVar(&o.group, "group", "kafkarelay", "consumer group: the relays that share the topic's partitions")
	fs.StringVar(&o.startOffset, "start-offset", kafka.DefaultStartOffset, `where a new group starts: "earliest" or "latest"`)
	fs.StringVar(&o.changelog, "changelog-topic", "", "compacted topic the group's partition stores ship their changelogs to and are rebuilt from, "+
		`one partition per partition of --topic, created when missing (default "<group>-<topic>-changelog")`)
	fs.StringVar(&o.dir, "dir", "kafkarelay.partitions", "directory of this relay's partition stores, <topic>-<p>.db for each partition it owns "+
		"(--demo: a temporary directory, a subdirectory per relay)")
	fs.DurationVar(&o.session, "session-timeout", kafka.DefaultSessionTimeout, "how long the group waits for a relay that stopped answering (killed, cut off) "+
		"before its partitions move to the others; heartbeats go every third of it, at most every "+kafka.DefaultHeartbeatInterval.String())
	fs.BoolVar(&o.useTLS, "tls", false, "connect to the brokers with TLS")
	fs.StringVar(&o.tlsCA, "tls-ca", "", "with --tls: PEM file of the CAs to trust (default: the system roots)")
	fs.StringVar(&o.saslMech, "sasl", "", `SASL mechanism: "plain", "scram-sha-256" or "scram-sha-512" (default: none)`)
	fs.StringVar(&o.saslUser, "sasl-user", "", "with --sasl: the user name")
	fs.StringVar(&o.saslPassEnv, "sasl-password-env", "KAFKARELAY_SASL_PASSWORD", "with --sasl: the environment variable that holds the password")
	fs.Var(&o.eps, "endpoint", "a named HTTP endpoint, name=URL (repeat for more); records name it in their outbox-destination header")
	fs.StringVar(&o.destination, "destination", "", "endpoint of records without an outbox-destination header (default: they become dead letters)")
	fs.BoolVar(&o.allowPrivate, "allow-private", false, "allow endpoints on loopback or private addresses")
	fs.DurationVar(&o.interval, "interval", time.Second, "how often due deliveries are picked up")
	fs.DurationVar(&o.park, "park-interval", 30*time.Second, "how long a delivery answered 404 waits before the endpoint is asked again")
	fs.DurationVar(&o.backoff, "backoff", time.Second, "wait before the first retry of a failed delivery (then doubling, jittered)")
	fs.BoolVar(&o.demo, "demo", false, "start an in-process broker, demo receivers, two relays and demo records")
	fs.BoolVar(&o.demoExit, "demo-exit", false, "with --demo: exit once the demo records have settled")
	fs.IntVar(&o.demoRecords, "demo-records", 12, "with --demo: how many records to produce")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	fs.Visit(func(f *flag.Flag) { o.set[f.Name] = true })
	if !o.demo {
		for _, name := range []string{"demo-exit", "demo-records"} {
			if o.set[name] {
				return nil, fmt.Errorf("--%s needs --demo", name)
			}
		}
	}
	if o.dir == "" {
		return nil, errors.New("--dir: a directory is needed")
	}
	if o.changelog == "" {
		o.changelog = kafka.DefaultGroupChangelogTopic(o.group, o.topic)
	}
	if o.session < time.Second {
		return nil, fmt.Errorf("--session-timeout %s: at least 1s", o.session)
	}
	return o, nil
}

// prepareDemo starts the demo's in-process broker and receivers and points
// the relays at them, with a temporary directory and the demo's quick pace,
// except where the flags say otherwise. cleanup stops the broker and the
// receivers and removes the temporary directory.
func prepareDemo(o *options, out *console.Console) (env *demoEnv, cleanup func(), err error) {
	for _, name := range []string{"brokers", "endpoint", "destination", "tls", "tls-ca", "sasl", "sasl-user"} {
		if o.set[name] {
			return nil, nil, fmt.Errorf("--demo brings its own broker and endpoints: drop --%s", name)
		}
	}
	if o.demoRecords < 1 {
		return nil, nil, errors.New("--demo-records: at least 1")
	}
	console.DemoPace(o.set, &o.interval, &o.park, &o.backoff)
	tmp := ""
	if !o.set["dir"] {
		if tmp, err = os.MkdirTemp("", "kafkarelay-demo-"); err != nil {
			return nil, nil, err
		}
		o.dir = tmp
	}
	if env, err = startDemo(out, o.topic); err != nil {
		_ = os.RemoveAll(tmp)
		return nil, nil, err
	}
	o.brokers = strings.Join(env.brokers, ",")
	o.eps = env.endpoints()
	o.allowPrivate = true
	return env, func() {
		env.close()
		_ = os.RemoveAll(tmp)
	}, nil
}

// checkEndpoints wants at least one endpoint, and --destination to name
// one of them; it applies --allow-private to each.
func (o *options) checkEndpoints() error {
	if len(o.eps) == 0 {
		return errors.New("at least one --endpoint name=URL is needed (or try --demo)")
	}
	if o.destination != "" && !slices.ContainsFunc(o.eps, func(ep httpsink.Endpoint) bool { return ep.Name == o.destination }) {
		return fmt.Errorf("--destination %s: not one of the --endpoint names", o.destination)
	}
	for i := range o.eps {
		o.eps[i].AllowPrivate = o.allowPrivate
	}
	return nil
}

// kafkaConfig builds and validates the group's Kafka settings: brokers,
// topics, session, TLS and SASL.
func (o *options) kafkaConfig() (kafka.Config, error) {
	kcfg := kafka.Config{
		Brokers:        strings.Split(o.brokers, ","),
		Topic:          o.topic,
		Group:          o.group,
		StartOffset:    o.startOffset,
		Destination:    o.destination,
		ChangelogTopic: o.changelog,
		ClientID:       "kafkarelay",
		TLS:            kafka.TLSConfig{Enabled: o.useTLS, CAFile: o.tlsCA},
		// Kafka's advice: a heartbeat interval no higher than a third of
		// the session timeout.
		SessionTimeout:    o.session,
		HeartbeatInterval: min(o.session/3, kafka.DefaultHeartbeatInterval),
	}
	if o.tlsCA != "" && !o.useTLS {
		return kcfg, errors.New("--tls-ca needs --tls")
	}
	if o.saslMech != "" {
		kcfg.SASL = kafka.SASLConfig{Mechanism: o.saslMech, Username: o.saslUser, Password: os.Getenv(o.saslPassEnv)}
		if kcfg.SASL.Password == "" {
			return kcfg, fmt.Errorf("--sasl: environment variable %s (--sasl-password-env) is empty or not set", o.saslPassEnv)
		}
	} else if o.saslUser != "" {
		return kcfg, errors.New("--sasl-user needs --sasl")
	}
	if o.demo {
		demoGroupPace(&kcfg, o.set)
	}
	return kcfg, kcfg.Validate()
}

// startRelays starts the relay, or with --demo the demo's two relays in
// the group. The relays started are returned even with an error, to be
// closed.
func startRelays(ctx context.Context, o *options, s relaySettings, env *demoEnv, out *console.Console) ([]*relay, error) {
	if o.demo {
		s.onDelivery = env.onDelivery
		out.Printf("kafkarelay: %s on %s → %d endpoint(s); two relays in group %s, each with its stores in a directory under %s; changelog topic %s",
			o.topic, o.brokers, len(o.eps), o.group, o.dir, o.changelog)
		return env.startRelays(ctx, s, o.dir)
	}
	r, err := startRelay(ctx, s, "", o.dir)
	if err != nil {
		return nil, err
	}
	out.Printf("kafkarelay: %s on %s → %d endpoint(s); group %s, a store per partition it owns in %s; changelog topic %s",
		o.topic, o.brokers, len(o.eps), o.group, o.dir, o.changelog)
	return []*relay{r}, nil
}

// runDemo runs the demo (with --demo) until it is done or the program
// stops, whichever comes first, and then, unless --demo-exit, keeps
// relaying until Ctrl-C. The demo is joined before it returns.
func runDemo(ctx context.Context, out *console.Console, o *options, env *demoEnv, relays []*relay) error {
	var demoRun func(context.Context) error
	who := "the relay"
	if o.demo {
		demoRun = func(ctx context.Context) error {
			return env.run(ctx, o.topic, o.changelog, o.demoRecords, relays[0], relays[1])
		}
		who = relays[1].name
	}
	return out.RunDemo(ctx, nil, demoRun, o.demoExit,
		fmt.Sprintf("%s keeps running: produce to %s on %s, Ctrl-C to stop", who, o.topic, o.brokers))
}

// handOver hands every partition of the relays still running over: stop
// consuming, let deliveries in flight finish, ship the stores' changelogs,
// commit the offsets. It returns runErr, or else the first error.
func handOver(relays []*relay, runErr error) error {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	for _, r := range relays {
		if r.crashed {
			continue
		}
		if err := r.close(ctx); err != nil && runErr == nil {
			runErr = err
		}
	}
	return runErr
}

// reportStop says where undelivered events are kept.
func reportStop(out *console.Console, o *options) {
	if o.demo && !o.set["dir"] {
		out.Printf("stopped cleanly (the demo's temporary files are removed)")
	} else {
		out.Printf("stopped cleanly; undelivered events stay in %s and in %s, for whichever relay owns their partition next", o.dir, o.changelog)
	}
}
