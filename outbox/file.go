package outbox

import (
	"time"

	"github.com/outboxd/outbox/store"
)

// CheckOptions configure Check. The zero value is ready to use.
type CheckOptions struct {
	// LockTimeout is how long Check waits for the file's lock before it
	// fails with ErrLocked. The lock is shared: inspections (Config.ReadOnly)
	// and other checks may run at the same time, a process that has the file
	// open for writing may not. Default: 1s.
	LockTimeout time.Duration
	// MaxProblems is the most problems a report lists; those found beyond it
	// are only counted (CheckReport.Omitted). Default: 100.
	MaxProblems int
}

// CheckReport is what Check found in a database file.
type CheckReport struct {
	// Path is the file checked.
	Path string
	// FileSize is its size in bytes.
	FileSize int64
	// PageSize is the file's page size, and Pages the number of pages in
	// use; both 0 when the meta pages could not be read.
	PageSize int
	Pages    uint64
	// Buckets lists what was read of each bucket of the file, in name
	// order.
	Buckets []CheckBucket
	// Problems lists the problems found, in the order found, at most
	// CheckOptions.MaxProblems of them.
	Problems []CheckProblem
	// Omitted counts the problems found beyond those listed.
	Omitted int
	// Skipped names the checks that were not run, and why: a check that
	// would read through damaged pages is left out.
	Skipped []string
}

// Damaged reports whether Check found any problem.
func (r *CheckReport) Damaged() bool { return len(r.Problems) > 0 }

// CheckBucket is what Check read of one bucket (one tree of the file:
// "events", "due", "changelog", ...).
type CheckBucket struct {
	// Name is the bucket's name.
	Name string
	// Keys counts the keys read.
	Keys int
	// Checked is false when not every value of the bucket was read and
	// checked: its page tree is damaged, or it is not one of the outbox's.
	Checked bool
	// Damaged reports a damaged page tree. Keys then counts the keys read in
	// the pages around the damage (0 when its root page is damaged).
	Damaged bool
}

// CheckProblem is one inconsistency Check found.
type CheckProblem struct {
	// Bucket is the bucket the problem is in, or "" for the file as a whole
	// (meta pages, page tree, free pages).
	Bucket string
	// Page is the page that holds the key, 0 when the problem is not on one
	// page or the page is not known.
	Page uint64
	// Key names the key in words (`ID "evt-1"`, "LSN 42", ...); "" when the
	// problem is not about one key.
	Key string
	// What says what is wrong.
	What string
}

// String returns the problem on one line: where (bucket, page, key), then
// what.
func (p CheckProblem) String() string {
	return store.Problem{Bucket: p.Bucket, Page: p.Page, Key: p.Key, What: p.What}.String()
}

// Check verifies the database file at path offline and reports every
// problem it finds, up to opts.MaxProblems. It opens the file read-only
// under a shared lock and writes nothing; it never reads through a damaged
// page, and never crashes on a damaged file. It checks the meta pages and
// the file's length, the page tree of every bucket, every value decoded
// with the outbox's own codecs and the invariants between them (each
// pending event has its due index entry, counts match, ...), and bbolt's
// own consistency check. Its cost grows with the file: it reads every page
// in use once (seconds for a million pending events).
//
// For a healthy file it returns the report and nil; for a damaged one the
// report and an error matching ErrDamaged that names the file, the number
// of problems and the first. A file that cannot be checked gives a nil
// report and an error naming it that matches ErrLocked (another process has
// it open for writing), ErrNotDatabase or ErrSchemaTooNew when that is the
// cause.
func Check(path string, opts CheckOptions) (*CheckReport, error) {
	rep, err := store.Check(path, store.CheckOptions{LockTimeout: opts.LockTimeout, MaxProblems: opts.MaxProblems})
	if rep == nil {
		return nil, wrapStoreErr("check", err)
	}
	out := &CheckReport{
		Path: rep.Path, FileSize: rep.FileSize, PageSize: rep.PageSize, Pages: rep.Pages,
		Buckets: make([]CheckBucket, len(rep.Buckets)), Problems: make([]CheckProblem, len(rep.Problems)),
		Omitted: rep.Omitted, Skipped: rep.Skipped,
	}
	for i, b := range rep.Buckets {
		out.Buckets[i] = CheckBucket{Name: b.Name, Keys: b.Keys, Checked: b.Checked, Damaged: b.Damaged}
	}
	for i, p := range rep.Problems {
		out.Problems[i] = CheckProblem{Bucket: p.Bucket, Page: p.Page, Key: p.Key, What: p.What}
	}
	return out, wrapStoreErr("check", err)
}

// Compact rewrites the database file at path offline into a compact copy
// (path+".compact"), syncs it and renames it over path, giving back the
// space of deleted events. It holds the file's lock while it works, so it
// fails with ErrLocked while a process has the file open; do not open the
// file while it runs. A damaged file is refused before anything is written,
// with Check's error (matching ErrDamaged): the copy would carry the damage
// over the original.
func Compact(path string) error {
	return wrapStoreErr("compact", store.Compact(path))
}
