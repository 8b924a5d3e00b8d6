// Package cli implements the outboxd commands: serve, inspect, check,
// compact, restore, listen (a local receiver to try serve with) and version.
// main only hands it the process's arguments, environment, streams and
// signals.
package cli
