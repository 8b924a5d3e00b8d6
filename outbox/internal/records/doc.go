// Package records turns the caller-owned fields of events into the store's
// records: it validates the fields against the outbox's limits and header
// rules (and subscriptions against the same rules), builds the record of
// an event (or updates a pending one in place, for an upsert), and builds
// the records of one enqueue call, one per delivery for a topic event. It
// knows nothing of the outbox's own types: the outbox hands it plain
// Fields and turns its *Invalid answers into its own validation errors.
package records
