//go:build faultnosync

package store

// forceNoSync is set by the faultnosync build tag, which only the fault
// suite uses: it builds an outboxd whose stores never fsync (as with
// Options.NoSync), to show that its power-cut scenarios report the loss
// that follows. No release build carries the tag, and no flag sets it.
const forceNoSync = true
