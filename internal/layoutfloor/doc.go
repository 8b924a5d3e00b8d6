// Package layoutfloor writes events to a bbolt file the way the store lays
// them out, and does nothing else: per event its record under its ID, a
// due index key and a changelog entry, with the store's bbolt options and
// fill percents, one durable transaction per Write. Benchmarks measure the
// store and outboxd against it: what the store adds (checks, counters,
// encoding, the group committer) is the store's own cost, and the rest is
// what any implementation of the design's layout in one bbolt file pays.
package layoutfloor
