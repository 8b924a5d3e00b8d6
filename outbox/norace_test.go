//go:build !race

package outbox_test

// raceEnabled scales the largest scenarios down under the race detector,
// which slows loopback HTTP about sevenfold.
const raceEnabled = false
