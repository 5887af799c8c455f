// Package vsr is Viewstamped Replication as a pure state machine: requests, acks and
// time go in; prepares to journal, commit points and replies come out. It never
// touches a socket, a file or the clock, so a whole cluster can run in one goroutine
// from one seed in a simulation, and the server's shards carry out its effects
// through their rings.
//
// A single-node iggy-shard is a cluster of one replica on the same path:
//
//	admit (ClientTable.Preflight) -> Replica.Prepare -> journal append
//	  -> Replica.OnJournaled (own ack; with n replicas, PrepareOks too)
//	  -> Replica.NextCommit -> apply -> Replica.OnApplied
//	  -> reply (Replica.FillReply), cached by ClientTable.CommitRequest
//
// so adding replicas later changes no handler. Built today: the normal case
// (numbering, the prepare hash chain, ack counting with the reference server's
// flexible quorums, the commit point, apply order) and the metadata plane's client
// table with its ICT2 encoding. Not built yet: view change, journal repair, state
// transfer and session forwarding.
package vsr
