package ratelimit

import (
	"fmt"
	"math"
	"time"
)

// Bounds of every rate a client or an operator gives, in events per
// second: a rate below MinPerSecond paces events further apart than a day,
// and one above MaxPerSecond is beyond what any endpoint takes.
const (
	MinPerSecond = 1.0 / 86400
	MaxPerSecond = 1_000_000
)

// MaxSpan is the longest duration Span returns: about a century, far
// beyond any pace within the bounds, and far from time.Duration's limit
// so that adding it to a time of this era cannot overflow.
const MaxSpan = 100 * 365 * 24 * time.Hour

// CheckRate returns why perSecond is not a rate within the bounds ("1e-300
// is out of range: ..."), or "".
func CheckRate(perSecond float64) string {
	if perSecond >= MinPerSecond && perSecond <= MaxPerSecond {
		return ""
	}
	return fmt.Sprintf("%g is out of range: from 1/86400 (one per day) to %d per second", perSecond, MaxPerSecond)
}

// Span returns how long n events take at perSecond: n/perSecond seconds,
// saturated at MaxSpan instead of overflowing. It is 0 for n ≤ 0 or an
// infinite rate, and MaxSpan for a rate that is not positive (0, negative,
// NaN). Every pace of the outbox is computed through it, so that no rate,
// however small, nor backlog, however long, schedules an event in the past.
func Span(n int, perSecond float64) time.Duration {
	if n <= 0 || math.IsInf(perSecond, 1) {
		return 0
	}
	if !(perSecond > 0) {
		return MaxSpan
	}
	d := float64(n) * float64(time.Second) / perSecond
	if !(d < float64(MaxSpan)) { // also catches +Inf
		return MaxSpan
	}
	return time.Duration(d)
}
