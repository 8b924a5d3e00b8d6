// Package cli implements the outboxd commands: serve, inspect, compact,
// restore and version. main only hands it the process's arguments,
// environment, streams and signals.
package cli
