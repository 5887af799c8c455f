// Package vsr is Viewstamped Replication as a pure state machine: requests, frames
// from peers and ticks go in; journal writes, frames to send, commits to apply come
// out. It never touches a socket, a file or the clock, so a whole cluster runs in one
// goroutine from one seed in vsr/sim, and the server's shards carry out its effects
// through their rings.
//
// # The core
//
// Core is one replica of one consensus group, in the shape of etcd raft's RawNode:
//
//	Propose(p, body, now)  the primary numbers a request (hash chain, identity)
//	Step(header, body)     a validated replica-plane frame from a peer
//	Tick()                 one logical tick (10 ms in the reference)
//	Ready()                the recorded work, in the order it must be done:
//	                         Discards/Truncate -> State+ViewHeaders+Writes durable
//	                         -> Messages sent -> Committed applied
//	Advance()              that work is done
//
// Messages are complete replica-plane frames (wire.PrepareHeader and the other
// 256-byte headers of iggy.apache.org/docs/binary-protocol/server-to-server, sealed,
// with their bodies), so the server only carries them.
//
// Built: the normal case (chain replication to (replica+1) % n, PrepareOk to the
// primary, the commit point with QuorumReplication's flexible quorums, pipeline depth
// 32, prepare retransmission with backoff, the Commit heartbeat); view change
// (StartViewChange, DoViewChange with the log suffix, log_view, nack and present
// bitsets; the canonical log of the highest log_view, truncated only where a nack
// quorum proves an op never committed; StartView; primary = view % n); restart
// (Recover, RequestStartView with the incarnation, an election after
// ViewProbeAttemptsMax probes); journal repair (RequestPrepares, RepairPrepare,
// RepairDone, RangeEvicted, repair_chunk_max per round), with the hash chain verified
// downward from a canonical head so a stale op of an older view is never applied,
// and never below the journal window (those ops share their slots with the head's,
// which the replica may have acknowledged: a replica whose next op to apply lies
// there takes a state transfer);
// faulty journal entries (CoreRecovered.Faulty: an entry found corrupt at a
// restart, or a torn one that cannot be proven never written), which a DoViewChange
// neither presents nor nacks (the replica may have acknowledged the op, and a nack
// is the authority to truncate) and repair fills in.
//
// Also built: state transfer for a replica a peer answered RangeEvicted
// (RequestStateTransfer, StateTransferTarget with the ISM1 manifest,
// RequestStateChunk/StateChunk one chunk in flight, every artifact verified whole;
// the caller makes the state on Ready.StateRequests with OfferState and installs
// Ready.Install), and session forwarding (ForwardRegister/ForwardLogout at a backup,
// proposed by the primary, answered once applied; Ready.Forwards at the origin).
//
// Hooks for a caller whose applied state is large and lives outside the journal (a
// partition's segment log): a Storage that is a RetainingStorage names the oldest
// op it still holds a body of, so that a peer asking for older ones is answered
// RangeEvicted and takes a state transfer; an offered Artifact may be an
// ArtifactSource, read a chunk at a time as the requester asks; a requester whose
// Storage is an ArtifactHolder does not fetch an artifact it holds byte for byte
// (installed as Local); and a backup that finds its applied state does not continue
// the primary's log asks for a state with RequestTransfer.
//
// # The caller's contract
//
// Between Ready and its Advance the core takes no input: Propose, Step, Tick and
// the forwards panic there (an invariant of the caller, not bad input). Advance
// clears the whole Ready, so a proposal taken meanwhile would be marked durable
// without having been written, and a frame's effects would be dropped. A caller
// whose Ready work is asynchronous (a journal write and fdatasync on another
// goroutine) holds its inputs back while the Ready is out and feeds them after
// Advance; the next Ready then carries all of them in one write and one fdatasync.
// A group of one replica commits its own durable writes at Advance; their commits
// come out in the next Ready.
//
// The server's metadata plane (server/metaplane.go) is such a group of one
// replica on a single node:
//
//	admit (ClientTable.Preflight, on the committed state) -> Propose (several in
//	  flight) -> Ready: one journal append + fdatasync off the shard -> Advance
//	  -> Ready.Committed: apply -> reply (Core.FillReply), cached by
//	  ClientTable.CommitRequest
//
// The client table (ClientTable, ICT2) is part of the replicated state: every replica
// applies the same commits to it.
//
// # Dropped inputs
//
// A frame the core refuses or ignores is never dropped silently: each is counted
// under a DropReason (a bad frame, a frame of a newer or older view, one for another
// role, an op not in the log, a gap, a replica too far behind, an input done
// already, an answer with nothing new or to a request no longer waited for, a full
// repair buffer, a failed read). Core.Drops copies the counts out without
// allocating; a dropped input changes nothing of the log, the view or the commit
// point (drops_test.go holds one input per reason).
package vsr
