// Package runexample runs an example's binary the way a user does, for the
// examples' end-to-end tests: it starts the binary (built by
// testkit.BuildBinary) with its standard output captured, and stops it with
// SIGINT, expecting a clean exit; or runs its demo to the end and checks
// what it printed.
//
// It is meant for tests only; the examples themselves never import it.
package runexample
