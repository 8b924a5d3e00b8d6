package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	kafkago "github.com/segmentio/kafka-go"

	"github.com/outboxd/outbox/kafka/internal/ship"
	"github.com/outboxd/outbox/outbox"
)

// Runner runs Kafka ingest and/or changelog shipping for one outbox. Create
// it with Start and stop it with Close.
type Runner struct {
	cfg   Config
	log   *slog.Logger
	conns *conns
	met   *metrics
	in    *ingest
	sh    *ship.Shipper

	stopIngest context.CancelFunc // ends the group loop
	stopShip   context.CancelFunc // ends the shipping loop between writes
	abort      context.CancelFunc // cancels in-flight enqueues and writes

	wg        sync.WaitGroup
	closeOnce sync.Once
	closed    chan struct{}
	closeErr  error
}

// Start validates cfg and starts, in the background, ingest from cfg.Topic
// into o (when set) and shipping of o's changelog to cfg.ChangelogTopic (when
// set). It does not wait for the brokers: while they cannot be reached,
// Ready reports false, ingest and shipping retry with backoff, and o goes on
// delivering what it holds. ctx bounds the start only; the Runner runs until
// Close. logger may be nil (logs are discarded).
//
// What is ingested stays in o, on this instance: when it is lost, its
// pending events wait for a Restore. For state that follows the partitions
// to the surviving instances, use StartGroup.
//
// o must stay open until Close has returned.
func Start(ctx context.Context, o *outbox.Outbox, cfg Config, logger *slog.Logger) (*Runner, error) {
	if o == nil {
		return nil, errors.New("kafka: Start: nil outbox")
	}
	var st ship.Store
	if cfg.ChangelogTopic != "" {
		st = o.Changelog()
	}
	return start(ctx, o, st, cfg, logger)
}

func start(ctx context.Context, o enqueuer, st ship.Store, cfg Config, logger *slog.Logger) (*Runner, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.WithDefaults()
	if cfg.Topic == "" && cfg.ChangelogTopic == "" {
		return nil, &ConfigError{Field: "Topic", Reason: "neither Topic nor ChangelogTopic is set: nothing to run"}
	}
	if cfg.StandbyReplicas > 0 {
		return nil, &ConfigError{Field: "StandbyReplicas", Reason: "standby replicas are kept in group mode only (StartGroup)"}
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	cn, err := cfg.conns()
	if err != nil {
		return nil, err
	}
	r := &Runner{cfg: cfg, log: logger, conns: cn, met: &metrics{}, closed: make(chan struct{})}
	work, abort := context.WithCancel(context.Background())
	r.abort = abort
	if cfg.ChangelogTopic != "" {
		sh, err := r.newShipper(st)
		if err != nil {
			abort()
			cn.close()
			return nil, err
		}
		r.sh = sh
	}
	if cfg.Topic != "" {
		in, err := newIngest(cfg, o, logger, cn, r.met, work)
		if err != nil {
			abort()
			cn.close()
			return nil, err
		}
		r.in = in
		loop, stop := context.WithCancel(context.Background())
		r.stopIngest = stop
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			in.run(loop)
		}()
	}
	if r.sh != nil {
		stop, cancel := context.WithCancel(context.Background())
		r.stopShip = cancel
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			r.sh.Run(stop, work)
		}()
	}
	logger.Info("kafka: started", "brokers", cfg.Brokers, "topic", cfg.Topic, "group", cfg.Group,
		"changelog_topic", cfg.ChangelogTopic)
	return r, nil
}

// Ready reports whether ingest is connected: this instance is a member of
// the consumer group's current generation. It is true when ingest is off.
func (r *Runner) Ready() bool {
	if r.in == nil {
		return true
	}
	return r.in.ready.Load()
}

// ShippingLag reports how far changelog shipping is behind: the number of
// changelog entries not yet acknowledged by the topic, and the age of the
// oldest of them. Zero when shipping is off or has caught up.
func (r *Runner) ShippingLag() (entries uint64, age time.Duration) {
	if r.sh == nil {
		return 0, 0
	}
	n, secs := r.sh.Lag()
	return n, time.Duration(secs * float64(time.Second))
}

// Committed returns the offsets of the ingest topic this instance last
// committed, by partition (empty when ingest is off or nothing was committed).
func (r *Runner) Committed() map[int]int64 {
	if r.in == nil {
		return map[int]int64{}
	}
	return r.in.committedOffsets()
}

// Assigned returns the partitions of the ingest topic assigned to this
// instance in the current generation of the group.
func (r *Runner) Assigned() []int {
	if r.in == nil {
		return nil
	}
	return r.in.partitions()
}

// Close stops ingest and shipping: consumers stop fetching, finish their
// in-flight enqueue and commit the durable offsets, the group is left, and a
// changelog write in flight is finished. If ctx ends first, in-flight work is
// cancelled (nothing durable is lost: uncommitted records are read again and
// deduplicated by ID, unshipped entries are shipped next time) and ctx's
// error is returned; leaving the group may then still take up to
// DialTimeout when the coordinator cannot be reached. Close is idempotent
// and joins every goroutine it started.
func (r *Runner) Close(ctx context.Context) error {
	r.closeOnce.Do(func() {
		done := make(chan struct{})
		go func() {
			defer close(done)
			if r.in != nil {
				r.stopIngest()
				_ = r.in.cg.Close() // ends the generation: final commits, leave
			}
			if r.stopShip != nil {
				r.stopShip()
			}
			r.wg.Wait()
		}()
		select {
		case <-done:
		case <-ctx.Done():
			r.abort()
			r.closeErr = fmt.Errorf("kafka: close: %w", ctx.Err())
			<-done
		}
		r.abort()
		r.conns.close()
		close(r.closed)
		r.log.Info("kafka: stopped")
	})
	<-r.closed
	return r.closeErr
}

// newShipper returns the shipper of st's changelog to the changelog topic,
// from the LSN st last shipped.
func (r *Runner) newShipper(st ship.Store) (*ship.Shipper, error) {
	shipped, err := st.ShippedLSN()
	if err != nil {
		return nil, fmt.Errorf("kafka: shipped LSN: %w", err)
	}
	cfg := r.cfg
	newWriter := func(maxBytes int) *kafkago.Writer {
		return &kafkago.Writer{
			Addr:            kafkago.TCP(cfg.brokers()...),
			Topic:           cfg.ChangelogTopic,
			Balancer:        &kafkago.Hash{},
			RequiredAcks:    kafkago.RequireAll,
			BatchSize:       cfg.ShipBatch,
			BatchBytes:      int64(maxBytes),
			BatchTimeout:    time.Millisecond,
			MaxAttempts:     3,
			WriteBackoffMin: cfg.RetryBackoff,
			WriteBackoffMax: cfg.RetryBackoffMax,
			Transport:       r.conns.transport,
			Logger:          kafkaLogger(r.log, slog.LevelDebug),
			ErrorLogger:     kafkaLogger(r.log, slog.LevelDebug),
		}
	}
	return ship.New(ship.Params{
		Config: cfg.shipping(), Store: st, Log: r.log, Counts: &r.met.shipping, NewWriter: newWriter,
		Client: &kafkago.Client{Addr: kafkago.TCP(cfg.brokers()...), Transport: r.conns.transport, Timeout: cfg.DialTimeout},
	}, shipped), nil
}
