package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/outboxd/outbox/cmd/outboxd/internal/config"
	"github.com/outboxd/outbox/kafka"
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
	view := newRestoreView(e.Stderr)
	stats, err := restoreFromKafka(ctx, k, cfg.DB, view.report)
	view.finish(err == nil)
	if err != nil {
		fmt.Fprintf(e.Stderr, "outboxd restore: %v\n", config.Explain(err))
		return exitError
	}
	fmt.Fprintf(e.Stderr, "restore: done: %d records from %d partitions of %s: %d pending, %d dead, %d tombstones in %s\n",
		stats.Records, stats.Partitions, k.ChangelogTopic, stats.Pending, stats.Dead, stats.Tombstones,
		stats.Duration.Round(time.Millisecond))
	fmt.Fprintf(e.Stdout, "restored %s from %s: %d pending, %d dead, %d tombstones (%d records, %s)\n",
		cfg.DB, k.ChangelogTopic, stats.Pending, stats.Dead, stats.Tombstones, stats.Records, stats.Duration.Round(time.Millisecond))
	return exitOK
}

// restoreLineEvery is how often a restore's progress is written as a plain
// line when the output is not a terminal.
const restoreLineEvery = 2 * time.Second

// restoreView shows a restore's progress on w: a progress bar with the
// records/s and the offsets left when w is a terminal, a plain line every
// two seconds otherwise. Its methods are called from one goroutine at a time
// (kafka.Restore's guarantee, then finish after it returned).
type restoreView struct {
	w        io.Writer
	terminal bool
	bar      *progressbar.ProgressBar
	last     kafka.RestoreProgress
	lineAt   time.Duration // Elapsed at the last plain line
	seen     bool
}

func newRestoreView(w io.Writer) *restoreView {
	return &restoreView{w: w, terminal: isTerminal(w)}
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(interface{ Fd() uintptr })
	return ok && term.IsTerminal(int(f.Fd()))
}

// report takes one progress report of kafka.Restore.
func (v *restoreView) report(p kafka.RestoreProgress) {
	v.last, v.seen = p, true
	if !v.terminal {
		if p.Elapsed-v.lineAt >= restoreLineEvery {
			v.lineAt = p.Elapsed
			v.line()
		}
		return
	}
	if v.bar == nil {
		v.bar = progressbar.NewOptions64(p.Total,
			progressbar.OptionSetWriter(v.w),
			progressbar.OptionSetDescription("restoring "+p.Topic),
			progressbar.OptionShowCount(),
			progressbar.OptionShowIts(),
			progressbar.OptionSetItsString("records"),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionShowElapsedTimeOnFinish(),
			progressbar.OptionFullWidth(),
		)
	}
	v.bar.Describe(fmt.Sprintf("restoring %s, lag %d", p.Topic, max(p.Total-p.Done, 0)))
	_ = v.bar.Set64(p.Done)
}

// line writes the last report as a plain line.
func (v *restoreView) line() {
	p := v.last
	rate := 0.0
	if secs := p.Elapsed.Seconds(); secs > 0 {
		rate = float64(p.Done) / secs
	}
	pct := 100.0
	if p.Total > 0 {
		pct = 100 * float64(p.Done) / float64(p.Total)
	}
	fmt.Fprintf(v.w, "restore: %d/%d offsets (%.1f%%), %.0f records/s, lag %d\n", p.Done, p.Total, pct, rate, max(p.Total-p.Done, 0))
}

// finish ends the display once the restore has returned: it completes the
// bar when the restore succeeded, or writes the last plain line.
func (v *restoreView) finish(ok bool) {
	if !v.seen {
		return
	}
	if v.bar != nil {
		if ok {
			_ = v.bar.Finish()
		}
		fmt.Fprintln(v.w)
		return
	}
	if !v.terminal {
		v.line()
	}
}
