// Command outboxd is the outbox sidecar: it takes events over a local HTTP
// API (or from Kafka), keeps them in a bbolt file and delivers them to HTTP
// endpoints until they are acknowledged. Run "outboxd serve -h" for the
// settings; outboxd.example.yaml documents the configuration file.
package main

import (
	"os"

	"github.com/outboxd/outbox/cmd/outboxd/internal/cli"
)

func main() {
	os.Exit(cli.Main(cli.Env{
		Args:   os.Args[1:],
		Getenv: os.LookupEnv,
		Stdout: os.Stdout,
		Stderr: os.Stderr,
		Exit:   os.Exit,
	}))
}
