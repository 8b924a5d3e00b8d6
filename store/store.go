package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// Layout versions. A file without its key index (Options.NoKeyIndex) says
// so in its schema: builds that predate that option understand only
// schemaVersion, and refuse the others instead of trusting an index that
// lacks the entries of the records inserted without it. Opening it with the
// index rebuilds the index and writes the key-index schema again.
//
// Files with the per-endpoint due index (due_by_endpoint, due_endpoints)
// say schemaEndpointDue or schemaEndpointDueNoKeyIndex: builds that predate
// that index refuse them (ErrSchemaTooNew) rather than write records
// without their entries. Open builds the index of an older file and then
// writes the new value.
const (
	schemaVersion               = 1 // every pending record with a Key has its key index entry
	schemaNoKeyIndex            = 2 // the key index is not kept: the keys bucket is empty
	schemaEndpointDue           = 3 // schemaVersion, and every pending record has its per-endpoint due entry
	schemaEndpointDueNoKeyIndex = 4 // schemaNoKeyIndex, and every pending record has its per-endpoint due entry
	maxSchema                   = schemaEndpointDueNoKeyIndex
)

// layoutSchema is the schema of a file that keeps (or not) its key index and
// its per-endpoint due index.
func layoutSchema(keyIndex, endpointIndex bool) uint64 {
	switch {
	case keyIndex && endpointIndex:
		return schemaEndpointDue
	case endpointIndex:
		return schemaEndpointDueNoKeyIndex
	case keyIndex:
		return schemaVersion
	}
	return schemaNoKeyIndex
}

// schemaKeyIndex reports whether a file of schema v keeps its key index.
func schemaKeyIndex(v uint64) bool { return v == schemaVersion || v == schemaEndpointDue }

// schemaEndpointIndex reports whether a file of schema v keeps its
// per-endpoint due index.
func schemaEndpointIndex(v uint64) bool {
	return v == schemaEndpointDue || v == schemaEndpointDueNoKeyIndex
}

// Limits on what a record may hold, well inside bbolt's key size limit.
const (
	// MaxIDLen is the longest ID the store accepts, in bytes.
	MaxIDLen = 1024
	// MaxKeyLen is the longest Key the store accepts, in bytes.
	MaxKeyLen = 1024
	// MaxEndpointLen is the longest Endpoint the store accepts, in bytes
	// (it is part of the keys of the per-endpoint due index).
	MaxEndpointLen = 1024
)

var (
	bucketEvents    = []byte("events")
	bucketDue       = []byte("due")
	bucketDead      = []byte("dead")
	bucketTombs     = []byte("tombstones")
	bucketTombTime  = []byte("tombstones_by_time")
	bucketKeys      = []byte("keys")
	bucketEndpoints = []byte("endpoints")
	bucketChangelog = []byte("changelog")
	bucketMeta      = []byte("meta")

	allBuckets = [][]byte{bucketEvents, bucketDue, bucketDead, bucketTombs, bucketTombTime,
		bucketKeys, bucketEndpoints, bucketChangelog, bucketMeta}

	metaSchema     = []byte("schema")
	metaLastLSN    = []byte("last_lsn")
	metaShipped    = []byte("shipped_lsn")
	metaShipping   = []byte("shipping")
	metaPending    = []byte("count_pending")
	metaUnrouted   = []byte("count_unrouted")
	metaDead       = []byte("count_dead")
	metaTombs      = []byte("count_tombstones")
	metaEndpoints  = []byte("count_endpoints")
	metaChangelogN = []byte("count_changelog")
)

// newFilePageSize is the page size of files this build creates.
const newFilePageSize = 16 << 10

// Options configure Open. The zero value is ready to use.
type Options struct {
	// LockTimeout is how long Open waits for the file lock before it fails
	// with ErrLocked naming the file. Default 1s.
	LockTimeout time.Duration
	// ReadOnly opens the file for offline inspection under a shared lock;
	// writes fail with ErrReadOnly. The file must exist.
	ReadOnly bool
	// InitialMmapSize is the initial size of the memory map in bytes
	// (virtual memory only). A generous map keeps writers from remapping
	// while readers hold transactions. Default 1 GiB.
	InitialMmapSize int
	// NoSync skips fsync. Unsafe: a crash loses or corrupts data. For tests
	// and benchmarks only. Default false.
	NoSync bool
	// Now is the clock for CreatedAt defaults, changelog times, tombstones
	// and trim ages. Default time.Now.
	Now func() time.Time
	// OpenFile opens the database file; a seam for fault injection, passed to
	// bbolt. Default os.OpenFile.
	OpenFile func(string, int, os.FileMode) (*os.File, error)
	// MaxBatch is the most records the group committer puts in one
	// transaction (a single larger Insert still commits alone, atomically).
	// Default 1000.
	MaxBatch int
	// NoKeyIndex stores records without key index entries. The index serves
	// per-key order (Due with HeadOfKeyOnly) and UpsertKey, which then fail
	// with ErrNoKeyIndex. It costs a write at a place set by the record's
	// Key, so a batch of keyed records rewrites index pages all over the
	// file, more of them the larger the backlog (BenchmarkInsertKeyed):
	// without the index, keyed inserts cost what unkeyed ones do.
	//
	// Opening a file that keeps the index with NoKeyIndex empties the index;
	// opening one without it, without NoKeyIndex, rebuilds the index from
	// the pending records (one read of each) before Open returns. A file
	// without its index is refused by builds that predate this option.
	// Default false (the index is kept).
	NoKeyIndex bool
	// Archive keeps every record an OutcomeDelete delivers in the archive
	// (see SearchArchive, TrimArchive) instead of deleting it; it still
	// leaves the pending records at once and leaves its tombstone. Open
	// creates the archive's buckets. A store opened without it writes
	// nothing to an archive it finds and never reads it to deliver.
	// Default false.
	Archive bool
}

func (o Options) withDefaults() Options {
	if o.LockTimeout <= 0 {
		o.LockTimeout = time.Second
	}
	if o.InitialMmapSize <= 0 {
		o.InitialMmapSize = 1 << 30
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.OpenFile == nil {
		o.OpenFile = os.OpenFile
	}
	if o.MaxBatch <= 0 {
		o.MaxBatch = 1000
	}
	return o
}

// Store is an open store file. All methods are safe for concurrent use.
// Writes go through one committer goroutine that groups concurrent calls
// into shared transactions; reads use short bbolt read transactions.
type Store struct {
	db   *bolt.DB
	path string
	opts Options

	mu     sync.RWMutex // guards closed and sends on queue
	closed bool
	queue  chan *op
	done   chan struct{} // closed when the committer has exited

	lastLSN atomic.Uint64

	// keyIndex is whether the file keeps its key index (fixed at Open).
	keyIndex bool
	// archive is whether delivered records are archived (Options.Archive
	// of a writable store).
	archive bool
	// endpointIndex is whether the file keeps its per-endpoint due index:
	// always once Open returns a writable store; a read-only store of an
	// older file has none (see ErrNoEndpointIndex).
	endpointIndex bool

	// Committer telemetry (see CommitStats). runningSince is when the
	// commit under way began, as time since epoch plus one; zero when the
	// committer is idle.
	epoch                                 time.Time
	runningSince                          atomic.Int64
	commits, failed, calls, records, busy atomic.Uint64
}

// CommitStats describe the committer's work since Open. Every write call
// (Insert, Apply, Update, ...) waits for the commit that carries it.
type CommitStats struct {
	// Commits counts the write transactions run; Failed counts those that
	// did not commit (every call in them got the error).
	Commits, Failed uint64
	// Calls counts the write calls the transactions carried, Records sums
	// their weights: the records of an Insert or a Restore chunk, the
	// outcomes and endpoint states of an Apply, MaxBatch for a trim step
	// (its bound), one for the other calls. Records/Commits is the mean
	// batch.
	Calls, Records uint64
	// Busy is the time spent in write transactions, fsyncs included.
	Busy time.Duration
	// Running is how long the transaction under way has been running, zero
	// when the committer is idle. A commit takes milliseconds; one running
	// for seconds means the disk is not answering (an fsync that does not
	// return), and every write waits behind it.
	Running time.Duration
}

// CommitStats returns the committer's counters. It takes no lock and does
// not touch the file, so it answers even while a commit hangs.
func (s *Store) CommitStats() CommitStats {
	st := CommitStats{
		Commits: s.commits.Load(),
		Failed:  s.failed.Load(),
		Calls:   s.calls.Load(),
		Records: s.records.Load(),
		Busy:    time.Duration(s.busy.Load()),
	}
	if since := s.runningSince.Load(); since > 0 {
		st.Running = max(time.Since(s.epoch)-time.Duration(since-1), 0)
	}
	return st
}

// Open opens the store at path, creating it when it does not exist. A new
// file is built under a temporary name and renamed into place, so a crash
// never leaves a half-made store behind.
//
// Errors are *OpenError values naming the file, wrapping ErrLocked (another
// process holds it after LockTimeout), ErrNotDatabase (empty, not bbolt, or a
// bbolt file without this store's layout), ErrCorrupt (bad meta pages,
// truncated, damaged structure) or ErrSchemaTooNew.
func Open(path string, opts Options) (*Store, error) {
	opts = opts.withDefaults()
	fail := func(err error) (*Store, error) { return nil, &OpenError{Path: path, Err: err} }

	info, err := os.Stat(path)
	switch {
	case errors.Is(err, os.ErrNotExist) && !opts.ReadOnly:
		if err := create(path, opts); err != nil {
			return fail(err)
		}
	case err != nil:
		return fail(err)
	case info.IsDir():
		return fail(fmt.Errorf("%w: is a directory", ErrNotDatabase))
	default:
		if err := checkFile(path, info.Size(), !opts.ReadOnly); err != nil {
			return fail(err)
		}
	}

	db, err := bolt.Open(path, 0o600, boltOptions(opts))
	if err != nil {
		return fail(mapOpenErr(err, opts.LockTimeout))
	}
	s := &Store{db: db, path: path, opts: opts, done: make(chan struct{}), epoch: time.Now()}
	last, schema, err := s.validate()
	if err != nil {
		_ = db.Close()
		return fail(err)
	}
	s.lastLSN.Store(last)
	s.keyIndex, s.endpointIndex = schemaKeyIndex(schema), schemaEndpointIndex(schema)
	if err := s.ensureAttempts(); err != nil {
		_ = db.Close()
		return fail(err)
	}
	if opts.ReadOnly {
		close(s.done)
		return s, nil
	}
	if err := s.ensureEndpointIndex(); err != nil {
		_ = db.Close()
		return fail(err)
	}
	if s.keyIndex == opts.NoKeyIndex {
		if err := s.setKeyIndex(!opts.NoKeyIndex); err != nil {
			_ = db.Close()
			return fail(err)
		}
	}
	if opts.Archive {
		if err := s.ensureArchive(); err != nil {
			_ = db.Close()
			return fail(err)
		}
		s.archive = true
	}
	s.queue = make(chan *op, 1024)
	go s.commitLoop()
	return s, nil
}

func boltOptions(opts Options) *bolt.Options {
	return &bolt.Options{
		Timeout:         opts.LockTimeout,
		NoFreelistSync:  true,
		FreelistType:    bolt.FreelistMapType,
		ReadOnly:        opts.ReadOnly,
		InitialMmapSize: opts.InitialMmapSize,
		NoSync:          opts.NoSync || forceNoSync,
		// New files get 16 KiB pages: a commit writes each dirty page with
		// its own pwrite, and each record dirties three trees (events,
		// changelog, due index). Existing files keep their page size.
		PageSize: newFilePageSize,
		OpenFile: opts.OpenFile,
	}
}

func mapOpenErr(err error, timeout time.Duration) error {
	switch {
	case errors.Is(err, berrors.ErrTimeout):
		return fmt.Errorf("%w (gave up after %v)", ErrLocked, timeout)
	case errors.Is(err, berrors.ErrInvalid), errors.Is(err, berrors.ErrVersionMismatch):
		return fmt.Errorf("%w: %v", ErrNotDatabase, err)
	case errors.Is(err, berrors.ErrChecksum):
		return fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	return err
}

// create makes a new store file: buckets and schema in a temporary file,
// synced, then renamed to path and the directory synced.
func create(path string, opts Options) error {
	tmp := path + ".creating"
	_ = os.Remove(tmp)
	bo := boltOptions(opts)
	bo.NoSync = false
	db, err := bolt.Open(tmp, 0o600, bo)
	if err != nil {
		return mapOpenErr(err, opts.LockTimeout)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, name := range allBuckets {
			if _, err := tx.CreateBucket(name); err != nil {
				return err
			}
		}
		for _, name := range append([][]byte{bucketAttempts}, endpointBuckets...) {
			if _, err := tx.CreateBucket(name); err != nil {
				return err
			}
		}
		if err := tx.Bucket(bucketMeta).Put(metaAttempts, []byte{1}); err != nil {
			return err
		}
		return tx.Bucket(bucketMeta).Put(metaSchema, u64(layoutSchema(true, true)))
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return syncDir(filepath.Dir(path))
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// validate checks the layout and schema of a freshly opened file and returns
// the last LSN. It runs with faults turned into panics and recovers them, so
// a damaged file is an error, not a crash.
func (s *Store) validate() (last, schema uint64, err error) {
	err = s.view(func(tx *bolt.Tx) error {
		size, err := fileSize(s.path)
		if err != nil {
			return err
		}
		if need := tx.Size(); size < need {
			return fmt.Errorf("%w: file is %d bytes, its meta page needs %d (truncated)", ErrCorrupt, size, need)
		}
		meta := tx.Bucket(bucketMeta)
		if meta == nil {
			return fmt.Errorf("%w: a bbolt file without the store's meta bucket", ErrNotDatabase)
		}
		v := meta.Get(metaSchema)
		if len(v) != 8 {
			return fmt.Errorf("%w: no schema version in meta", ErrNotDatabase)
		}
		schema = binary.BigEndian.Uint64(v)
		if schema > maxSchema {
			return fmt.Errorf("%w: file has schema %d, this build understands up to %d", ErrSchemaTooNew, schema, maxSchema)
		} else if schema == 0 {
			return fmt.Errorf("%w: schema version 0", ErrCorrupt)
		}
		names := allBuckets
		if schemaEndpointIndex(schema) {
			names = append(slices.Clip(allBuckets), endpointBuckets...)
		}
		for _, name := range names {
			b := tx.Bucket(name)
			if b == nil {
				return fmt.Errorf("%w: bucket %q is missing", ErrCorrupt, name)
			}
			// Touch the first and last leaf of every bucket so that a damaged
			// tree is found now rather than in the middle of a delivery.
			c := b.Cursor()
			c.First()
			c.Last()
		}
		last = getU64(meta, metaLastLSN)
		return nil
	})
	return last, schema, err
}

// setKeyIndex empties the key index (keep false) or rebuilds it from the
// pending records (keep true), and records which in the schema version, in
// one transaction: a crash leaves the file as it was or as wanted. A damaged
// file is an error, as in validate, not a crash.
func (s *Store) setKeyIndex(keep bool) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: %v", ErrCorrupt, p)
		}
	}()
	err = s.db.Update(func(tx *bolt.Tx) error {
		if err := tx.DeleteBucket(bucketKeys); err != nil {
			return err
		}
		keys, err := tx.CreateBucket(bucketKeys)
		if err != nil {
			return err
		}
		meta := tx.Bucket(bucketMeta)
		if !keep {
			return meta.Put(metaSchema, u64(layoutSchema(false, s.endpointIndex)))
		}
		var entries [][]byte
		c := tx.Bucket(bucketEvents).Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			r, err := decodeStored(k, v)
			if err != nil {
				return err
			}
			if r.Key != "" {
				entries = append(entries, keyIndex(r.indexKey(), r.seq, r.ID))
			}
		}
		slices.SortFunc(entries, bytes.Compare)
		keys.FillPercent = 0.9 // a sorted load: fill pages, leave room for inserts
		for _, e := range entries {
			if err := keys.Put(e, nil); err != nil {
				return err
			}
		}
		return meta.Put(metaSchema, u64(layoutSchema(true, s.endpointIndex)))
	})
	if err == nil {
		s.keyIndex = keep
	}
	return err
}

func fileSize(path string) (int64, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

// Path returns the file the store was opened on.
func (s *Store) Path() string { return s.path }

// Close waits for the writes already queued to commit, stops the committer
// and closes the file. It is idempotent; later calls return nil. Calls made
// after Close fail with ErrClosed.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	if s.queue != nil {
		close(s.queue)
	}
	s.mu.Unlock()
	<-s.done
	var err error
	if !s.opts.ReadOnly {
		// Commits skip writing bbolt's freelist (NoFreelistSync): with a large
		// drained file, rewriting it on every commit costs more than the
		// commit. A store that is not closed cleanly has it rebuilt on open
		// by a walk of the whole file; one last commit with the freelist
		// spares a clean restart that walk (1M records: seconds).
		s.db.NoFreelistSync = false
		err = s.db.Update(func(*bolt.Tx) error { return nil })
	}
	return errors.Join(err, s.db.Close())
}

// view runs fn in a read transaction, turning bbolt panics and memory faults
// on a damaged file into ErrCorrupt.
func (s *Store) view(fn func(tx *bolt.Tx) error) (err error) {
	s.mu.RLock()
	closed := s.closed
	s.mu.RUnlock()
	if closed {
		return ErrClosed
	}
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: %v", ErrCorrupt, p)
		}
	}()
	err = s.db.View(fn)
	if errors.Is(err, berrors.ErrDatabaseNotOpen) {
		err = ErrClosed
	}
	return err
}

// LastLSN returns the LSN of the last committed changelog entry (0 when
// nothing was ever written). It reads no file.
func (s *Store) LastLSN() uint64 { return s.lastLSN.Load() }

func u64(v uint64) []byte { return binary.BigEndian.AppendUint64(make([]byte, 0, 8), v) }

func getU64(b *bolt.Bucket, k []byte) uint64 {
	if v := b.Get(k); len(v) == 8 {
		return binary.BigEndian.Uint64(v)
	}
	return 0
}

// op is one unit of work for the committer. run executes inside the shared
// write transaction; it must do all its checks before its first write, so
// that an error it returns leaves nothing of it in the transaction.
//
// An app op (AppUpdate) runs application code that may write before it
// fails: the committer runs app ops first in a transaction, and when one
// fails, panics or is cancelled it rolls the transaction back and runs the
// batch again without it (see commit). App ops wait for their commit
// whatever their ctx does once it has started, so that their answer says
// whether they committed.
type op struct {
	ctx    context.Context
	weight int
	app    bool
	run    func(w *wtx) error
	err    error
	panic  any
	done   chan struct{}

	// mu is held while run runs; abandoned, set under it by a caller
	// whose ctx ended, keeps run from starting (see queueOp).
	mu        sync.Mutex
	abandoned bool
}

// do queues fn for the committer and waits for its commit (fsync included).
// When ctx ends first it returns ctx.Err(): fn does not run after that (if
// it ran already, its write may still commit), so whatever fn writes is
// the caller's again once do returns.
func (s *Store) do(ctx context.Context, weight int, fn func(w *wtx) error) error {
	return s.queueOp(&op{ctx: ctx, weight: weight, run: fn, done: make(chan struct{})})
}

// doApp is do for an app op (see op).
func (s *Store) doApp(ctx context.Context, fn func(w *wtx) error) error {
	return s.queueOp(&op{ctx: ctx, weight: 1, app: true, run: fn, done: make(chan struct{})})
}

func (s *Store) queueOp(o *op) error {
	ctx := o.ctx
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return ErrClosed
	}
	if s.queue == nil {
		s.mu.RUnlock()
		return ErrReadOnly
	}
	select {
	case s.queue <- o:
	case <-ctx.Done():
		s.mu.RUnlock()
		return ctx.Err()
	}
	s.mu.RUnlock()
	if o.app {
		<-o.done
	} else {
		select {
		case <-o.done:
		case <-ctx.Done():
			o.mu.Lock() // waits for a run under way; none starts after
			o.abandoned = true
			o.mu.Unlock()
			return ctx.Err()
		}
	}
	if o.panic != nil {
		panic(o.panic)
	}
	return o.err
}

// The committer yields its processor up to gatherYields times, for at most
// gatherWindow, when the queue runs dry before a batch holds gatherBelow
// records (see commitLoop).
var (
	gatherYields = 32
	gatherWindow = 250 * time.Microsecond
	gatherBelow  = 256 // records
)

// commitLoop is the committer: it takes the first waiting op, adds whatever
// else is queued (up to MaxBatch records), runs them all in one write
// transaction and commits once. Callers arriving during a commit form the
// next batch, so the batch size follows the concurrency without a timer.
//
// When the queue runs dry while the batch is still small, the committer
// yields its processor (runtime.Gosched) a few times before it commits: the
// callers that the previous commit released are runnable then, and those
// that come straight back with their next write join this batch instead of
// the next one, so there are fewer commits (each with two fsyncs and its
// rewritten pages) for the same writes. With nothing else runnable a yield
// returns at once, so a lone caller waits microseconds. A batch of
// gatherBelow records or more already spreads its commit's cost, and
// yielding the one writer's processor would only slow a CPU-bound loader,
// so it commits at once.
func (s *Store) commitLoop() {
	defer close(s.done)
	debug.SetPanicOnFault(true)
	var carry *op
	for {
		first := carry
		carry = nil
		if first == nil {
			var ok bool
			if first, ok = <-s.queue; !ok {
				return
			}
		}
		batch := []*op{first}
		weight := first.weight
		yields := 0
		var dry time.Time
	fill:
		for weight < s.opts.MaxBatch {
			select {
			case o, ok := <-s.queue:
				if !ok {
					break fill
				}
				if weight+o.weight > s.opts.MaxBatch {
					carry = o
					break fill
				}
				batch = append(batch, o)
				weight += o.weight
			default:
				switch {
				case yields >= gatherYields || weight >= gatherBelow:
					break fill
				case yields == 0:
					dry = time.Now()
				case time.Since(dry) >= gatherWindow:
					break fill
				}
				yields++
				runtime.Gosched()
			}
		}
		s.commit(batch)
	}
}

// commit runs a batch of ops in one write transaction and releases their
// callers: ops whose ctx ended while queued are released first, with that
// error; an app op that fails is dropped and the transaction run again
// without it (see runBatch).
func (s *Store) commit(batch []*op) {
	live := dropCancelled(batch)
	if len(live) == 0 {
		return
	}
	start := s.startCommit(live)
	w, live, err := s.runBatch(live)
	s.finishCommit(start, w, live, err)
}

// dropCancelled releases the ops whose ctx ended while they were queued,
// with that error, and returns the others.
func dropCancelled(batch []*op) []*op {
	live := batch[:0:0]
	for _, o := range batch {
		if err := o.ctx.Err(); err != nil {
			o.err = err
			close(o.done)
			continue
		}
		live = append(live, o)
	}
	return live
}

// startCommit marks the committer busy and counts the commit, its calls
// and their records. It returns when the commit started (since s.epoch).
func (s *Store) startCommit(live []*op) time.Duration {
	start := time.Since(s.epoch)
	s.runningSince.Store(int64(start) + 1)
	s.commits.Add(1)
	s.calls.Add(uint64(len(live)))
	weight := 0
	for _, o := range live {
		weight += o.weight
	}
	s.records.Add(uint64(weight))
	return start
}

// runBatch runs live in one write transaction until it commits or fails
// for another reason than an app op's failure. App ops run first: each may
// fail after its writes, and the transaction is then run again without it,
// which only the ops that ran before it must bear. App ops may run again
// (AppUpdate says so); the others' functions (some call user code) run
// once, after the last app op succeeded, when nothing can make the
// transaction run again. It returns the transaction that ran last (nil
// when every op was dropped), the ops still in the batch (the dropped
// ones are released), and the transaction's error.
func (s *Store) runBatch(live []*op) (*wtx, []*op, error) {
	var apps, rest []*op
	for _, o := range live {
		if o.app {
			apps = append(apps, o)
		} else {
			rest = append(rest, o)
		}
	}
	for {
		w, dropped, err := s.runTx(apps, rest)
		if dropped == nil || err != errRetry {
			return w, live, err
		}
		close(dropped.done)
		apps = slices.DeleteFunc(apps, func(o *op) bool { return o == dropped })
		live = slices.DeleteFunc(live, func(o *op) bool { return o == dropped })
		if len(live) == 0 {
			return nil, live, nil
		}
	}
}

// runTx runs apps, then rest, in one write transaction. A panic that is
// not a caller's (such as a fault on the mapped file, under
// debug.SetPanicOnFault) is returned as ErrCorrupt. When an app op fails,
// or its ctx ends before the others run, the transaction is rolled back
// with errRetry and that op is returned as dropped.
func (s *Store) runTx(apps, rest []*op) (w *wtx, dropped *op, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: %v", ErrCorrupt, p)
		}
	}()
	err = s.db.Update(func(tx *bolt.Tx) error {
		w = s.begin(tx)
		var err error
		dropped, err = runOps(w, apps, rest)
		return err
	})
	return w, dropped, err
}

// runOps runs the ops of one transaction: apps, then rest, then w.finish.
func runOps(w *wtx, apps, rest []*op) (dropped *op, err error) {
	for _, o := range apps {
		o.err = w.call(o)
		if w.err != nil {
			return nil, w.err
		}
		if o.err != nil || o.panic != nil {
			return o, errRetry
		}
	}
	// The last moment an app op's ctx can stop it: past this, the
	// transaction commits unless the disk fails.
	for _, o := range apps {
		if e := o.ctx.Err(); e != nil {
			o.err = e
			return o, errRetry
		}
	}
	for _, o := range rest {
		o.err = w.call(o)
		if w.err != nil {
			return nil, w.err
		}
	}
	return nil, w.finish()
}

// finishCommit records the commit's LSN or its failure, marks the
// committer idle and releases the callers of live, with err unless an op
// has an error or a panic of its own.
func (s *Store) finishCommit(start time.Duration, w *wtx, live []*op, err error) {
	if err == nil && w != nil {
		s.lastLSN.Store(w.lsn)
	}
	if err != nil {
		s.failed.Add(1)
	}
	// Idle again before any caller returns, so that a caller sees its own
	// commit finished.
	s.busy.Add(uint64(time.Since(s.epoch) - start))
	s.runningSince.Store(0)
	for _, o := range live {
		if err != nil && o.err == nil && o.panic == nil {
			o.err = err
		}
		close(o.done)
	}
}

// errRetry rolls back a transaction that is to run again without the app op
// that failed in it.
var errRetry = errors.New("store: transaction retried without a failed op")

// call runs one op, catching a panic of caller code so it can be raised again
// in the caller's goroutine. The op made no writes when its function panics
// (functions call user code before writing).
func (w *wtx) call(o *op) (err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.abandoned {
		return o.ctx.Err()
	}
	defer func() {
		if p := recover(); p != nil {
			if w.inUser {
				w.inUser = false
				o.panic = p
				err = nil
				return
			}
			panic(p)
		}
	}()
	return o.run(w)
}
