package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"github.com/outboxd/outbox/outbox"
)

// checkView is a check's report as check --json shows it.
type checkView struct {
	File     string             `json:"file"`
	OK       bool               `json:"ok"`
	FileSize int64              `json:"file_size"`
	PageSize int                `json:"page_size,omitempty"`
	Pages    uint64             `json:"pages,omitempty"`
	Buckets  []checkBucketView  `json:"buckets"`
	Problems []checkProblemView `json:"problems"`
	Omitted  int                `json:"problems_omitted,omitempty"`
	Skipped  []string           `json:"skipped,omitempty"`
	Advice   []string           `json:"advice,omitempty"`
	Elapsed  float64            `json:"elapsed_seconds"`
}

type checkBucketView struct {
	Name    string `json:"name"`
	Keys    int    `json:"keys"`
	Checked bool   `json:"checked"`
	Damaged bool   `json:"damaged,omitempty"`
}

type checkProblemView struct {
	Bucket string `json:"bucket,omitempty"`
	Page   uint64 `json:"page,omitempty"`
	Key    string `json:"key,omitempty"`
	What   string `json:"what"`
}

// damagedAdvice says what to do about a damaged file.
func damagedAdvice(path string) []string {
	return []string{
		fmt.Sprintf("keep the damaged file for diagnosis: do not start outboxd serve on it again (copy it: cp %s %s.damaged)", path, path),
		"restore the file from a backup taken before the damage, or",
		"rebuild it from the changelog shipped to Kafka: outboxd restore --from-kafka --changelog-topic TOPIC --db NEW (events accepted after the last shipped LSN are not in it)",
		"outboxd compact does not repair a file: it refuses a damaged one (its copy would carry the damage over the original)",
	}
}

// check verifies a database file offline (outbox.Check): bbolt's
// consistency check plus every value decoded with the outbox's codecs. Exit 0 when healthy, 1 when
// damaged or when the file cannot be checked, 2 for usage errors.
func check(e Env, args []string) int {
	fs := flag.NewFlagSet("outboxd check", flag.ContinueOnError)
	fs.SetOutput(e.Stderr)
	db := fs.String("db", "./outboxd.db", "database `file`")
	asJSON := fs.Bool("json", false, "print JSON")
	maxProblems := fs.Int("max-problems", 100, "most problems listed (the others are counted)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(e.Stderr, "outboxd check: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	if *maxProblems < 1 {
		fmt.Fprintf(e.Stderr, "outboxd check: --max-problems: must be positive\n")
		return exitUsage
	}
	if _, err := os.Stat(*db); err != nil {
		fmt.Fprintf(e.Stderr, "outboxd check: no database at %s: %v\n", *db, err)
		return exitError
	}
	began := time.Now()
	rep, err := outbox.Check(*db, outbox.CheckOptions{LockTimeout: 500 * time.Millisecond, MaxProblems: *maxProblems})
	if rep == nil {
		fmt.Fprintf(e.Stderr, "outboxd check: %s\n", describeOpenError(*db, err))
		return exitError
	}
	v := viewCheck(rep, time.Since(began))
	if *asJSON {
		if err := writeJSONTo(e.Stdout, v); err != nil {
			fmt.Fprintf(e.Stderr, "outboxd check: %v\n", err)
			return exitError
		}
	} else {
		printCheck(e.Stdout, v)
	}
	if rep.Damaged() {
		return exitError
	}
	return exitOK
}

func viewCheck(rep *outbox.CheckReport, elapsed time.Duration) *checkView {
	v := &checkView{
		File: rep.Path, OK: !rep.Damaged(), FileSize: rep.FileSize, PageSize: rep.PageSize, Pages: rep.Pages,
		Buckets: []checkBucketView{}, Problems: []checkProblemView{}, Omitted: rep.Omitted, Skipped: rep.Skipped,
		Elapsed: elapsed.Seconds(),
	}
	for _, b := range rep.Buckets {
		v.Buckets = append(v.Buckets, checkBucketView{Name: b.Name, Keys: b.Keys, Checked: b.Checked, Damaged: b.Damaged})
	}
	for _, p := range rep.Problems {
		v.Problems = append(v.Problems, checkProblemView{Bucket: p.Bucket, Page: p.Page, Key: p.Key, What: p.What})
	}
	if rep.Damaged() {
		v.Advice = damagedAdvice(rep.Path)
	}
	return v
}

func printCheck(w io.Writer, v *checkView) {
	fmt.Fprintf(w, "checked %s (%d bytes", v.File, v.FileSize)
	if v.PageSize > 0 {
		fmt.Fprintf(w, ", %d pages of %d bytes in use", v.Pages, v.PageSize)
	}
	fmt.Fprintf(w, ") in %.1fs\n", v.Elapsed)
	if len(v.Buckets) > 0 {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		for _, b := range v.Buckets {
			state := "read"
			switch {
			case b.Damaged:
				state = "DAMAGED pages (keys read around them)"
			case !b.Checked:
				state = "the application's (pages checked, values not read)"
			}
			fmt.Fprintf(tw, "  %s\t%d keys\t%s\n", b.Name, b.Keys, state)
		}
		tw.Flush()
	}
	for _, s := range v.Skipped {
		fmt.Fprintf(w, "  skipped: %s\n", s)
	}
	if v.OK {
		fmt.Fprintln(w, "ok: no problems found (page tree, bbolt's consistency check, every value decoded, indexes and counts)")
		return
	}
	n := len(v.Problems) + v.Omitted
	fmt.Fprintf(w, "DAMAGED: %d problem(s) found in %s:\n", n, v.File)
	for _, p := range v.Problems {
		fmt.Fprintf(w, "  %s\n", outbox.CheckProblem{Bucket: p.Bucket, Page: p.Page, Key: p.Key, What: p.What})
	}
	if v.Omitted > 0 {
		fmt.Fprintf(w, "  ... and %d more (--max-problems)\n", v.Omitted)
	}
	fmt.Fprintln(w, "what to do:")
	for _, a := range v.Advice {
		fmt.Fprintf(w, "  - %s\n", a)
	}
}
