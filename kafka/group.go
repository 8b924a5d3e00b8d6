package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	kafkago "github.com/segmentio/kafka-go"

	"github.com/outboxd/outbox/kafka/internal/changelog"
	"github.com/outboxd/outbox/kafka/internal/offsets"
	"github.com/outboxd/outbox/kafka/internal/partition"
	"github.com/outboxd/outbox/kafka/internal/retry"
	"github.com/outboxd/outbox/outbox"
)

// StoreConfig says where and how a Group keeps its partition stores.
type StoreConfig struct {
	// Dir is the directory of the partition stores, created when missing:
	// the store of partition p of Config.Topic is <Dir>/<topic>-<p>.db, and
	// its checkpoint <Dir>/<topic>-<p>.checkpoint. Required.
	Dir string
	// Outbox is the configuration every partition store is opened with.
	// Sink is required; Hooks, when set, are installed on every store (so
	// that their counters sum over the partitions); RateLimits and
	// SharedEndpoints, when set, are shared by every store (one limit, and
	// one breaker, throttle and disable, per endpoint for the instance).
	// RateLimits are the group's: at every assignment the Group makes them
	// enforce its share (outbox.RateLimits.SetShare: each limit times the
	// partitions it owns over all partitions of Config.Topic). ReadOnly
	// must be false, and Retain 0: the changelog does not carry the archive
	// of delivered events, which would then neither move with its
	// partition nor survive a restore.
	Outbox outbox.Config
	// Prepare, when not nil, is called with each partition store after it
	// is restored and before it starts ingesting and delivering, with the
	// partition: the place to put in force what the configuration cannot
	// hold, such as subscriptions that change at run time. An error keeps
	// the store from starting, as a failed outbox.Outbox.Start does (the
	// partition stays undelivered until the next generation).
	Prepare func(p int, o *outbox.Outbox) error
	// StaticEndpoints maps the name of each endpoint Outbox's Sink defines
	// statically (from configuration, the same on every member) to a hash
	// of its definition, announced to the group so that members can find
	// definitions that differ (Group.StaticMismatch). Hash everything that
	// changes a delivery, secrets included, but announce no secret: every
	// member of the group can read the announcement. Default nil: nothing
	// is announced, and this member is left out of the comparison; an
	// empty map announces that it defines none.
	StaticEndpoints map[string]string
}

// Group is this instance's share of a consumer group in which the state
// follows the partitions: a store per assigned partition of Config.Topic,
// restored from the co-partitioned Config.ChangelogTopic when it is
// assigned, shipped there while it is owned, and handed over when it is
// revoked. Create it with StartGroup and stop it with Close.
type Group struct {
	cfg   Config
	sc    StoreConfig
	log   *slog.Logger
	conns *conns
	met   *metrics
	in    *ingest
	w     *kafkago.Writer

	work       context.Context // bounds writes and hand-overs; cancelled when Close runs out of time
	abort      context.CancelFunc
	stopIngest context.CancelFunc

	env    *partition.Env // what the partitions' tasks and standbys share
	counts partition.Counts

	topicPartitions atomic.Int32 // of Config.Topic, as the last topic check saw them

	mu           sync.Mutex
	tasks        map[int]*partition.Task // the current generation's partitions
	standbys     map[int]*partition.Standby
	lastHeld     []int // the partitions of the tasks and standbys of the generation before
	generation   int32
	memberID     string // this instance's member ID in generation
	preflightErr error

	static      []string // StaticMismatch's answer in staticGen, when staticKnown
	staticGen   int32
	staticKnown bool

	membersMu  chan struct{} // a lock that waits within a context: held by the Members call under way
	members    []Member
	membersGen int32
	membersAt  time.Time

	wg        sync.WaitGroup
	closeOnce sync.Once
	closed    chan struct{}
	closeErr  error
}

// StartGroup validates cfg and joins the consumer group cfg.Group on
// cfg.Topic in the background, with a store per assigned partition kept in
// sc.Dir. cfg.ChangelogTopic defaults to "<group>-<topic>-changelog"; it is
// created compacted with the input topic's partition count when missing.
//
// StartGroup checks the topics once, within ctx: a changelog topic whose
// partition count differs from the input's, one that is not compacted, or
// a broker that refuses to create it is an error naming the topic, and
// nothing is started. When the brokers cannot be reached in time the check
// is retried in the background (Health reports why) and StartGroup returns
// the Group. ctx bounds the start only; the Group runs until Close.
// logger may be nil (logs are discarded).
func StartGroup(ctx context.Context, cfg Config, sc StoreConfig, logger *slog.Logger) (*Group, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if cfg.Topic == "" {
		return nil, &ConfigError{Field: "Topic", Reason: "required: the group's partitions are those of the ingest topic"}
	}
	if cfg.ChangelogTopic == "" {
		cfg.ChangelogTopic = DefaultGroupChangelogTopic(cfg.Group, cfg.Topic)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.WithDefaults()
	if sc.Dir == "" {
		return nil, &ConfigError{Field: "Dir", Reason: "the directory of the partition stores is required"}
	}
	if sc.Outbox.Sink == nil || sc.Outbox.ReadOnly {
		return nil, &ConfigError{Field: "Outbox", Reason: "partition stores need a Sink and must not be read-only"}
	}
	if sc.Outbox.Retain != 0 {
		// The archive is not carried by the changelog: it would neither
		// move with its partition nor survive a restore.
		return nil, &ConfigError{Field: "Outbox.Retain", Reason: "delivered events are not kept in group mode: the changelog does not carry the archive"}
	}
	if err := partition.MkdirDurably(sc.Dir); err != nil {
		return nil, fmt.Errorf("kafka: partition store directory: %w", err)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	cn, err := cfg.conns()
	if err != nil {
		return nil, err
	}
	g := &Group{cfg: cfg, sc: sc, log: logger, conns: cn, met: &metrics{}, closed: make(chan struct{}), tasks: map[int]*partition.Task{},
		membersMu: make(chan struct{}, 1)}

	pctx, pcancel := context.WithTimeout(ctx, cfg.DialTimeout)
	maxBytes, perr := g.preflight(pctx)
	pcancel()
	var permanent *TopicError
	if errors.As(perr, &permanent) {
		cn.close()
		return nil, perr
	}

	work, abort := context.WithCancel(context.Background())
	g.work, g.abort = work, abort
	in, err := newIngest(cfg, nil, logger, cn, g.met, work, g.balancer())
	if err != nil {
		abort()
		cn.close()
		return nil, err
	}
	in.onGeneration = g.runGeneration
	g.in = in
	g.env = g.partitionEnv()
	loop, stop := context.WithCancel(context.Background())
	g.stopIngest = stop
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		if perr != nil {
			if maxBytes, perr = g.retryPreflight(loop, perr); perr != nil {
				return // closed before the brokers answered
			}
		}
		g.w = g.newWriter(maxBytes)
		g.env.Writer = g.w
		in.run(loop)
	}()
	logger.Info("kafka: group mode started", "brokers", cfg.Brokers, "topic", cfg.Topic, "group", cfg.Group,
		"changelog_topic", cfg.ChangelogTopic, "dir", sc.Dir)
	return g, nil
}

// DefaultGroupChangelogTopic is the changelog topic of a group that names
// none: "<group>-<topic>-changelog" (as Kafka Streams names its changelogs
// after the application).
func DefaultGroupChangelogTopic(group, topic string) string {
	if group == "" {
		group = DefaultGroup
	}
	return group + "-" + topic + "-changelog"
}

func (g *Group) newWriter(maxBytes int) *kafkago.Writer {
	return &kafkago.Writer{
		Addr:            kafkago.TCP(g.cfg.brokers()...),
		Topic:           g.cfg.ChangelogTopic,
		Balancer:        changelog.PartitionBalancer{},
		RequiredAcks:    kafkago.RequireAll,
		BatchSize:       g.cfg.ShipBatch,
		BatchBytes:      int64(maxBytes),
		BatchTimeout:    time.Millisecond,
		MaxAttempts:     3,
		WriteBackoffMin: g.cfg.RetryBackoff,
		WriteBackoffMax: g.cfg.RetryBackoffMax,
		Transport:       g.conns.transport,
		Logger:          kafkaLogger(g.log, slog.LevelDebug),
		ErrorLogger:     kafkaLogger(g.log, slog.LevelDebug),
	}
}

// retryPreflight repeats the topic check with backoff until it passes or
// ctx ends.
func (g *Group) retryPreflight(ctx context.Context, err error) (int, error) {
	b := newBackoff(g.cfg)
	g.log.Warn("kafka: cannot check the topics yet; the group waits", "topic", g.cfg.Topic,
		"changelog_topic", g.cfg.ChangelogTopic, "err", err)
	for {
		if !retry.Sleep(ctx, b.NextBackOff()) {
			return 0, ctx.Err()
		}
		pctx, cancel := context.WithTimeout(ctx, g.cfg.DialTimeout)
		maxBytes, err := g.preflight(pctx)
		cancel()
		if err == nil {
			g.log.Info("kafka: topics checked; joining the group", "group", g.cfg.Group)
			return maxBytes, nil
		}
		g.log.Debug("kafka: topic check", "err", err)
	}
}

// runGeneration starts a task per assigned partition and the committer.
// kafka-go ends the generation (cancelling their context) at a rebalance
// and waits for all of them (the hand-overs) before it joins the next one.
func (g *Group) runGeneration(gen *kafkago.Generation) {
	parts := gen.Assignments[g.cfg.Topic]
	tasks := make(map[int]*partition.Task, len(parts))
	ids := make([]int, 0, len(parts))
	for _, pa := range parts {
		tasks[pa.ID] = partition.NewTask(g.env, gen, pa)
		ids = append(ids, pa.ID)
	}
	slices.Sort(ids)
	g.shareRateLimits(ids)
	g.in.assigned.Store(int32(len(parts)))
	g.in.mu.Lock()
	g.in.current = ids
	g.in.mu.Unlock()
	g.mu.Lock()
	g.lastHeld = heldPartitions(g.tasks, g.standbys)
	g.tasks = tasks
	g.generation = gen.ID
	g.memberID = gen.MemberID
	g.mu.Unlock()
	g.log.Info("kafka: partitions assigned", "group", g.cfg.Group, "generation", gen.ID,
		"member", gen.MemberID, "topic", g.cfg.Topic, "partitions", ids)
	hand := partition.NewHandover(len(tasks))
	for _, t := range tasks {
		gen.Start(func(gctx context.Context) { t.Run(gctx, hand) })
	}
	gen.Start(func(gctx context.Context) { g.commitLoop(gctx, gen, tasks, hand) })
	g.startStandbys(gen, tasks)
}

// commitLoop commits the offsets every CommitInterval, each only as far as
// the changelog of its partition's store is shipped, and a last time once
// every task has shipped its store at the end of the generation.
func (g *Group) commitLoop(gctx context.Context, gen *kafkago.Generation, tasks map[int]*partition.Task, hand *partition.Handover) {
	t := time.NewTicker(g.cfg.CommitInterval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			g.commit(gen, tasks, false)
		case <-gctx.Done():
			hand.Commit(func() bool { return g.commit(gen, tasks, true) })
			g.in.assigned.Store(0)
			g.in.mu.Lock()
			g.in.current = nil
			g.in.mu.Unlock()
			return
		}
	}
}

// commit commits what may be committed and reports whether that succeeded.
func (g *Group) commit(gen *kafkago.Generation, tasks map[int]*partition.Task, final bool) bool {
	offsets := make(map[int]int64)
	for p, t := range tasks {
		if off, ok := t.ToCommit(); ok {
			offsets[p] = off
		}
	}
	if len(offsets) == 0 {
		return true
	}
	if err := gen.CommitOffsets(map[string]map[int]int64{g.cfg.Topic: offsets}); err != nil {
		g.met.commitErrors.Add(1)
		level := slog.LevelWarn
		if final {
			level = slog.LevelInfo
		}
		g.log.Log(context.Background(), level, "kafka: commit offsets", "group", g.cfg.Group,
			"generation", gen.ID, "offsets", offsets, "final", final, "err", err)
		return false
	}
	g.met.commits.Add(1)
	g.in.mu.Lock()
	for p, off := range offsets {
		tasks[p].CommittedAt(off)
		g.in.committed[p] = off
	}
	g.in.mu.Unlock()
	return true
}

// handoverBudget bounds a hand-over: HandoverTimeout, but at most two
// thirds of the session timeout (kafka-go stops heartbeating when a
// generation ends, so a longer hand-over loses the membership its final
// commit needs) and of the rebalance timeout (which bounds the rejoin).
func (g *Group) handoverBudget() time.Duration {
	return min(g.cfg.HandoverTimeout, g.cfg.SessionTimeout*2/3, g.cfg.RebalanceTimeout*2/3)
}

// partitionEnv is what the group's tasks and standbys share.
func (g *Group) partitionEnv() *partition.Env {
	return &partition.Env{
		Config: partition.Config{Topic: g.cfg.Topic, ChangelogTopic: g.cfg.ChangelogTopic, DialTimeout: g.cfg.DialTimeout,
			RetryBackoff: g.cfg.RetryBackoff, RetryBackoffMax: g.cfg.RetryBackoffMax,
			HandoverBudget: g.handoverBudget(), Ship: g.cfg.shipping()},
		Log:         g.log,
		Work:        g.work,
		Writer:      g.w,
		Client:      &kafkago.Client{Addr: kafkago.TCP(g.cfg.brokers()...), Transport: g.conns.transport, Timeout: g.cfg.DialTimeout},
		Reading:     g.cfg.reading(g.conns),
		Files:       g.files(),
		StoreConfig: g.partitionConfig,
		BeforeStart: g.sc.Prepare,
		Ingest:      partitionIngest{g.in},
		Counts:      &g.counts,
		ShipCounts:  &g.met.shipping,
		TopicError: func(topic string, p int, reason string, err error) error {
			return &TopicError{Topic: topic, Partition: p, Reason: reason, Err: err}
		},
	}
}

// partitionIngest is the group's ingest as its partition tasks use it.
type partitionIngest struct{ in *ingest }

// Consume ingests partition pa into the store o until gctx ends.
func (pi partitionIngest) Consume(gctx context.Context, pa kafkago.PartitionAssignment, tr *offsets.Tracker, o *outbox.Outbox) {
	pi.in.consume(gctx, pa, tr, partStore{o: o, lsn: o.Changelog().LastLSN}, func() {})
}

// Committed returns the offsets last committed, by partition.
func (pi partitionIngest) Committed() map[int]int64 { return pi.in.committedOffsets() }

// Health reports this instance's part in the group, for readiness checks.
func (g *Group) Health() GroupHealth {
	h := GroupHealth{Joined: g.in.ready.Load()}
	g.mu.Lock()
	if h.Joined {
		h.Generation = g.generation
	}
	h.Err = g.preflightErr
	for _, t := range g.tasks {
		switch t.Status().State {
		case PartitionRestoring:
			h.Restoring++
		case PartitionFailed:
			h.Failed++
		}
	}
	g.mu.Unlock()
	if h.Err == nil {
		h.Err = g.in.joinError()
	}
	return h
}

// Partitions returns the status of the partitions of the current
// generation, sorted by partition.
func (g *Group) Partitions() []PartitionStatus {
	return sortedStatuses(&g.mu, &g.tasks, func(t *partition.Task) PartitionStatus { return partitionStatus(t.Status()) },
		func(s PartitionStatus) int { return s.Partition })
}

// Stores returns the stores of the partitions that are active now
// (restored, ingesting and delivering), in partition order. A store is
// stopped when its partition is revoked: calls on it then fail with
// outbox.ErrClosed.
func (g *Group) Stores() []*outbox.Outbox {
	g.mu.Lock()
	tasks := make([]*partition.Task, 0, len(g.tasks))
	for _, t := range g.tasks {
		tasks = append(tasks, t)
	}
	g.mu.Unlock()
	slices.SortFunc(tasks, func(a, b *partition.Task) int { return a.Partition() - b.Partition() })
	var out []*outbox.Outbox
	for _, t := range tasks {
		if o := t.ActiveStore(); o != nil {
			out = append(out, o)
		}
	}
	return out
}

// WaitShipped waits until everything written so far to o, when o is the
// store of a partition this instance owns, is in the changelog topic: a
// restore anywhere then holds it, even if this instance and its disk are
// lost. It returns nil at once for any other outbox, and an error when the
// ownership ends before, or ctx does. An admin change (a delete) answered
// after it cannot be undone by the restore that follows a crash.
func (g *Group) WaitShipped(ctx context.Context, o *outbox.Outbox) error {
	g.mu.Lock()
	tasks := slices.Collect(maps.Values(g.tasks))
	g.mu.Unlock()
	last := o.Changelog().LastLSN()
	for _, t := range tasks {
		if _, holds, _ := t.Shipped(o); !holds {
			continue
		}
		tick := time.NewTicker(shipWaitPoll)
		defer tick.Stop()
		for {
			lsn, _, more := t.Shipped(o)
			switch {
			case lsn >= last:
				return nil
			case !more:
				return fmt.Errorf("kafka: partition %d changed owner before its changelog was shipped up to LSN %d (shipped %d)", t.Partition(), last, lsn)
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("kafka: waiting for partition %d's changelog to be shipped: %w", t.Partition(), ctx.Err())
			case <-tick.C:
			}
		}
	}
	return nil
}

// shipWaitPoll is how often WaitShipped looks at the shipped LSN: short
// next to a ship interval and a produce.
const shipWaitPoll = 2 * time.Millisecond

// Committed returns the offsets of the ingest topic this instance last
// committed, by partition.
func (g *Group) Committed() map[int]int64 { return g.in.committedOffsets() }

// Close stops the group: every partition is handed over (deliveries finish
// within Config.HandoverTimeout, the stores' changelogs are shipped, the
// offsets committed, the stores closed with their checkpoints), and the
// group is left. If ctx ends first, what is under way is cancelled
// (nothing durable is lost: unshipped entries are shipped at the next
// ownership or rebuilt by the next owner from what was shipped, and their
// records read again) and ctx's error is returned. Close is idempotent and
// joins every goroutine it started.
func (g *Group) Close(ctx context.Context) error {
	g.closeOnce.Do(func() {
		done := make(chan struct{})
		go func() {
			defer close(done)
			g.stopIngest()
			_ = g.in.cg.Close() // ends the generation: hand-overs, final commits, leave
			g.wg.Wait()
		}()
		select {
		case <-done:
		case <-ctx.Done():
			g.abort()
			g.closeErr = fmt.Errorf("kafka: close: %w", ctx.Err())
			<-done
		}
		g.abort()
		if g.w != nil {
			_ = g.w.Close()
		}
		g.conns.close()
		close(g.closed)
		g.log.Info("kafka: group mode stopped")
	})
	<-g.closed
	return g.closeErr
}

// Metrics returns a snapshot of the group's figures.
func (g *Group) Metrics() Metrics {
	m := g.met
	out := Metrics{
		Ready:  g.in.ready.Load(),
		Ingest: m.ingest(int(g.in.assigned.Load())),

		Partitions: g.Partitions(),
		Restores: RestoreCounts{
			Checkpoint: g.counts.RestoresCheckpoint.Load(),
			Rebuild:    g.counts.RestoresRebuild.Load(),
			Failed:     g.counts.RestoreFailures.Load(),
		},
		Standbys:        g.Standbys(),
		StandbyFailures: g.counts.StandbyFailures.Load(),
	}
	sh := &ShippingMetrics{Shipped: m.shipping.Shipped.Load(), ShipErrors: m.shipping.Errors.Load()}
	g.mu.Lock()
	for _, t := range g.tasks {
		if n, age := t.Lag(); n > 0 {
			sh.LagEntries += n
			sh.LagAge = max(sh.LagAge, age)
		}
	}
	g.mu.Unlock()
	out.Shipping = sh
	return out
}

// Ready reports whether this instance is a member of the group's current
// generation.
func (g *Group) Ready() bool { return g.in.ready.Load() }
