package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/outboxd/outbox/cmd/outboxd/internal/config"
)

// restore rebuilds a new database file from the changelog shipped to Kafka.
func restore(e Env, args []string) int {
	l := config.NewLoader("outboxd restore", e.Stderr, "db", "kafka.brokers", "kafka.changelog_topic", "kafka.client_id", "log.level")
	fromKafka := l.FlagSet.Bool("from-kafka", false, "restore from the Kafka changelog topic (required; the only source so far)")
	cfg, err := l.Load(args, e.Getenv)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(e.Stderr, "outboxd restore: %v\n", err)
		return exitUsage
	}
	switch {
	case !*fromKafka:
		fmt.Fprintln(e.Stderr, "outboxd restore: say where from: --from-kafka")
		return exitUsage
	case cfg.Kafka.ChangelogTopic == "":
		fmt.Fprintln(e.Stderr, "outboxd restore: --changelog-topic is required")
		return exitUsage
	case len(cfg.Kafka.Brokers) == 0:
		fmt.Fprintln(e.Stderr, "outboxd restore: --kafka-brokers is required")
		return exitUsage
	}
	if _, err := os.Stat(cfg.DB); err == nil {
		fmt.Fprintf(e.Stderr, "outboxd restore: %s already exists: restore writes a new database file; move it away or name another with --db\n", cfg.DB)
		return exitError
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	// Restore does not ingest: only the changelog topic is read.
	k := cfg.Kafka
	k.Topic = ""
	stats, err := restoreFromKafka(ctx, k, cfg.DB, e.Stderr)
	if err != nil {
		fmt.Fprintf(e.Stderr, "outboxd restore: %v\n", err)
		return exitError
	}
	fmt.Fprintf(e.Stdout, "restored %s from %s: %d pending, %d dead, %d tombstones (%d records, %s)\n",
		cfg.DB, k.ChangelogTopic, stats.Pending, stats.Dead, stats.Tombstones, stats.Records, stats.Duration.Round(time.Millisecond))
	return exitOK
}
