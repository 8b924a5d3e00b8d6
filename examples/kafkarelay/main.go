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

func run(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("kafkarelay", flag.ContinueOnError)
	brokers := fs.String("brokers", "localhost:9092", "comma-separated bootstrap brokers (--demo: an in-process broker)")
	topic := fs.String("topic", "webhooks", "topic whose records are delivered")
	group := fs.String("group", "kafkarelay", "consumer group: the relays that share the topic's partitions")
	startOffset := fs.String("start-offset", kafka.DefaultStartOffset, `where a new group starts: "earliest" or "latest"`)
	changelog := fs.String("changelog-topic", "", "compacted topic the group's partition stores ship their changelogs to and are rebuilt from, "+
		`one partition per partition of --topic, created when missing (default "<group>-<topic>-changelog")`)
	dir := fs.String("dir", "kafkarelay.partitions", "directory of this relay's partition stores, <topic>-<p>.db for each partition it owns "+
		"(--demo: a temporary directory, a subdirectory per relay)")
	session := fs.Duration("session-timeout", kafka.DefaultSessionTimeout, "how long the group waits for a relay that stopped answering (killed, cut off) "+
		"before its partitions move to the others; heartbeats go every third of it, at most every "+kafka.DefaultHeartbeatInterval.String())
	useTLS := fs.Bool("tls", false, "connect to the brokers with TLS")
	tlsCA := fs.String("tls-ca", "", "with --tls: PEM file of the CAs to trust (default: the system roots)")
	saslMech := fs.String("sasl", "", `SASL mechanism: "plain", "scram-sha-256" or "scram-sha-512" (default: none)`)
	saslUser := fs.String("sasl-user", "", "with --sasl: the user name")
	saslPassEnv := fs.String("sasl-password-env", "KAFKARELAY_SASL_PASSWORD", "with --sasl: the environment variable that holds the password")
	var eps endpoints
	fs.Var(&eps, "endpoint", "a named HTTP endpoint, name=URL (repeat for more); records name it in their outbox-destination header")
	destination := fs.String("destination", "", "endpoint of records without an outbox-destination header (default: they become dead letters)")
	allowPrivate := fs.Bool("allow-private", false, "allow endpoints on loopback or private addresses")
	interval := fs.Duration("interval", time.Second, "how often due deliveries are picked up")
	park := fs.Duration("park-interval", 30*time.Second, "how long a delivery answered 404 waits before the endpoint is asked again")
	backoff := fs.Duration("backoff", time.Second, "wait before the first retry of a failed delivery (then doubling, jittered)")
	demo := fs.Bool("demo", false, "start an in-process broker, demo receivers, two relays and demo records")
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
	if *dir == "" {
		return errors.New("--dir: a directory is needed")
	}
	if *changelog == "" {
		*changelog = kafka.DefaultGroupChangelogTopic(*group, *topic)
	}
	if *session < time.Second {
		return fmt.Errorf("--session-timeout %s: at least 1s", *session)
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
		if !set["dir"] {
			tmp, err := os.MkdirTemp("", "kafkarelay-demo-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(tmp)
			*dir = tmp
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
		// Kafka's advice: a heartbeat interval no higher than a third of
		// the session timeout.
		SessionTimeout:    *session,
		HeartbeatInterval: min(*session/3, kafka.DefaultHeartbeatInterval),
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
	if *demo {
		demoGroupPace(&kcfg, set)
	}
	if err := kcfg.Validate(); err != nil {
		return err
	}

	settings := relaySettings{
		kafka:     kcfg,
		endpoints: eps,
		outbox:    outbox.Config{Interval: *interval, ParkInterval: *park, BackoffInitial: *backoff},
		out:       out,
	}
	if *demo {
		settings.onDelivery = env.onDelivery
	}
	var relays []*relay
	defer func() {
		for _, r := range relays {
			_ = r.close(context.Background()) // idempotent: a no-op after the shutdown below
		}
	}()
	if *demo {
		out.Printf("kafkarelay: %s on %s → %d endpoint(s); two relays in group %s, each with its stores in a directory under %s; changelog topic %s",
			*topic, *brokers, len(eps), *group, *dir, *changelog)
		var err error
		relays, err = env.startRelays(ctx, settings, *dir)
		if err != nil && ctx.Err() != nil {
			out.Printf("interrupted: shutting down")
			return nil
		}
		if err != nil {
			return err
		}
	} else {
		r, err := startRelay(ctx, settings, "", *dir)
		if err != nil {
			return err
		}
		relays = append(relays, r)
		out.Printf("kafkarelay: %s on %s → %d endpoint(s); group %s, a store per partition it owns in %s; changelog topic %s",
			*topic, *brokers, len(eps), *group, *dir, *changelog)
	}

	// The demo runs until it is done or the program stops, whichever comes
	// first; it is joined before the shutdown.
	var demoRun func(context.Context) error
	if *demo {
		demoRun = func(ctx context.Context) error {
			return env.run(ctx, *topic, *changelog, *demoRecords, relays[0], relays[1])
		}
	}
	who := "the relay"
	if *demo {
		who = relays[1].name
	}
	runErr := out.RunDemo(ctx, nil, demoRun, *demoExit,
		fmt.Sprintf("%s keeps running: produce to %s on %s, Ctrl-C to stop", who, *topic, *brokers))

	// Hand every partition over: stop consuming, let deliveries in flight
	// finish, ship the stores' changelogs, commit the offsets.
	shutCtx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	for _, r := range relays {
		if r.crashed {
			continue
		}
		if err := r.close(shutCtx); err != nil && runErr == nil {
			runErr = err
		}
	}
	if runErr == nil {
		if *demo && !set["dir"] {
			out.Printf("stopped cleanly (the demo's temporary files are removed)")
		} else {
			out.Printf("stopped cleanly; undelivered events stay in %s and in %s, for whichever relay owns their partition next", *dir, *changelog)
		}
	}
	return runErr
}
