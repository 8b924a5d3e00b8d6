//go:build unix

package cputime

import (
	"syscall"
	"time"
)

// Process returns the CPU time used so far by this process, user plus
// system, across all its threads; 0 when the system will not say.
func Process() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
