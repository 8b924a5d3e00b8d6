//go:build !race

package runexample

// raceEnabled: the test runs under -race, and so does the binary it builds.
const raceEnabled = false
