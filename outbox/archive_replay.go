package outbox

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/outboxd/outbox/outbox/internal/admin"
	"github.com/outboxd/outbox/outbox/internal/route"
	"github.com/outboxd/outbox/store"
)

// ArchiveReplay says which archived deliveries StartArchiveReplay replays,
// where to, and how fast.
type ArchiveReplay struct {
	// Filter selects the archived deliveries, as SearchArchive does (its
	// After and Limit are ignored). Only deliveries made before the
	// replay starts are replayed: the replay's own deliveries, archived
	// in turn, are not replayed again.
	Filter ArchiveQuery
	// Endpoint, when set, sends every selected delivery to this endpoint
	// instead of the endpoint it went to (a topic event's delivery becomes
	// the event's delivery to Endpoint). Default: each to its own.
	Endpoint string
	// Rate is the pace, in deliveries per second, from MinRate to MaxRate.
	// Default 100.
	Rate float64
	// Limit caps the deliveries replayed (skipped ones count); 0: all.
	Limit int
}

// ArchiveReplayStatus is the progress of a replay from the archive.
type ArchiveReplayStatus struct {
	// ID names the replay (StartArchiveReplay's answer).
	ID string
	// State is "running", "done", "cancelled" (CancelArchiveReplay) or
	// "failed" (Error says why; Stop fails a running replay too).
	State string
	// Replayed counts the deliveries stored pending so far; Skipped those
	// passed over because a delivery of that event to that endpoint was
	// pending or dead already.
	Replayed, Skipped int
	// Error says why a failed replay failed.
	Error string
	// StartedAt is when it started; EndedAt when it ended (zero while it
	// runs).
	StartedAt, EndedAt time.Time
}

// keptReplays is how many replays (the oldest ended first) ArchiveReplayStatus
// remembers.
const keptReplays = 100

// replays are the replays from the archive of an Outbox: each one runs in a
// goroutine of its own, cancelled by CancelArchiveReplay or Stop and joined
// by Stop.
type replays struct {
	wg    sync.WaitGroup
	mu    sync.Mutex
	jobs  map[string]*replayJob
	order []string // IDs, oldest first
}

type replayJob struct {
	cancel context.CancelFunc
	status ArchiveReplayStatus // guarded by replays.mu
}

// StartArchiveReplay starts replaying the archived deliveries r selects,
// in the background of a started outbox, and returns the replay's ID (for
// ArchiveReplayStatus and CancelArchiveReplay). Each replayed delivery is
// a new delivery of the same event ID (receivers that deduplicate by
// webhook-id see a duplicate), stored pending and then delivered as any
// other; one whose event is pending or dead for that endpoint already is
// skipped, so the replay queues each at most once. A replay is not
// resumed after a restart: what it stored before stays pending and is
// delivered; the rest is not replayed.
func (o *Outbox) StartArchiveReplay(r ArchiveReplay) (string, error) {
	if err := o.enter(); err != nil {
		return "", err
	}
	defer o.ops.Done()
	if o.cfg.ReadOnly {
		return "", fmt.Errorf("outbox: replay archive: %w", ErrReadOnly)
	}
	rate, err := paceRate(r.Rate)
	if err != nil {
		return "", err
	}
	q, err := storeArchiveQuery(r.Filter)
	if err != nil {
		return "", err
	}
	q.After, q.Limit = "", MaxListLimit
	if now := o.clock.Now(); q.To.IsZero() || q.To.After(now) {
		q.To = now
	}
	target, err := o.replayTarget(r.Endpoint)
	if err != nil {
		return "", err
	}
	req := &admin.Requeue{Target: target, Limit: r.Limit, PerSecond: rate}
	return o.startJob(func(ctx context.Context, progress func(int, int)) error {
		req.Progress = progress
		return o.admin.ReplayArchived(ctx, q, req)
	}), nil
}

// startJob runs a paced requeue (a replay, a backfill) in a goroutine the
// outbox owns, and returns its ID.
func (o *Outbox) startJob(run func(ctx context.Context, progress func(requeued, skipped int)) error) string {
	id := uuid.Must(uuid.NewV7()).String()
	ctx, cancel := context.WithCancel(context.Background())
	job := &replayJob{cancel: cancel, status: ArchiveReplayStatus{ID: id, State: "running", StartedAt: o.clock.Now().UTC()}}
	o.rp.add(job)
	o.rp.wg.Add(1)
	go o.runJob(ctx, job, run)
	return id
}

// replayTarget returns the function that turns an archived delivery into
// the delivery to store: itself, or its event's delivery to endpoint.
func (o *Outbox) replayTarget(endpoint string) (func(*store.Record) *store.Record, error) {
	if endpoint == "" {
		return func(r *store.Record) *store.Record { return r }, nil
	}
	if !ValidText(endpoint) || endpoint != strings.TrimSpace(endpoint) {
		return nil, fmt.Errorf("outbox: replay archive: %w: endpoint %q", ErrInvalid, endpoint)
	}
	resolved := endpoint
	if o.resolver != nil {
		ep, err := o.resolver.ResolveEndpoint(endpoint)
		if err != nil {
			return nil, fmt.Errorf("outbox: replay archive: %w: endpoint %q: %v", ErrInvalid, endpoint, err)
		}
		resolved = ep
	}
	return func(r *store.Record) *store.Record {
		if r.Topic != "" {
			return route.DeliveryOf(r, resolved)
		}
		d := *r
		d.Destination, d.Endpoint = endpoint, resolved
		return &d
	}, nil
}

// runJob runs one job to its end.
func (o *Outbox) runJob(ctx context.Context, job *replayJob, run func(context.Context, func(int, int)) error) {
	defer o.rp.wg.Done()
	defer job.cancel()
	err := run(ctx, func(replayed, skipped int) {
		o.rp.mu.Lock()
		job.status.Replayed, job.status.Skipped = replayed, skipped
		o.rp.mu.Unlock()
	})
	o.rp.mu.Lock()
	defer o.rp.mu.Unlock()
	job.status.EndedAt = o.clock.Now().UTC()
	switch {
	case err == nil:
		job.status.State = "done"
	case ctx.Err() != nil && job.status.State == "cancelling":
		job.status.State = "cancelled"
	default:
		job.status.State, job.status.Error = "failed", err.Error()
	}
}

// ArchiveReplayStatus returns the progress of the replay id (ErrNotFound
// for one this outbox did not start, or has forgotten: it remembers the
// last 100).
func (o *Outbox) ArchiveReplayStatus(id string) (ArchiveReplayStatus, error) {
	o.rp.mu.Lock()
	defer o.rp.mu.Unlock()
	job, ok := o.rp.jobs[id]
	if !ok {
		return ArchiveReplayStatus{}, fmt.Errorf("outbox: replay %q: %w", id, ErrNotFound)
	}
	st := job.status
	if st.State == "cancelling" {
		st.State = "running"
	}
	return st, nil
}

// CancelArchiveReplay stops the replay id: it stores nothing more (what it
// stored stays pending and is delivered), and its state becomes
// "cancelled" once it has stopped. Cancelling an ended replay changes
// nothing. ErrNotFound as ArchiveReplayStatus.
func (o *Outbox) CancelArchiveReplay(id string) error {
	o.rp.mu.Lock()
	defer o.rp.mu.Unlock()
	job, ok := o.rp.jobs[id]
	if !ok {
		return fmt.Errorf("outbox: replay %q: %w", id, ErrNotFound)
	}
	if job.status.State == "running" {
		job.status.State = "cancelling"
		job.cancel()
	}
	return nil
}

// add remembers job, forgetting the oldest ended replay beyond keptReplays.
func (rp *replays) add(job *replayJob) {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	if rp.jobs == nil {
		rp.jobs = make(map[string]*replayJob)
	}
	rp.jobs[job.status.ID] = job
	rp.order = append(rp.order, job.status.ID)
	for i := 0; len(rp.jobs) > keptReplays && i < len(rp.order); i++ {
		if old := rp.jobs[rp.order[i]]; !old.status.EndedAt.IsZero() {
			delete(rp.jobs, rp.order[i])
			rp.order = append(rp.order[:i], rp.order[i+1:]...)
			i--
		}
	}
}

// stop cancels every running replay and waits for them to end.
func (rp *replays) stop() {
	rp.mu.Lock()
	for _, job := range rp.jobs {
		job.cancel()
	}
	rp.mu.Unlock()
	rp.wg.Wait()
}
