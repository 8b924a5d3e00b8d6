// Package offsets keeps the gap-aware commit position of a consumed
// partition: the highest offset below which every consumed record is
// durable in the store (and, in group mode, whose changelog entries are
// shipped). A batch that failed to store holds the position below it,
// however many later batches are durable, until it is retried
// successfully; gaps in the offsets (compaction, transaction markers)
// count as consumed.
package offsets
