package cputime

import (
	"syscall"
	"time"
)

// Process returns the CPU time used so far by this process, user plus
// kernel, across all its threads; 0 when the system will not say.
func Process() time.Duration {
	h, err := syscall.GetCurrentProcess()
	if err != nil {
		return 0
	}
	var created, exited, kernel, user syscall.Filetime
	if err := syscall.GetProcessTimes(h, &created, &exited, &kernel, &user); err != nil {
		return 0
	}
	// A Filetime here is a duration in 100 ns units (Filetime.Nanoseconds
	// would subtract the Windows epoch from it).
	ticks := func(f syscall.Filetime) int64 { return int64(f.HighDateTime)<<32 | int64(f.LowDateTime) }
	return time.Duration((ticks(kernel) + ticks(user)) * 100)
}
