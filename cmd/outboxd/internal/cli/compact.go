package cli

import (
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/outboxd/outbox/outbox"
)

// compact rewrites a database file offline (outbox.Compact) to give back
// the space of deleted events; it refuses a damaged file.
func compact(e Env, args []string) int {
	fs := flag.NewFlagSet("outboxd compact", flag.ContinueOnError)
	fs.SetOutput(e.Stderr)
	db := fs.String("db", "./outboxd.db", "database `file`")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(e.Stderr, "outboxd compact: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	before, err := os.Stat(*db)
	if err != nil {
		fmt.Fprintf(e.Stderr, "outboxd compact: no database at %s: %v\n", *db, err)
		return exitError
	}
	if err := outbox.Compact(*db); err != nil {
		fmt.Fprintf(e.Stderr, "outboxd compact: %s\n", describeOpenError(*db, err))
		return exitError
	}
	after, err := os.Stat(*db)
	if err != nil {
		fmt.Fprintf(e.Stderr, "outboxd compact: %v\n", err)
		return exitError
	}
	fmt.Fprintf(e.Stdout, "compacted %s: %d -> %d bytes\n", *db, before.Size(), after.Size())
	return exitOK
}
