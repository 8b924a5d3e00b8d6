// Package runexample runs an example's binary the way a user does, for the
// examples' end-to-end tests: it builds the binary once per test process
// (under -race when the tests run under -race), starts it with its standard
// output captured line by line, and stops it with SIGINT, expecting a clean
// exit.
//
// It is meant for tests only; the examples themselves never import it.
package runexample
