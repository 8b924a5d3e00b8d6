package outbox

import (
	"io"
	"log/slog"
	"os"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"

	"github.com/outboxd/outbox/scheduler"
	"github.com/outboxd/outbox/store"
)

// Config configures an Outbox. Only Sink is required; every other field has
// the default its comment states, applied when the field is left at its zero
// value. Durations and sizes must not be negative (except where a negative
// value is documented to mean "no limit").
type Config struct {
	// Sink delivers events. Required, except with ReadOnly (an outbox opened
	// for inspection delivers nothing). When it also implements
	// EndpointResolver, destinations are validated at enqueue time and
	// grouped by endpoint; otherwise every destination is its own endpoint.
	Sink Sink

	// Logger receives the outbox's logs. Default: a logger that discards.
	Logger *slog.Logger

	// Hooks are called on enqueues, delivery outcomes and punctuations, for
	// metrics. Default: none. More can be added later with Outbox.AddHooks.
	Hooks Hooks

	// TracerProvider makes the tracer of the outbox's spans (one per
	// Enqueue call, one per delivery attempt; see the package doc,
	// "Tracing"). Default: otel.GetTracerProvider(), the global provider,
	// a no-op until the application sets one.
	TracerProvider trace.TracerProvider

	// Clock is the time source of the punctuator and of every timestamp the
	// outbox writes. Default: the time package's clock. Tests inject a fake.
	Clock Clock

	// Interval is the period of the delivery punctuation (the events that
	// became due are picked up at least this often; Enqueue and finished
	// deliveries wake it earlier). Default: 1s.
	Interval time.Duration

	// BatchSize caps the events taken from the store in one punctuation.
	// Default: 1000.
	BatchSize int

	// Concurrency caps the deliveries in flight at once over all endpoints;
	// it is also the number of delivery workers. Default: 64.
	Concurrency int

	// MaxPerEndpoint caps the deliveries in flight at once to one endpoint.
	// Default: Concurrency. Must not exceed Concurrency.
	MaxPerEndpoint int

	// InitialPerEndpoint is the in-flight limit an endpoint starts with.
	// Each endpoint's limit adapts to what its receiver shows it can take:
	// it grows while deliveries succeed at a steady latency and shrinks on
	// retry-class failures and rising latency, between 1 and
	// MaxPerEndpoint, so a dead or slow receiver holds a few workers, not
	// all of them. Workers are shared fairly among the endpoints with
	// events to deliver, and a slow endpoint (answers slower than 100ms)
	// never takes the last eighth of them. Default: 4, at most
	// MaxPerEndpoint.
	InitialPerEndpoint int

	// NoAdaptiveConcurrency turns the adapting off: every endpoint may
	// have MaxPerEndpoint deliveries in flight from the start. The
	// endpoints a Sink reports as batching (Batcher) never adapt.
	NoAdaptiveConcurrency bool

	// CommitInterval is how long the outcome of a finished delivery may wait
	// for others to share its commit (one transaction and fsync for the
	// lot) while more deliveries are under way. The outcome of a keyed
	// event with Ordered on, or of the last delivery under way, is
	// committed without waiting. Default: 25ms; negative: never wait.
	CommitInterval time.Duration

	// MaxUncommitted caps the delivered events whose outcome awaits its
	// commit; no new delivery starts while it is reached. A crash delivers
	// again at most Concurrency + MaxUncommitted events (those under way and
	// those awaiting their commit). Default: 1024.
	MaxUncommitted int

	// MaxAttempts is the number of attempts (parks do not count) after which
	// a failing event becomes a dead letter. Default: 25.
	MaxAttempts int

	// MaxAge is the age after which a failing or parked event becomes a dead
	// letter at its next outcome. The age counts from the event's DeliverAt
	// when that is later than its creation. Events waiting for a disabled
	// endpoint are not aged out (they get no outcome until it is enabled).
	// Default: 72h.
	MaxAge time.Duration

	// MaxSchedule is the scheduling horizon: how far ahead of now an
	// event's DeliverAt may be; a later one is refused with a
	// *ValidationError for "deliver_at". Default: DefaultMaxSchedule (30
	// days).
	MaxSchedule time.Duration

	// BackoffInitial is the wait before the second attempt after a retry.
	// Default: 1s.
	BackoffInitial time.Duration

	// BackoffMax caps the wait between two attempts. Default: 1h (with the
	// other defaults, 25 attempts span about 14 hours, well within MaxAge).
	BackoffMax time.Duration

	// BackoffMultiplier is the growth factor of the backoff; each wait is
	// jittered by ±50%. Default: 2. Must be at least 1.
	BackoffMultiplier float64

	// ParkInterval is how long an event whose receiver answered "not yet"
	// (ActionPark, 404 by default) waits before it is tried again. Parks do
	// not spend attempts. Default: 30s.
	ParkInterval time.Duration

	// MaxThrottle caps how long an endpoint is held after ActionThrottle
	// (a Retry-After larger than this is cut to it). Default: 1h.
	MaxThrottle time.Duration

	// RateLimits caps how fast deliveries to named endpoints start (see
	// RateLimits; build it with NewRateLimits). Rate limits use the
	// monotonic wall clock, not Clock. Default: nil, no endpoint is
	// limited.
	RateLimits *RateLimits

	// Breaker configures every endpoint's circuit breaker (see Breaker for
	// its fields' defaults).
	Breaker Breaker

	// SharedEndpoints, when several outboxes are given the same one, gives
	// them one disable, throttle and circuit breaker per endpoint (see
	// SharedEndpoints; build it with NewSharedEndpoints). Default: nil,
	// every outbox has its own.
	SharedEndpoints *SharedEndpoints

	// Subscriptions subscribe endpoints to topics (see Subscription); they
	// can be replaced while running with Outbox.SetSubscriptions. Open
	// refuses invalid ones with a *ConfigError for "Subscriptions[i].Field".
	// Default: none (every topic event is unrouted).
	Subscriptions []Subscription

	// Unrouted says what becomes of a topic event no endpoint subscribes
	// to: UnroutedKeep (the default) keeps it for UnroutedRetention,
	// UnroutedDrop drops it (counted).
	Unrouted UnroutedPolicy

	// UnroutedRetention is how long a kept unrouted event waits for a
	// subscriber before it becomes a dead letter, counted from its
	// creation (or its DeliverAt, when later). Its deliveries, once it is
	// routed, age from the same start (MaxAge). Default: MaxAge.
	UnroutedRetention time.Duration

	// Ordered turns on per-key FIFO delivery: an event with a Key is
	// delivered only once every earlier pending event with that Key was
	// delivered or became dead. Other keys are not blocked. Default: false.
	Ordered bool

	// TombstoneRetention is how long the ID of a delivered or dropped event
	// is remembered, so that enqueueing it again is recognised as a duplicate
	// (the dedup window). Default: 24h.
	TombstoneRetention time.Duration

	// ChangelogRetention is how long changelog entries are kept (never past
	// what was shipped, when shipping is on). Default: 24h; negative: no age
	// limit.
	ChangelogRetention time.Duration

	// ChangelogMaxEntries caps the number of changelog entries kept.
	// Default: 1,000,000; negative: no count limit.
	ChangelogMaxEntries int

	// Retain keeps every delivered event in an archive for this long after
	// its delivery (see Outbox.Archive and the package doc, "History of
	// delivered events"): the delivery leaves the pending events at once,
	// as without it, and is never delivered again by itself. Default: 0,
	// delivered events are deleted and only their tombstone remains, as
	// before; the file then has no archive.
	Retain time.Duration

	// RetainMaxBytes caps the archive's size (Stats.ArchiveBytes: the
	// archived records and their index keys): the maintenance punctuation
	// removes the oldest deliveries beyond it. Needs Retain. Default: 0, no
	// size limit.
	RetainMaxBytes int64

	// MaintenanceInterval is the period of the maintenance punctuation that
	// trims tombstones, the changelog and the archive and refreshes Stats.
	// Default: 1m.
	MaintenanceInterval time.Duration

	// MaxPayloadBytes caps an event's payload. Default: 1 MiB.
	MaxPayloadBytes int

	// MaxIDBytes caps an event's ID and its Key. Default: 200; at most
	// 1024.
	MaxIDBytes int

	// MaxHeaderBytes caps the total size of an event's header names and
	// values. Default: 64 KiB.
	MaxHeaderBytes int

	// NoKeyIndex stores events without their key index entries. The index
	// serves per-key order (Ordered, which refuses NoKeyIndex) and Upsert
	// (which then fails with ErrNoKeyIndex); it costs a write at a place set
	// by the event's Key, so keyed enqueues into a large backlog rewrite
	// index pages all over the file. Without it, keyed enqueues cost what
	// unkeyed ones do. Opening a file that keeps the index with NoKeyIndex
	// empties the index; opening one without it, without NoKeyIndex,
	// rebuilds the index before Open returns. Default: false (the index is
	// kept).
	NoKeyIndex bool

	// LockTimeout is how long Open waits for the file's lock, which another
	// process may hold, before it fails with ErrLocked. Default: 1s.
	LockTimeout time.Duration

	// ReadOnly opens an existing file for inspection under a shared lock:
	// reads work, every write fails with ErrReadOnly, and Start is refused.
	// Sink may be nil then. Default: false.
	ReadOnly bool

	// NoSync skips fsync. Unsafe: a crash loses or corrupts data. For tests
	// and benchmarks only. Default: false.
	NoSync bool

	// InitialMmapSize is the initial size in bytes of the file's memory map
	// (virtual memory only); a generous map keeps writers from remapping
	// while readers hold transactions. Default: 1 GiB.
	InitialMmapSize int

	// MaxDeliveriesPerCall bounds the deliveries one call creates: an
	// Enqueue, Ingest or Update (over all its Tx.Enqueue calls) counts one
	// per event with a Destination and one per subscribed endpoint of each
	// event with a Topic (one for a topic event kept unrouted). A call over
	// the bound fails with a *TooManyDeliveriesError (errors.Is(err,
	// ErrTooManyDeliveries)) before anything is written, and stores
	// nothing: one request fanned out to many subscribers would otherwise
	// build all its deliveries in memory and write them in one commit
	// (1,000 events to 1,000 subscribers: a million records, gigabytes of
	// memory and seconds during which other writes wait). Upsert and
	// EnqueueDead store one record and are not bounded. Default: 10,000;
	// negative: no bound.
	MaxDeliveriesPerCall int

	// MaxCommitBatch caps the records one group commit writes in a
	// transaction (a single larger Enqueue still commits alone,
	// atomically). Default: 1000.
	MaxCommitBatch int

	// OpenFile opens the database file: a seam for fault injection (a file
	// whose writes fail, a disk that fills up). Default: os.OpenFile.
	OpenFile func(name string, flag int, perm os.FileMode) (*os.File, error)

	// AttemptExcerptBytes is how many bytes of each response body the
	// attempt log keeps (Outbox.Attempts). Default: 1024; negative: none;
	// at most MaxAttemptExcerptBytes.
	AttemptExcerptBytes int

	// NoAttemptLog turns the attempt log off: attempts are not recorded
	// and Outbox.Attempts lists none made meanwhile. Default: false (every
	// attempt is recorded with the outcome it led to).
	NoAttemptLog bool
}

// Defaults of Config, as documented on its fields.
const (
	DefaultInterval            = time.Second
	DefaultBatchSize           = 1000
	DefaultConcurrency         = 64
	DefaultInitialPerEndpoint  = 4
	DefaultCommitInterval      = 25 * time.Millisecond
	DefaultMaxUncommitted      = 1024
	DefaultMaxAttempts         = 25
	DefaultMaxAge              = 72 * time.Hour
	DefaultBackoffInitial      = time.Second
	DefaultBackoffMax          = time.Hour
	DefaultBackoffMultiplier   = 2.0
	DefaultParkInterval        = 30 * time.Second
	DefaultMaxThrottle         = time.Hour
	DefaultTombstoneRetention  = 24 * time.Hour
	DefaultChangelogRetention  = 24 * time.Hour
	DefaultChangelogMaxEntries = 1_000_000
	DefaultMaintenanceInterval = time.Minute
	DefaultMaxPayloadBytes     = 1 << 20
	DefaultMaxIDBytes          = 200
	DefaultMaxHeaderBytes      = 64 << 10
	DefaultLockTimeout         = time.Second
	DefaultInitialMmapSize     = 1 << 30
	DefaultMaxCommitBatch      = 1000
	// DefaultMaxDeliveriesPerCall is MaxDeliveriesPerCall's default: with
	// small events a call's deliveries take tens of megabytes of memory
	// and a fraction of a second to commit (a million took 1.4 GB and 22s).
	// Each delivery stores its own copy of the payload, so large payloads
	// still scale a call's size by the payload.
	DefaultMaxDeliveriesPerCall = 10_000
	DefaultAttemptExcerptBytes  = 1024
)

// backoffJitter is the randomization factor of the retry backoff (±50%).
const backoffJitter = 0.5

// withDefaults returns a copy of c with every zero field set to its default.
func (c Config) withDefaults() Config {
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if c.Clock == nil {
		c.Clock = realClock{}
	}
	if c.TracerProvider == nil {
		c.TracerProvider = otel.GetTracerProvider()
	}
	setDur(&c.Interval, DefaultInterval)
	setInt(&c.BatchSize, DefaultBatchSize)
	setInt(&c.Concurrency, DefaultConcurrency)
	setInt(&c.MaxPerEndpoint, c.Concurrency)
	setInt(&c.InitialPerEndpoint, min(DefaultInitialPerEndpoint, c.MaxPerEndpoint))
	setDur(&c.CommitInterval, DefaultCommitInterval)
	setInt(&c.MaxUncommitted, DefaultMaxUncommitted)
	setInt(&c.MaxAttempts, DefaultMaxAttempts)
	setDur(&c.MaxAge, DefaultMaxAge)
	setDur(&c.UnroutedRetention, c.MaxAge)
	setDur(&c.MaxSchedule, DefaultMaxSchedule)
	setDur(&c.BackoffInitial, DefaultBackoffInitial)
	setDur(&c.BackoffMax, DefaultBackoffMax)
	if c.BackoffMultiplier == 0 {
		c.BackoffMultiplier = DefaultBackoffMultiplier
	}
	setDur(&c.ParkInterval, DefaultParkInterval)
	setDur(&c.MaxThrottle, DefaultMaxThrottle)
	setInt(&c.Breaker.Threshold, DefaultBreakerThreshold)
	setDur(&c.Breaker.CoolDown, DefaultBreakerCoolDown)
	setDur(&c.Breaker.MaxCoolDown, max(DefaultBreakerMaxCoolDown, c.Breaker.CoolDown))
	setDur(&c.TombstoneRetention, DefaultTombstoneRetention)
	setDur(&c.ChangelogRetention, DefaultChangelogRetention)
	setInt(&c.ChangelogMaxEntries, DefaultChangelogMaxEntries)
	setDur(&c.MaintenanceInterval, DefaultMaintenanceInterval)
	setInt(&c.MaxPayloadBytes, DefaultMaxPayloadBytes)
	setInt(&c.MaxIDBytes, DefaultMaxIDBytes)
	setInt(&c.MaxHeaderBytes, DefaultMaxHeaderBytes)
	setDur(&c.LockTimeout, DefaultLockTimeout)
	setInt(&c.InitialMmapSize, DefaultInitialMmapSize)
	setInt(&c.MaxCommitBatch, DefaultMaxCommitBatch)
	setInt(&c.MaxDeliveriesPerCall, DefaultMaxDeliveriesPerCall)
	setInt(&c.AttemptExcerptBytes, DefaultAttemptExcerptBytes)
	if c.OpenFile == nil {
		c.OpenFile = os.OpenFile
	}
	return c
}

func setDur(d *time.Duration, def time.Duration) {
	if *d == 0 {
		*d = def
	}
}

func setInt(n *int, def int) {
	if *n == 0 {
		*n = def
	}
}

// Validate checks c as Open does, with the defaults applied to its zero
// fields, and returns a *ConfigError naming the first field it refuses (nil
// when Open would take c). It opens no file: a caller that builds a Config
// from its own settings can report a bad one before opening anything.
func (c Config) Validate() error {
	return c.withDefaults().validate()
}

// validate checks a Config that went through withDefaults.
func (c Config) validate() error {
	if c.Sink == nil && !c.ReadOnly {
		return &ConfigError{Field: "Sink", Reason: "required"}
	}
	positive := []struct {
		name string
		d    time.Duration
	}{
		{"Interval", c.Interval},
		{"MaxAge", c.MaxAge},
		{"UnroutedRetention", c.UnroutedRetention},
		{"MaxSchedule", c.MaxSchedule},
		{"BackoffInitial", c.BackoffInitial},
		{"BackoffMax", c.BackoffMax},
		{"ParkInterval", c.ParkInterval},
		{"MaxThrottle", c.MaxThrottle},
		{"Breaker.CoolDown", c.Breaker.CoolDown},
		{"Breaker.MaxCoolDown", c.Breaker.MaxCoolDown},
		{"TombstoneRetention", c.TombstoneRetention},
		{"Retain", c.Retain},
		{"MaintenanceInterval", c.MaintenanceInterval},
		{"LockTimeout", c.LockTimeout},
	}
	for _, p := range positive {
		if p.d < 0 {
			return &ConfigError{Field: p.name, Reason: "must not be negative"}
		}
	}
	ints := []struct {
		name string
		n    int
	}{
		{"BatchSize", c.BatchSize},
		{"Concurrency", c.Concurrency},
		{"MaxPerEndpoint", c.MaxPerEndpoint},
		{"InitialPerEndpoint", c.InitialPerEndpoint},
		{"MaxUncommitted", c.MaxUncommitted},
		{"MaxAttempts", c.MaxAttempts},
		{"MaxPayloadBytes", c.MaxPayloadBytes},
		{"MaxIDBytes", c.MaxIDBytes},
		{"MaxHeaderBytes", c.MaxHeaderBytes},
		{"InitialMmapSize", c.InitialMmapSize},
		{"MaxCommitBatch", c.MaxCommitBatch},
	}
	for _, p := range ints {
		if p.n < 0 {
			return &ConfigError{Field: p.name, Reason: "must not be negative"}
		}
	}
	if c.MaxIDBytes > min(store.MaxIDLen, store.MaxKeyLen) {
		return &ConfigError{Field: "MaxIDBytes", Reason: "must not exceed the store's limit of " + itoa(min(store.MaxIDLen, store.MaxKeyLen)) + " bytes"}
	}
	if c.MaxPerEndpoint > c.Concurrency {
		return &ConfigError{Field: "MaxPerEndpoint", Reason: "must not exceed Concurrency"}
	}
	if c.InitialPerEndpoint > c.MaxPerEndpoint {
		return &ConfigError{Field: "InitialPerEndpoint", Reason: "must not exceed MaxPerEndpoint"}
	}
	if c.Breaker.MaxCoolDown < c.Breaker.CoolDown {
		return &ConfigError{Field: "Breaker.MaxCoolDown", Reason: "must not be less than Breaker.CoolDown"}
	}
	if c.BackoffMax < c.BackoffInitial {
		return &ConfigError{Field: "BackoffMax", Reason: "must not be less than BackoffInitial"}
	}
	if !(c.BackoffMultiplier >= 1) {
		return &ConfigError{Field: "BackoffMultiplier", Reason: "must be at least 1"}
	}
	if c.Ordered && c.NoKeyIndex {
		return &ConfigError{Field: "NoKeyIndex", Reason: "per-key order (Ordered) needs the key index"}
	}
	if c.RetainMaxBytes < 0 {
		return &ConfigError{Field: "RetainMaxBytes", Reason: "must not be negative"}
	}
	if c.RetainMaxBytes > 0 && c.Retain == 0 {
		return &ConfigError{Field: "RetainMaxBytes", Reason: "needs Retain (there is no archive without it)"}
	}
	return c.validateAttemptLog()
}

// storeOptions are the options of the store under the outbox.
func (c Config) storeOptions() store.Options {
	return store.Options{
		LockTimeout:     c.LockTimeout,
		ReadOnly:        c.ReadOnly,
		InitialMmapSize: c.InitialMmapSize,
		NoSync:          c.NoSync,
		Now:             c.Clock.Now,
		OpenFile:        c.OpenFile,
		MaxBatch:        c.MaxCommitBatch,
		NoKeyIndex:      c.NoKeyIndex,
		Archive:         c.Retain > 0,
	}
}

// Clock is the time source of an Outbox: the current time, for every
// timestamp it writes, and one-shot timers, for its punctuations. The default
// is the time package's clock; inside a testing/synctest bubble that clock is
// already deterministic, so a custom Clock is for simulations that move time
// by hand.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// NewTimer returns a started timer that sends on C once d has elapsed.
	NewTimer(d time.Duration) Timer
}

// Timer is a one-shot timer made by a Clock, with the semantics of
// time.Timer (after Stop or Reset no stale value is received). A Timer that
// fires early or spuriously is tolerated: the outbox re-checks Clock.Now.
type Timer interface {
	// C returns the channel on which the timer delivers its time.
	C() <-chan time.Time
	// Stop prevents the timer from firing; it reports whether it stopped an
	// active timer.
	Stop() bool
	// Reset changes the timer to fire after d; it reports whether the timer
	// was active.
	Reset(d time.Duration) bool
}

// realClock is the default Clock: time.Now and time.NewTimer.
type realClock struct{}

func (realClock) Now() time.Time                 { return time.Now() }
func (realClock) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time        { return r.t.C }
func (r realTimer) Stop() bool                 { return r.t.Stop() }
func (r realTimer) Reset(d time.Duration) bool { return r.t.Reset(d) }

// schedClock lets the scheduler run on an outbox Clock (a Timer has the
// scheduler's Timer methods).
type schedClock struct{ c Clock }

func (s schedClock) Now() time.Time                           { return s.c.Now() }
func (s schedClock) NewTimer(d time.Duration) scheduler.Timer { return s.c.NewTimer(d) }
