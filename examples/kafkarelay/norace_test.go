//go:build !race

package main

// raceEnabled: the test runs under -race, and so does the binary it builds.
const raceEnabled = false
