package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
)

// CheckOptions configure Check. The zero value is ready to use.
type CheckOptions struct {
	// LockTimeout is how long Check waits for the file's lock before it
	// fails with ErrLocked. The lock is shared: inspections and other checks
	// may run at the same time, a process that writes the file may not.
	// Default 1s.
	LockTimeout time.Duration
	// MaxProblems is the most problems a report lists; the problems found
	// beyond it are only counted (CheckReport.Omitted). Default 100.
	MaxProblems int
}

// Problem is one inconsistency that Check found.
type Problem struct {
	// Bucket is the bucket the problem is in ("events", "due", ...), or ""
	// for the file as a whole (meta pages, page tree, free pages).
	Bucket string
	// Page is the page that holds the key, 0 when the problem is not on one
	// page or the page is not known.
	Page uint64
	// Key names the key in words ("evt-1", "LSN 42", ...); "" when the
	// problem is not about one key.
	Key string
	// What says what is wrong.
	What string
}

// String returns the problem on one line: where, then what.
func (p Problem) String() string {
	var b bytes.Buffer
	if p.Bucket != "" {
		b.WriteString(p.Bucket)
	} else {
		b.WriteString("file")
	}
	if p.Page != 0 {
		fmt.Fprintf(&b, ", page %d", p.Page)
	}
	if p.Key != "" {
		fmt.Fprintf(&b, ", %s", p.Key)
	}
	b.WriteString(": ")
	b.WriteString(p.What)
	return b.String()
}

// BucketSummary is what Check read of one bucket.
type BucketSummary struct {
	// Name is the bucket's name.
	Name string
	// Keys counts the keys read.
	Keys int
	// Checked is false when not every value of the bucket was read and
	// checked: its page tree is damaged, or it is not one of the store's
	// buckets.
	Checked bool
	// Damaged reports a damaged page tree. Keys then counts the keys read
	// in the pages around the damage (0 when its root page is damaged).
	Damaged bool
}

// CheckReport is what Check found.
type CheckReport struct {
	// Path is the file checked.
	Path string
	// FileSize is its size in bytes.
	FileSize int64
	// PageSize is bbolt's page size of the file, and Pages the number of
	// pages in use (bbolt's high water mark); both 0 when the meta pages
	// could not be read.
	PageSize int
	Pages    uint64
	// Buckets lists the buckets of the file, in name order.
	Buckets []BucketSummary
	// Problems lists the problems found, in the order found, at most
	// CheckOptions.MaxProblems of them.
	Problems []Problem
	// Omitted counts the problems found beyond those listed.
	Omitted int
	// Skipped names the checks that were not run, and why: a check that
	// would read through damaged pages is left out.
	Skipped []string

	max int
}

// Damaged reports whether Check found any problem.
func (r *CheckReport) Damaged() bool { return len(r.Problems) > 0 }

// Err returns nil for a file without problems, and otherwise an error
// matching ErrCorrupt that names the file, the number of problems and the
// first of them.
func (r *CheckReport) Err() error {
	if !r.Damaged() {
		return nil
	}
	n := len(r.Problems) + r.Omitted
	noun := "problems"
	if n == 1 {
		noun = "problem"
	}
	return fmt.Errorf("%w: %s is damaged: %d %s, the first: %s", ErrCorrupt, r.Path, n, noun, r.Problems[0])
}

func (r *CheckReport) add(p Problem) {
	if len(r.Problems) >= r.max {
		r.Omitted++
		return
	}
	r.Problems = append(r.Problems, p)
}

// Check verifies the store file at path offline and reports every problem it
// finds, up to opts.MaxProblems. It opens the file read-only under a shared
// lock, so it fails with ErrLocked (in an *OpenError) while a process has
// the store open for writing; it writes nothing.
//
// It checks, in order, each step only over what the steps before it found
// sound (so that it never reads through damaged pages, and never crashes on
// a damaged file):
//   - the meta pages and the file's length (as Open does);
//   - the page tree of every bucket: page identity and type, elements inside
//     their page, children in range and referenced once, key order, inline
//     buckets, and the freelist page;
//   - every value of every store bucket, decoded with the store's own codecs
//     (records, dead letters, tombstones, endpoint states, changelog entries,
//     meta values), and the invariants between buckets: each pending record
//     has its due index entry and each due index entry its pending record
//     (due at that time), likewise the key index and the tombstone time
//     index, no ID both pending and dead, versions and changelog LSNs not
//     above the last LSN, and the counts kept in meta;
//   - bbolt's own consistency check (Tx.Check), when the page tree is sound.
//
// It returns the report and report.Err(): nil for a healthy file, an error
// matching ErrCorrupt when a problem was found. A file that cannot be
// checked (missing, locked, not a store, a newer schema) gives a nil report
// and an *OpenError, as Open would.
//
// Its cost grows with the file: it reads every page in use and decodes
// every value once, which is why Open does not run it.
func Check(path string, opts CheckOptions) (*CheckReport, error) {
	if opts.LockTimeout <= 0 {
		opts.LockTimeout = time.Second
	}
	if opts.MaxProblems <= 0 {
		opts.MaxProblems = 100
	}
	fail := func(err error) (*CheckReport, error) { return nil, &OpenError{Path: path, Err: err} }
	info, err := os.Stat(path)
	if err != nil {
		return fail(err)
	}
	if info.IsDir() {
		return fail(fmt.Errorf("%w: is a directory", ErrNotDatabase))
	}
	rep := &CheckReport{Path: path, FileSize: info.Size(), max: opts.MaxProblems}
	if err := checkFile(path, info.Size(), false); err != nil {
		if !errors.Is(err, ErrCorrupt) {
			return fail(err)
		}
		rep.add(Problem{What: err.Error()})
		rep.Skipped = append(rep.Skipped, "every other check: the meta pages or the file's length cannot be trusted")
		return rep, rep.Err()
	}
	bo := boltOptions(Options{ReadOnly: true, LockTimeout: opts.LockTimeout}.withDefaults())
	db, err := bolt.Open(path, 0o600, bo)
	if err != nil {
		err = mapOpenErr(err, opts.LockTimeout)
		if !errors.Is(err, ErrCorrupt) {
			return fail(err)
		}
		rep.add(Problem{What: err.Error()})
		return rep, rep.Err()
	}
	defer db.Close()
	f, err := os.Open(path)
	if err != nil {
		return fail(err)
	}
	defer f.Close()
	c := &checker{rep: rep, db: db, f: f}
	if err := c.run(); err != nil {
		return fail(err)
	}
	return rep, rep.Err()
}

// checker is the state of one Check.
type checker struct {
	rep *CheckReport
	db  *bolt.DB
	f   *os.File
	tx  *bolt.Tx

	data    []byte // the file, memory mapped read-only
	meta    *boltMeta
	tops    []bucketRef
	sound   map[string]bool // store buckets whose page tree is sound
	partial map[string]bool // store buckets with damaged subtrees under a sound root page
	treeBad bool            // a page tree or the freelist page is damaged
	cursors map[string]*bolt.Cursor

	// From the meta bucket.
	metaVals map[string][]byte
	lastLSN  uint64
	keyIndex bool
	// endpointIndex: the file keeps its per-endpoint due index.
	endpointIndex bool

	// Counts of what the walk read.
	keys  map[string]int
	keyed int // pending records with a Key
	// unrouted counts the pending fan-out events kept unrouted.
	unrouted int
	// A pending record without its due (key) index entry was found.
	dueMissing, keyMissing bool
	// epHeads holds each endpoint's earliest due time (nanos) among the
	// pending records, epSeen the endpoints with a head entry; epMissing
	// says a pending record lacks its per-endpoint due entry.
	epHeads   map[string]uint64
	epSeen    map[string]bool
	epMissing bool
}

// errPage returns the page a page tree error names, 0 when none.
func errPage(err error) uint64 {
	var pe *pageError
	if errors.As(err, &pe) {
		return pe.page
	}
	return 0
}

// detail is the text of an ErrCorrupt error without its sentinel's prefix.
func detail(err error) string {
	return strings.TrimPrefix(err.Error(), ErrCorrupt.Error()+": ")
}

// safe runs fn, turning a panic or memory fault into ErrCorrupt.
func safe(fn func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: reading the pages: %v", ErrCorrupt, p)
		}
	}()
	return fn()
}

func (c *checker) problem(bucket string, page uint64, key, what string, args ...any) {
	if len(args) > 0 {
		what = fmt.Sprintf(what, args...)
	}
	// Every problem is damage; the sentinel's text inside wrapped causes
	// says nothing more.
	what = strings.ReplaceAll(what, ErrCorrupt.Error()+": ", "")
	c.rep.add(Problem{Bucket: bucket, Page: page, Key: key, What: what})
}

func (c *checker) run() error {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	tx, err := c.db.Begin(false)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // a read transaction
	c.tx = tx
	// The meta page bbolt reads, as this check reads it.
	for _, off := range []int64{0, int64(c.db.Info().PageSize)} {
		if m, _ := readMeta(c.f, off); m != nil && m.txid == uint64(tx.ID()) {
			c.meta = m
		}
	}
	if c.meta == nil {
		c.problem("", 0, "", "bbolt reads transaction %d, whose meta page this check does not accept", tx.ID())
		return nil
	}
	c.rep.PageSize, c.rep.Pages = int(c.meta.pageSize), c.meta.pgid
	data, unmap, err := mapFile(c.f, int64(c.meta.pgid)*int64(c.meta.pageSize))
	if err != nil {
		return err
	}
	defer unmap()
	c.data = data
	c.keys = map[string]int{}
	c.cursors = map[string]*bolt.Cursor{}

	if !c.structure() {
		return nil
	}
	if err := c.schema(); err != nil {
		return err
	}
	c.values()
	if c.treeBad {
		c.rep.Skipped = append(c.rep.Skipped, "bbolt's consistency check (Tx.Check): it would read damaged pages")
		return nil
	}
	for err := range tx.Check() {
		c.problem("", 0, "", "bbolt: %v", err)
	}
	return nil
}

// structure walks the page tree of the root bucket and then of every bucket
// in it, each on its own, and records which store buckets are sound. It
// returns false when the root bucket itself is damaged: nothing else can be
// read then.
func (c *checker) structure() bool {
	tc := c.treeChecker()
	err := safe(func() error {
		_, err := tc.page(c.meta.root, nil, nil, "root bucket", &c.tops)
		return err
	})
	if err != nil {
		c.problem("", errPage(err), "", "%s", detail(err))
		c.rep.Skipped = append(c.rep.Skipped, "the buckets: the root bucket's pages are damaged")
		c.treeBad = true
		return false
	}
	c.sound, c.partial = map[string]bool{}, map[string]bool{}
	for _, b := range c.tops {
		name := string(b.name)
		store := isStoreBucket(name)
		c.rep.Buckets = append(c.rep.Buckets, BucketSummary{Name: name})
		subtrees := false
		tc.keepGoing = func(err error) {
			c.problem(name, errPage(err), "", "%s", detail(err))
			subtrees = true
		}
		err := safe(func() error { return c.bucketTree(tc, b, name, store) })
		tc.keepGoing = nil
		switch {
		case err != nil:
			c.problem(name, errPage(err), "", "%s", detail(err))
			c.rep.Buckets[len(c.rep.Buckets)-1].Damaged = true
			c.treeBad = true
		case subtrees:
			c.rep.Buckets[len(c.rep.Buckets)-1].Damaged = true
			c.partial[name] = store
			c.treeBad = true
		default:
			c.sound[name] = store
		}
	}
	for _, name := range allBuckets {
		found := false
		for _, b := range c.tops {
			found = found || bytes.Equal(b.name, name)
		}
		if !found {
			c.problem(string(name), 0, "", "the bucket is missing")
		}
	}
	if err := safe(c.freelist); err != nil {
		c.problem("", c.meta.freelist, "", "%s", detail(err))
		c.treeBad = true
	}
	return true
}

// bucketTree checks the pages of one bucket of the root bucket. The store's
// buckets hold no nested buckets; another application's may.
func (c *checker) bucketTree(tc *treeChecker, b bucketRef, name string, store bool) error {
	where := "page tree"
	if b.root == 0 {
		return tc.inlinePage(b, where)
	}
	var nested []bucketRef
	if _, err := tc.page(b.root, nil, nil, where, &nested); err != nil {
		return err
	}
	for _, n := range nested {
		if store {
			return pageErr(n.page, "%s: page %d holds a nested bucket %q, which the store never writes", where, n.page, n.name)
		}
		if n.root == 0 {
			if err := tc.inlinePage(n, "nested bucket "+strconv.Quote(string(n.name))); err != nil {
				return err
			}
			continue
		}
		if err := tc.bucket(n.root, "nested bucket "+strconv.Quote(string(n.name))); err != nil {
			return err
		}
	}
	return nil
}

func (c *checker) treeChecker() *treeChecker {
	return &treeChecker{data: c.data, pageSize: uint64(c.meta.pageSize), hwm: c.meta.pgid, seen: make([]uint64, (c.meta.pgid+63)/64)}
}

// inlinePage checks the page of an inline bucket, which lives inside the
// value of its parent's leaf element, and visits its elements.
func (c *treeChecker) inlinePage(b bucketRef, where string) error {
	p := b.inline
	le := binary.LittleEndian
	if len(p) < pageHeaderSize {
		return pageErr(b.page, "%s: the inline bucket on page %d has %d bytes, less than a page header", where, b.page, len(p))
	}
	if flags := le.Uint16(p[8:]); flags != leafPageFlag {
		return pageErr(b.page, "%s: the inline bucket on page %d has type flags %#x, want a leaf", where, b.page, flags)
	}
	count := int(le.Uint16(p[10:]))
	if pageHeaderSize+count*pageElemSize > len(p) {
		return pageErr(b.page, "%s: the inline bucket on page %d claims %d elements, more than fit in it", where, b.page, count)
	}
	var prev []byte
	for i := range count {
		e := p[pageHeaderSize+i*pageElemSize:]
		start := uint64(pageHeaderSize+i*pageElemSize) + uint64(le.Uint32(e[4:]))
		ksize := uint64(le.Uint32(e[8:]))
		end := start + ksize + uint64(le.Uint32(e[12:]))
		if end > uint64(len(p)) {
			return pageErr(b.page, "%s: the inline bucket on page %d: element %d lies outside it", where, b.page, i)
		}
		key, value := p[start:start+ksize], p[start+ksize:end]
		if err := checkKeyOrder(i, key, prev, nil); err != nil {
			return pageErr(b.page, "%s: the inline bucket on page %d: %v", where, b.page, err)
		}
		prev = key
		if le.Uint32(e[0:])&bucketLeafFlag != 0 {
			return pageErr(b.page, "%s: the inline bucket on page %d holds a nested bucket, which bbolt never writes", where, b.page)
		}
		if c.visit != nil {
			c.visit(b.page, key, value)
		}
	}
	return nil
}

// freelistPageFlag is bbolt's page type of the freelist.
const freelistPageFlag = 0x10

// freelist checks the freelist page (when the file has one) as bbolt reads
// it: a freelist page in range whose page IDs fit in it and are in use.
func (c *checker) freelist() error {
	id := c.meta.freelist
	if id == noFreelist {
		return nil
	}
	bad := func(format string, args ...any) error {
		return pageErr(id, "freelist page %d: %s", id, fmt.Sprintf(format, args...))
	}
	if id < 2 || id >= c.meta.pgid {
		return bad("outside the pages in use (2 to %d)", c.meta.pgid-1)
	}
	ps := uint64(c.meta.pageSize)
	le := binary.LittleEndian
	hdr := c.data[id*ps:]
	if self := le.Uint64(hdr); self != id {
		return bad("identifies itself as page %d", self)
	}
	if flags := le.Uint16(hdr[8:]); flags != freelistPageFlag {
		return bad("has type flags %#x, want a freelist page", flags)
	}
	overflow := uint64(le.Uint32(hdr[12:]))
	if id+overflow >= c.meta.pgid {
		return bad("runs %d pages past the pages in use", id+overflow-c.meta.pgid+1)
	}
	size := (overflow + 1) * ps
	idx, count := uint64(0), uint64(le.Uint16(hdr[10:]))
	if count == 0xFFFF {
		idx, count = 1, le.Uint64(hdr[pageHeaderSize:])
	}
	if count > (size-pageHeaderSize)/8-idx {
		return bad("claims %d free pages, more than fit in it", count)
	}
	for i := range count {
		if free := le.Uint64(hdr[pageHeaderSize+(idx+i)*8:]); free < 2 || free >= c.meta.pgid {
			return bad("lists page %d, outside the pages in use", free)
		}
	}
	return nil
}

// isStoreBucket reports whether name is one of the store's buckets.
func isStoreBucket(name string) bool {
	if name == string(bucketAttempts) || name == string(bucketDueByEndpoint) || name == string(bucketDueEndpoints) || isArchiveBucket(name) {
		return true
	}
	for _, b := range allBuckets {
		if string(b) == name {
			return true
		}
	}
	return false
}

// schema reads the meta bucket (when sound) and fails with ErrSchemaTooNew
// for a file of a newer build, whose values this build cannot judge.
func (c *checker) schema() error {
	c.metaVals = map[string][]byte{}
	if !c.sound[string(bucketMeta)] && !c.partial[string(bucketMeta)] {
		return nil
	}
	c.walk(string(bucketMeta), func(_ uint64, k, v []byte) {
		c.metaVals[string(k)] = bytes.Clone(v)
	})
	v, ok := c.metaVals[string(metaSchema)]
	switch {
	case !ok || len(v) != 8:
		c.problem("meta", 0, "schema", "no schema version (%d bytes)", len(v))
	case binary.BigEndian.Uint64(v) > maxSchema:
		return fmt.Errorf("%w: file has schema %d, this build understands up to %d", ErrSchemaTooNew, binary.BigEndian.Uint64(v), maxSchema)
	case binary.BigEndian.Uint64(v) == 0:
		c.problem("meta", 0, "schema", "schema version 0")
	default:
		c.keyIndex = schemaKeyIndex(binary.BigEndian.Uint64(v))
		c.endpointIndex = schemaEndpointIndex(binary.BigEndian.Uint64(v))
	}
	for _, k := range [][]byte{metaLastLSN, metaShipped, metaPending, metaUnrouted, metaDead, metaTombs, metaEndpoints, metaChangelogN} {
		if v, ok := c.metaVals[string(k)]; ok && len(v) != 8 {
			c.problem("meta", 0, string(k), "a counter of %d bytes, want 8", len(v))
		}
	}
	if v, ok := c.metaVals[string(metaShipping)]; ok && (len(v) != 1 || v[0] > 1) {
		c.problem("meta", 0, string(metaShipping), "a flag of %d bytes (%x), want one byte 0 or 1", len(v), v)
	}
	c.lastLSN = c.metaU64(metaLastLSN)
	if shipped := c.metaU64(metaShipped); shipped > c.lastLSN {
		c.problem("meta", 0, string(metaShipped), "shipped LSN %d is above the last LSN %d", shipped, c.lastLSN)
	}
	return nil
}

func (c *checker) metaU64(k []byte) uint64 {
	if v := c.metaVals[string(k)]; len(v) == 8 {
		return binary.BigEndian.Uint64(v)
	}
	return 0
}

// walk visits every key and value of the store bucket name with a page tree
// walk of its own, and counts them. Of a bucket with damaged subtrees it
// visits what lies around them (the structure walk reported the damage).
func (c *checker) walk(name string, visit func(page uint64, k, v []byte)) {
	tc := c.treeChecker()
	if c.partial[name] {
		tc.keepGoing = func(error) {}
	}
	n := 0
	tc.visit = func(page uint64, k, v []byte) {
		n++
		visit(page, k, v)
	}
	var ref *bucketRef
	for i := range c.tops {
		if string(c.tops[i].name) == name {
			ref = &c.tops[i]
		}
	}
	err := safe(func() error {
		if ref.root == 0 {
			return tc.inlinePage(*ref, name)
		}
		var nested []bucketRef
		_, err := tc.page(ref.root, nil, nil, name, &nested)
		return err
	})
	if err != nil && !c.partial[name] {
		// The structure walk found this tree sound; reading it again did not.
		c.problem(name, 0, "", "%s", detail(err))
	}
	c.keys[name] = n
}

// has reports whether bucket name holds key k (a sound store bucket).
func (c *checker) get(name string, k []byte) ([]byte, bool) {
	if !c.sound[name] {
		return nil, false
	}
	cur := c.cursors[name]
	if cur == nil {
		cur = c.tx.Bucket([]byte(name)).Cursor()
		c.cursors[name] = cur
	}
	var (
		ck, v []byte
	)
	if err := safe(func() error { ck, v = cur.Seek(k); return nil }); err != nil {
		return nil, false
	}
	return v, ck != nil && bytes.Equal(ck, k)
}

// values decodes every value of the sound store buckets and checks the
// invariants between them and the counts in meta.
func (c *checker) values() {
	visitors := []struct {
		bucket []byte
		visit  func(page uint64, k, v []byte)
	}{
		{bucketEvents, c.event},
		{bucketDue, c.due},
		{bucketDueByEndpoint, c.epDue},
		{bucketDueEndpoints, c.epHead},
		{bucketDead, c.dead},
		{bucketTombs, c.tombstone},
		{bucketTombTime, c.tombTime},
		{bucketKeys, c.keyEntry},
		{bucketEndpoints, c.endpoint},
		{bucketChangelog, c.changelogEntry},
		{bucketAttempts, c.attempt},
	}
	c.epHeads, c.epSeen = map[string]uint64{}, map[string]bool{}
	for _, v := range visitors {
		if c.sound[string(v.bucket)] || c.partial[string(v.bucket)] {
			c.walk(string(v.bucket), v.visit)
		}
	}
	c.endpointIndexAfter()
	// Each pending record has one due index entry; when they match in
	// number and none is missing, no entry names a wrong time, and the
	// records need not be decoded again to find one. Likewise the key index.
	if c.sound["due"] && c.sound["events"] && (c.dueMissing || c.keys["due"] != c.keys["events"]) {
		n := c.keys["due"]
		c.walk("due", c.dueTime)
		c.keys["due"] = n
	}
	if c.keyIndex && c.sound["keys"] && c.sound["events"] && (c.keyMissing || c.keys["keys"] != c.keyed) {
		n := c.keys["keys"]
		c.walk("keys", c.keyOwner)
		c.keys["keys"] = n
	}
	c.keys[string(bucketMeta)] = len(c.metaVals)
	for i, b := range c.rep.Buckets {
		c.rep.Buckets[i].Keys, c.rep.Buckets[i].Checked = c.keys[b.Name], c.sound[b.Name]
	}

	count := func(bucket string, counter []byte, what string) {
		if !c.sound[bucket] || !c.sound[string(bucketMeta)] {
			return
		}
		if n, want := c.keys[bucket], c.metaU64(counter); uint64(n) != want {
			c.problem("meta", 0, string(counter), "counts %d %s, the %s bucket holds %d", want, what, bucket, n)
		}
	}
	count("events", metaPending, "pending records")
	if c.sound["events"] && c.sound[string(bucketMeta)] {
		if want := c.metaU64(metaUnrouted); uint64(c.unrouted) != want {
			c.problem("meta", 0, string(metaUnrouted), "counts %d unrouted events, the events bucket holds %d", want, c.unrouted)
		}
	}
	count("dead", metaDead, "dead letters")
	count("tombstones", metaTombs, "tombstones")
	count("endpoints", metaEndpoints, "endpoint states")
	count("changelog", metaChangelogN, "changelog entries")
	index := func(bucket, of string, n, want int) {
		if c.sound[bucket] && c.sound[of] && n != want {
			c.problem(bucket, 0, "", "%d entries for %d in %s", n, want, of)
		}
	}
	index("due", "events", c.keys["due"], c.keys["events"])
	index("tombstones_by_time", "tombstones", c.keys["tombstones_by_time"], c.keys["tombstones"])
	if c.keyIndex {
		index("keys", "events", c.keys["keys"], c.keyed)
	}
	if c.endpointIndex {
		index("due_by_endpoint", "events", c.keys["due_by_endpoint"], c.keys["events"])
		index("due_endpoints", "events", c.keys["due_endpoints"], len(c.epHeads))
	}
}

// idKey names a key that is an ID.
func idKey(k []byte) string { return "ID " + strconv.Quote(string(k)) }

// timeKey names a key that is a time (8 bytes) ‖ ID.
func timeKey(k []byte) string {
	if len(k) <= 8 {
		return fmt.Sprintf("key %x", k)
	}
	return fmt.Sprintf("%s ‖ ID %q", fromNanos(binary.BigEndian.Uint64(k)).Format(time.RFC3339Nano), k[8:])
}

func (c *checker) record(bucket string, page uint64, k, v []byte) *Record {
	r, err := decodeStored(k, v)
	if err != nil {
		c.problem(bucket, page, idKey(k), "%v", err)
		return nil
	}
	if r.Version > c.lastLSN {
		c.problem(bucket, page, idKey(k), "version %d is above the last LSN %d", r.Version, c.lastLSN)
	}
	return r
}

func (c *checker) event(page uint64, k, v []byte) {
	r := c.record("events", page, k, v)
	if r == nil {
		return
	}
	if r.Key != "" {
		c.keyed++
	}
	if r.Unrouted() {
		c.unrouted++
	}
	if _, ok := c.get("due", dueKey(r.NextAttemptAt, r.ID)); !ok && c.sound["due"] {
		c.problem("events", page, idKey(k), "no due index entry for its next attempt at %s: it would never be delivered", r.NextAttemptAt.Format(time.RFC3339Nano))
		c.dueMissing = true
	}
	c.epEvent(page, r)
	if c.keyIndex && r.Key != "" && c.sound["keys"] {
		if _, ok := c.get("keys", keyIndex(r.indexKey(), r.seq, r.ID)); !ok {
			c.problem("events", page, idKey(k), "no key index entry for its key %q", r.Key)
			c.keyMissing = true
		}
	}
	if _, ok := c.get("dead", k); ok {
		c.problem("events", page, idKey(k), "the ID is also a dead letter")
	}
}

func (c *checker) due(page uint64, k, v []byte) {
	if len(k) <= 8 {
		c.problem("due", page, timeKey(k), "a due index key of %d bytes", len(k))
		return
	}
	if len(v) != 0 {
		c.problem("due", page, timeKey(k), "a due index entry with a %d-byte value", len(v))
	}
	if _, ok := c.get("events", k[8:]); !ok && c.sound["events"] {
		c.problem("due", page, timeKey(k), "names %q, which is not pending", k[8:])
	}
}

// dueTime checks that the due index entry k names the time its pending
// record is due at. It decodes the record again, so it runs only when the
// due index does not match the records (see values).
func (c *checker) dueTime(page uint64, k, _ []byte) {
	if len(k) <= 8 {
		return
	}
	ev, ok := c.get("events", k[8:])
	if !ok {
		return
	}
	if r, err := DecodeRecord(ev); err == nil && nanos(r.NextAttemptAt) != binary.BigEndian.Uint64(k) {
		c.problem("due", page, timeKey(k), "the pending record is due at %s instead", r.NextAttemptAt.Format(time.RFC3339Nano))
	}
}

func (c *checker) dead(page uint64, k, v []byte) {
	r := c.record("dead", page, k, v)
	if r != nil && r.DeadReason == "" {
		c.problem("dead", page, idKey(k), "a dead letter without a dead reason")
	}
}

func (c *checker) tombstone(page uint64, k, v []byte) {
	if len(v) != 8 || !c.sound["tombstones_by_time"] {
		if _, err := decodeTombstone(k, v, nil, true); err != nil {
			c.problem("tombstones", page, idKey(k), "%v", err)
		}
		return
	}
	why, ok := c.get("tombstones_by_time", tombIndexKey(v, k))
	if !ok {
		c.problem("tombstones", page, idKey(k), "not in the tombstone time index: it would never be trimmed")
		return
	}
	if _, err := decodeTombstone(k, v, why, ok); err != nil {
		c.problem("tombstones", page, idKey(k), "%v", err)
	}
}

func (c *checker) tombTime(page uint64, k, v []byte) {
	if len(k) <= 8 {
		c.problem("tombstones_by_time", page, timeKey(k), "a tombstone index key of %d bytes", len(k))
		return
	}
	tv, ok := c.get("tombstones", k[8:])
	if !c.sound["tombstones"] {
		return
	}
	if !ok {
		c.problem("tombstones_by_time", page, timeKey(k), "names %q, which has no tombstone", k[8:])
		return
	}
	t, err := decodeTombstone(k[8:], tv, v, true)
	switch {
	case err != nil:
		c.problem("tombstones_by_time", page, timeKey(k), "%v", err)
	case nanos(t.deletedAt) != binary.BigEndian.Uint64(k):
		c.problem("tombstones_by_time", page, timeKey(k), "the tombstone is dated %s instead", t.deletedAt.Format(time.RFC3339Nano))
	}
}

func (c *checker) keyEntry(page uint64, k, v []byte) {
	name := fmt.Sprintf("key index entry %x", k)
	if !c.keyIndex {
		c.problem("keys", page, name, "a key index entry in a file that keeps no key index")
		return
	}
	if len(k) < 2 || len(k) < 2+int(binary.BigEndian.Uint16(k))+8+1 {
		c.problem("keys", page, name, "a key index key of %d bytes cannot hold its key, sequence and ID", len(k))
		return
	}
	n := int(binary.BigEndian.Uint16(k))
	key, seq, id := k[2:2+n], binary.BigEndian.Uint64(k[2+n:]), k[2+n+8:]
	name = fmt.Sprintf("key %q, sequence %d, ID %q", key, seq, id)
	if len(v) != 0 {
		c.problem("keys", page, name, "a key index entry with a %d-byte value", len(v))
	}
	if _, ok := c.get("events", id); !ok && c.sound["events"] {
		c.problem("keys", page, name, "names %q, which is not pending", id)
	}
}

// keyOwner checks that the key index entry k names the key and sequence of
// its pending record. It decodes the record again, so it runs only when the
// key index does not match the records (see values).
func (c *checker) keyOwner(page uint64, k, _ []byte) {
	if len(k) < 2 || len(k) < 2+int(binary.BigEndian.Uint16(k))+8+1 {
		return
	}
	n := int(binary.BigEndian.Uint16(k))
	key, seq, id := k[2:2+n], binary.BigEndian.Uint64(k[2+n:]), k[2+n+8:]
	ev, ok := c.get("events", id)
	if !ok {
		return
	}
	if r, err := DecodeRecord(ev); err == nil && (r.indexKey() != string(key) || r.seq != seq) {
		c.problem("keys", page, fmt.Sprintf("key %q, sequence %d, ID %q", key, seq, id),
			"the pending record has key %q and sequence %d", r.indexKey(), r.seq)
	}
}

func (c *checker) endpoint(page uint64, k, v []byte) {
	name := "endpoint " + strconv.Quote(string(k))
	ep, err := decodeEndpoint(v)
	if err != nil {
		c.problem("endpoints", page, name, "%v", err)
		return
	}
	if ep.Name != string(k) {
		c.problem("endpoints", page, name, "holds the state of endpoint %q", ep.Name)
	}
}

func (c *checker) changelogEntry(page uint64, k, v []byte) {
	if len(k) != 8 {
		c.problem("changelog", page, fmt.Sprintf("key %x", k), "a changelog key of %d bytes, want 8", len(k))
		return
	}
	lsn := binary.BigEndian.Uint64(k)
	name := fmt.Sprintf("LSN %d", lsn)
	en, err := DecodeEntry(v)
	if err != nil {
		c.problem("changelog", page, name, "%v", err)
		return
	}
	switch {
	case en.LSN != lsn:
		c.problem("changelog", page, name, "holds the entry of LSN %d", en.LSN)
	case lsn > c.lastLSN:
		c.problem("changelog", page, name, "above the last LSN %d", c.lastLSN)
	case en.Version != lsn || (en.Record != nil && en.Record.Version != lsn):
		c.problem("changelog", page, name, "the entry's version is not its LSN")
	}
}

// attempt checks one attempt log value: it decodes, sits under its own key,
// and belongs to an event that is pending, dead or tombstoned (otherwise no
// trim would ever remove it). A file from before the attempt log has no
// attempts bucket, and that is no problem.
func (c *checker) attempt(page uint64, k, v []byte) {
	name := fmt.Sprintf("attempt %x", k)
	if len(k) < 2+1+8 || len(k) != 2+int(binary.BigEndian.Uint16(k))+8 {
		c.problem("attempts", page, name, "an attempt key of %d bytes cannot hold its ID and sequence", len(k))
		return
	}
	id := k[2 : len(k)-8]
	name = fmt.Sprintf("ID %q, attempt %d", id, binary.BigEndian.Uint64(k[len(k)-8:]))
	if _, err := decodeAttemptAt(k, v); err != nil {
		c.problem("attempts", page, name, "%v", err)
		return
	}
	if !c.sound["events"] || !c.sound["dead"] || !c.sound["tombstones"] {
		return
	}
	_, pending := c.get("events", id)
	_, dead := c.get("dead", id)
	_, tomb := c.get("tombstones", id)
	if !pending && !dead && !tomb {
		c.problem("attempts", page, name, "the event is neither pending, dead nor tombstoned: it would never be trimmed")
	}
}
