// Package balance is the consumer group's partition assignor, protocol
// "outbox-warm", and the member metadata it is built on.
//
// Each member announces, in the UserData it joins the group with
// (MemberData, as JSON), the partitions of the ingest topic it holds a
// checkpointed store for, with the changelog offset of each checkpoint,
// and the base URL of its HTTP API. The leader's Balancer gives every
// member its fair share of the ingest topic's partitions (the counts of
// kafka-go's range assignor) and, within it, the partitions it holds warm,
// most caught-up holder first, so that at a rebalance partitions come back
// to where their stores are and only a lost member's partitions are
// rebuilt.
//
// With standby replicas, the leader also gives each partition up to that
// many standbys: members other than its owner, each at most once, spread
// evenly, preferring the members that hold the partition warm already. A
// standby travels in the assignment as the changelog topic's partition of
// the same number, so a member that keeps standbys subscribes to the
// changelog topic too, and only such members get standbys.
//
// Decoding a member's metadata accepts the older form (a bare map of warm
// partitions) and ignores fields it does not know, so members of
// different versions can share a group; anything unusable holds nothing
// warm and announces no address.
package balance
