//go:build !race

package testkit

// raceEnabled: the test runs under -race, and so do the binaries it builds.
const raceEnabled = false
