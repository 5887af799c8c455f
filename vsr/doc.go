// Package vsr is Viewstamped Replication as a pure state machine: requests, frames
// from peers and ticks go in; journal writes, frames to send, commits to apply come
// out. It never touches a socket, a file or the clock, so a whole cluster runs in one
// goroutine from one seed in sim/, and the server's shards carry out its effects
// through their rings.
//
// # The core
//
// Core is one replica of one consensus group, in the shape of etcd raft's RawNode:
//
//	Propose(p, body, now)  the primary numbers a request (hash chain, identity)
//	Step(header, body)     a validated replica-plane frame from a peer
//	Tick()                 one logical tick (10 ms in the reference)
//	Ready()                the recorded work, in the order it must be done
//	                         (the Driver, below, does it)
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
// without having been written, and a frame's effects would be dropped. A group of
// one replica commits its own durable writes at Advance; their commits come out in
// the next Ready.
//
// The metadata plane (package metaplane) is such a group of one replica on a
// single node:
//
//	admit (ClientTable.Preflight, on the committed state) -> Propose (several in
//	  flight) -> Ready: one journal append + fdatasync off the shard -> Advance
//	  -> Ready.Committed: apply -> reply, cached by ClientTable.CommitRequest
//
// # The Driver: one way to carry out a Ready
//
// Driver is the one loop that carries out a Core's Readies, through a Host (the
// journal, the network, the state machine) whose Persist, Apply and Install may
// complete at once or later (an io_uring write, a file task off the shard, a
// simulated disk). It does each Ready in this order, for these reasons:
//
//  1. Ready. From here until Advance the core takes no input: the Driver holds
//     every input that comes (below).
//  2. Early prepares, when the Ready has durable work: a Prepare in a Ready that
//     changes no durable state promises nothing (a backup acknowledges with a
//     PrepareOk, which waits for its own write; a primary counts its own append
//     only at Advance), so it leaves now and the next replica of the chain journals
//     the op while this one does: a commit costs one journal write on its way, not
//     one per hop (Ready.SendableEarly; TigerBeetle's replicas replicate a prepare
//     before they write it). A Ready that changes the view state sends nothing
//     early: its Prepare is of a view not durable here yet.
//  3. Host.Persist, only for a Ready with durable work, does 3 to 6 in one call.
//     First the cut, Discards and Truncate, durable no later than the state:
//     Recover takes every journal entry at or above the durable commit point for
//     the log view's, so a new log view durable over entries its view change
//     removed would bring them back at a restart (an op above the new head as the
//     head). Which of the two goes first does not matter (a discard above the
//     truncation is in it).
//  4. State with ViewHeaders, atomically: a replica never goes back to an older
//     view, and one that adopted a view before it repaired the view's bodies must
//     still know the view's head and headers after a crash (its DoViewChange
//     speaks for that log).
//  5. The Writes.
//  6. fsync: 4 and 5 in either order, both durable before 7, which promises them.
//  7. The other messages: each may promise what 3 to 6 made durable (a PrepareOk
//     that the op is journaled, and a commit quorum counts it; a DoViewChange or
//     a StartView the view and its log; a repair answer the bodies).
//  8. Host.Apply, the committed ops in op order: after 6, since an op's body may
//     be among this Ready's writes (a backup learns the commit point with a
//     prepare); after 7, so that a slow apply (a state machine that writes, a
//     checkpoint) does not hold up the peers waiting for this replica's frames.
//  9. Host.Install of a transferred state: after 8 (the core counted those ops
//     applied when it handed out the Ready, and the state, at or above them,
//     replaces what they built), before Advance, which resumes the core from the
//     installed op: it must be durable by then. A failed install stops the Driver
//     rather than leave the core believing in a state the host does not have.
//  10. Host.Forwarded, the answers to the logins and logouts this replica
//     forwarded: after 8, so that an origin that applied the Register in this
//     Ready answers its client with a session its own table holds.
//  11. Advance: the core counts the writes durable (a primary's own append is one
//     ack; a group of one commits), takes an installed state, and a primary
//     answers the forwards whose ops it applied (their answer reads the client
//     table, which holds them now).
//  12. The StateRequests, answered with Host.OfferState: after Advance, since an
//     offer is an input of the core (it sends a target), and the state offered is
//     the applied one, this Ready's commits included.
//  13. Host.Advanced: the host rearms the group's timer and releases what the
//     Ready aliased.
//  14. The inputs held meanwhile: the proposals waiting for pipeline room first
//     (they are older), then the others in arrival order, then the next Ready,
//     which carries all of them in one write and one fsync.
//
// Inputs while a Ready is out (Step, Tick, Propose, the forwards, TakeOver,
// Heartbeat, RequestTransfer) are held, never a panic, and fed in arrival order
// after Advance. Held frames are copied (the Driver's buffers, reused, up to
// DriverConfig.FrameBuffersKeptMaxBytes kept between Readies: a host of many idle
// groups keeps few); beyond DriverConfig.FramesQueuedMax a frame is dropped and
// counted (DropFramesQueueFull): its sender retransmits. A local request is never
// dropped: beyond RequestsQueuedMax Propose and the forwards refuse at once. A
// proposal does not know its op until it is proposed, so the host learns it
// through Host.Proposed (at once when no Ready is out); it hands the request over
// only then (Host.Proposal), so that one stamped with the prepared position (a
// partition's batch) is stamped when it is numbered. With WaitForRoom a proposal
// that finds the pipeline full, or a checkpoint due, waits in order for room; a
// Host that is a ProposalGate may hold the head of the line back although there
// is room (a partition's primary that cannot stamp a batch yet), and it waits the
// same way. NoteLiveness and Checkpointed record nothing a Ready carries: they are
// taken at once. A host that crashes or stops mid-Ready calls Stop: the Ready goes
// no further (its messages not sent never leave), held requests are answered with
// the error, and late completions are ignored. A failed Persist stops the Driver
// the same way.
//
// Every Core runs behind a Driver: the metadata plane (package metaplane, which
// the server and the simulator both run), the partition groups
// (partition/group.go) and the core's tests. Before it, four loops carried out
// Readies, and they differed in ways the order above now settles: the
// simulator's did not send prepares early (slower, and its crash on sync lost the
// early prepares a real node would have sent); the core's tests ignored the cut
// and left StateRequests unanswered unless a test asked; the partition groups'
// truncated before they discarded, did not send prepares early either, and
// applied after Advance; the server's metadata loop fed held inputs by kind, not
// in arrival order, dropped frames beyond its bound uncounted, and truncated its
// journal without an fsync before it replaced the state record (on a filesystem
// that does not keep metadata operations in order, a crash between them
// restarted the new log view over the old tail: step 3).
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
//
// # The files
//
// The core is one struct, Core, whose state is split by sub-protocol: each
// sub-protocol's file holds its handlers and the sub-struct of the state it owns;
// the replica's view, status, head and commit points are Core's own, read by all.
//
//   - core.go: the configuration, Core and NewCore, the accessors.
//   - step.go: the inputs and where each goes: Step's switch on the command, Tick's
//     timeouts, Propose. Start reading here.
//   - log.go: the slots and the hash chain (Core.log).
//   - normal.go: the normal case: propose, prepare, ack, commit, the pipeline and
//     the replication chain (Core.normal).
//   - viewchange.go: StartViewChange, DoViewChange, StartView and its adoption;
//     merge.go: the merge of the votes into the new view's log (Core.vc);
//     committed.go: why a peer's log that contradicts the applied ops is refused,
//     and a transferred state that contradicts the log.
//   - repair.go: repair rounds, the candidates below the trusted range, serving a
//     peer's repair (Core.repair).
//   - transfer.go: state transfer, fetched and offered (Core.transfer).
//   - recovery.go: a restart from the journal, and the probes for a view.
//   - forward.go: logins, logouts and session ends forwarded to the primary
//     (Core.forwards).
//   - timeouts.go: Timing and the deadlines Tick fires (Core.timeouts).
//   - ready.go: Ready and Advance, the durable state to persist, message building
//     (Core.out).
//   - drops.go, checkpoint.go, takeover.go: dropped inputs, the checkpoint rule,
//     a primaryship moved on purpose.
//   - driver.go: Driver, the one Ready loop; timers.go: Timers, a shard's clock of
//     many groups; journal.go: the journal's format; clienttable.go, ict2.go: the
//     replicated client table.
package vsr
