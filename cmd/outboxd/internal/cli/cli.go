package cli

import (
	"fmt"
	"io"

	"github.com/outboxd/outbox/cmd/outboxd/internal/config"
)

// Env is what a command gets from its process.
type Env struct {
	// Args are the arguments after the program name.
	Args []string
	// Getenv looks up environment variables.
	Getenv config.Env
	// Stdout and Stderr are the output streams.
	Stdout, Stderr io.Writer
	// Exit ends the process at once (a second signal during shutdown).
	Exit func(code int)
}

// Exit codes.
const (
	exitOK    = 0
	exitError = 1 // the command failed
	exitUsage = 2 // bad arguments or settings
)

const usage = `outboxd: a durable retry-and-delete outbox sidecar

Usage:
  outboxd serve [flags]             run the HTTP API and deliver events (-h for the settings)
  outboxd inspect --db FILE [--id ID] [--state pending|dead|unrouted] [--unrouted] [--topic T] [--limit N] [--json]
                                    read-only view of a database file (server stopped)
  outboxd inspect --cluster --kafka-brokers HOSTS --kafka-topic TOPIC [--kafka-group G] [--json]
                                    a Kafka group's partitions: owners, lag, pending, dead
  outboxd check --db FILE [--json] [--max-problems N]
                                    verify a database file: pages, every value, indexes
                                    (server stopped; exit 0 healthy, 1 damaged)
  outboxd compact --db FILE         compact a database file (server stopped)
  outboxd listen [--addr ADDRESS] [--secret whsec_...] [--status CODE]
                                    a local receiver to try serve with: prints each
                                    delivery, verifies its signature, answers CODE
  outboxd restore --from-kafka --changelog-topic TOPIC --db NEW [--kafka-brokers HOSTS]
                                    rebuild a database from its shipped changelog
  outboxd healthcheck [--url URL]   exit 0 when a running outboxd answers GET /healthz
  outboxd token                     print a new random token for --token / OUTBOXD_TOKEN
  outboxd version                   print the version
`

// Main runs the command named by e.Args[0] and returns the exit code.
func Main(e Env) int {
	if len(e.Args) == 0 {
		fmt.Fprint(e.Stderr, usage)
		return exitUsage
	}
	cmd, args := e.Args[0], e.Args[1:]
	switch cmd {
	case "serve":
		return serve(e, args)
	case "inspect":
		return inspect(e, args)
	case "check":
		return check(e, args)
	case "compact":
		return compact(e, args)
	case "restore":
		return restore(e, args)
	case "listen":
		return listen(e, args)
	case "token":
		return token(e, args)
	case "healthcheck":
		return healthcheck(e, args)
	case "version", "--version", "-version":
		return version(e)
	case "help", "-h", "--help", "-help":
		fmt.Fprint(e.Stdout, usage)
		return exitOK
	}
	fmt.Fprintf(e.Stderr, "outboxd: unknown command %q\n\n%s", cmd, usage)
	return exitUsage
}
