// Package metadata is the metadata plane's state machine: streams, topics (with
// their options), partitions, consumer groups, users, permissions, personal
// access tokens, and the access tokens logged out over HTTP until they expire
// (revocations.go). It lives on shard 0 and is pure: operations and time come in as
// arguments, replies and effects go out as values, and it never touches a file,
// a socket or the clock.
//
// The way of a metadata write (DESIGN.md, "The way of a request"):
//
//	client body --Admit--> status denial (3, 4041, 4042, 1019, 2015, 52)
//	            --Propose*--> proposal body (password hashed, token minted)
//	            --vsr prepare, journal, commit-->
//	            --Apply--> Output{Operation, Result, Reply, Effects}
//
// Apply is deterministic, so a replica rebuilds the state by replaying committed
// operations over the latest snapshot (AppendSnapshot / DecodeSnapshot); the journal
// and the snapshot files are the server's. Authorization of a write is decided in Apply
// from the prepare's user id (root, id 0, holds everything, as in apache/iggy
// core/metadata/src/permissioner/) and a denial commits as result 41, like any business
// rejection. Reads (GetStream, GetTopics, SyncConsumerGroup, ...) are served by
// State.Read and the Append* methods, which deny with a status instead.
//
// Ids follow the reference server: streams, topics and users take the lowest free
// id; consumer group ids only grow within a topic; a topic's partitions are always
// 0..n-1 (new ones take the next ids, DeletePartitions removes the highest).
//
// Consumer groups are keyed by the request header's client id. Partitions are
// assigned round-robin over the members in member id order (the lowest free slot
// when each joined): partition p goes to the member at position p mod n. That is
// the reference server's rule, and member ids, unlike client ids, are replicated
// state that does not depend on how clients mint their ids. Every membership change
// bumps the group's generation, and so does a partition-count change that moves an
// assignment; an idempotent re-join does not. A client that logs out (operation 3)
// or whose connection closes (RemoveConsumerGroupMember, 66, proposed by the server)
// leaves every group.
//
// Messages, sizes and offsets live in the partition shards: reads take them as a
// StatsSource. What a write asks of the shards (create or delete partition
// directories, purge by generation, delete segments) comes out as Effects.
package metadata
