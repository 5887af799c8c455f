// Package metaplane is the metadata plane, sans-IO: one replica of the metadata
// group (a single node is a group of one), over the metadata state machine
// (package metadata) and the replicated client table (vsr.ClientTable), its
// consensus core driven by a vsr.Driver. It holds no socket, file, goroutine or
// clock: the server drives it on shard 0 with its io_uring loop, its journal
// writer and its password workers, and the simulator (sim/) drives the very
// same package with its simulated disks and network.
//
// # What goes in
//
//	Open(cfg, recovered, host)     the state a host read back from its disk
//	Write(token, request)          a client's metadata write or Logout
//	Register(token, header, user)  a login the host verified (credentials)
//	ReadBarrier(then)              a backup's wait for its primary's commit point
//	AfterAccountWrites(decide)     a login's decision, once no account write is out
//	EndSession(client, epoch, now) a closed connection's session, ended through the log
//	RevokeTokens(tokens, now, then) access tokens logged out over HTTP, revoked on every replica
//	Propose(proposal, body, then)  an op of the host's own
//	Step(header, body)             a frame from a peer
//	Tick(), NoteLiveness(replica)  time (a cluster's 10 ms ticks), a peer heard
//	Persisted(err)                 the host's Persist done
//	CheckpointWritten(at, result)  the host's WriteCheckpoint done
//	StateInstalled(err)            the host's InstallState done
//	PasswordHashed(id, ...)        the host's HashPassword done
//
// # What comes out (Host)
//
//	Persist(ready)                 journal work: the cut, the state record, the writes, fsync
//	Send(message)                  a replica-plane frame
//	WriteCheckpoint(checkpoint)    a snapshot to write, the journal cut below it
//	InstallState(install)          a transferred state to write as the checkpoint
//	Committed(commit)              every op applied: the host's views and partitions follow
//	StateReplaced()                a transferred state replaced the applied one
//	Answer(token, answer)          a request's reply, status, eviction or refusal
//	HashPassword(id, work)         argon2id work (new passwords, the root user)
//	Entropy(bytes)                 salts and access tokens
//	Advanced()                     a Ready is over: who leads may have changed
//
// # The order
//
// A request is admitted on the applied state (ClientTable.Preflight, then
// State.Admit; a new password is hashed first), then proposed through the Driver,
// which orders the work of each Ready (vsr's package doc gives the order and its
// reasons): the journal work (Host.Persist), the messages, then the committed ops
// applied in op order. Applying an op changes the state and the client table,
// caches its reply frame there, hands the commit to the host (Committed) and only
// then answers the write that proposed it (Answer): a host publishes the commit
// before any reply of it leaves. A checkpoint comes due in an Apply (every
// IntervalOps applied ops, within vsr's checkpoint rule for the header window):
// the Ready waits for it. A transferred state is installed in its Ready after the
// applies, and replaces the state whole.
package metaplane
