// Package ship ships an outbox's changelog to the changelog topic.
//
// A Shipper tails the store's changelog from the last shipped LSN and
// produces each entry as a changelog record (package
// kafka/internal/changelog), acknowledged by all in-sync replicas. It
// records the shipped LSN in the store only once the broker has
// acknowledged it, so the store's changelog trimming never passes what
// Kafka holds. A batch that fails is sent again whole, in LSN order, so
// the last record of every ID is still its latest.
//
// In group mode each partition store has its Shipper, writing through the
// group's writer with the owner's Stamp to the store's changelog
// partition. Shipping one outbox, the Shipper creates the topic compacted
// when it is missing, and a store that never shipped and whose changelog
// was trimmed first ships a snapshot of its pending and dead records, so
// that a restore misses nothing.
package ship
