//go:build !faultnosync

package store

// forceNoSync is false in every build but the fault suite's planted-loss
// one (see faultnosync.go).
const forceNoSync = false
