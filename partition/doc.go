// Package partition is one shard's partition plane: everything the shard does for
// the partitions it owns, with no knowledge of connections, sessions or users.
//
// A Store holds the shard's partitions by (stream, topic, partition) id. Each has a
// segment.Log (its segments, indexes and consumer offsets), its topic's Config, and a
// directory (iggy.apache.org/docs/server/storage-engine, "Directory layout"):
//
//	local_data/streams/{s}/topics/{t}/partitions/{p}/
//	    00000000000000000000.log     batches, exactly as stamped
//	    00000000000000000000.index   24-byte entries [offset][timestamp][position]
//	    offsets/consumers/{id}       [offset u64][XxHash3-64 of it]
//	    offsets/groups/{id}
//	    partition.journal            enforce_fsync, in a cluster: the durable journal (durable.go)
//	    partition.state              in a cluster: the group's durable state (groupstate.go)
//	    segments.deleted             in a cluster: the last DeleteSegments op applied
//	                                 (deletesegments.go); a state install keeps it
//	    purge.gen                    the server's (partitionhost/record.go); this package
//	                                 writes, replaces and removes only the files above
//	                                 (a state install: installReplaces), the whole
//	                                 directory only when the partition goes or is purged
//
// Each file is made by its first write, none when a partition is created or opened:
// a partition never written holds no file.
//
// The glue (shard/) decodes requests, resolves stream and topic ids, picks the
// partition (ResolvePartition: explicit id, Balanced with a RoundRobin, or
// MessagesKey with PartitionForKey), checks permissions, and calls:
//
//	Send                  SendMessages: validate, stamp at prepare, propose, apply at
//	                      commit; SendCompletion.SendDone fires once stored per the
//	                      topic's policy -> AppendSendReply
//	Poll                  PollMessages, every strategy, auto-commit; PollCompletion.PollDone
//	                      -> AppendPollBuffers (vectored) or AppendPollReply
//	PlanPoll, PlanStats   the same poll answered by a PollPlan (Prefix, then file Runs
//	                      to splice) when it can, else Poll; the holder releases the
//	                      plan after the kernel is done with its runs (plan.go)
//	ConsumerOffset,       GetConsumerOffset (20 bytes or empty body),
//	StoreConsumerOffset,  StoreConsumerOffset, DeleteConsumerOffset
//	DeleteConsumerOffset
//	Create, Open, Delete*, Purge*, Reconfigure, DeleteSegments,
//	ReplicateDeleteSegments, ApplyRetention, Info, Totals, Err, Recover
//	PollIO                every loop turn: runs storage completions, which fire the above
//	Tick, TicksUntilDue,  a 10 ms shard tick, when TicksUntilDue says the store has
//	NoteLiveness          work on one (the ticks slept through are made up first);
//	                      a frame from a node
//	Step                  a replica-plane frame for a partition's group (a cluster)
//	IsPrimary             whether this replica proposes a partition's ops (a cluster)
//	OpenFiles,            the file cache's and the state transfers' counts, the
//	StatesInstalled,      groups' ignored inputs by reason, and the frames Step
//	Drops, IngressDrops   refused before a group saw them, by reason: for metrics
//	                      and tests
//
// Purge restarts a partition at offset 0 with no consumer offsets, as the reference
// server does. Each partition gets its own segment.Storage from a StorageProvider
// (OSStorages, or the shard's ring-backed provider), rooted at its directory.
//
// Every error a client sees is a wire.ErrorCode chosen as the reference server
// (apache/iggy core/server/src/dispatch.rs) answers the command (sends and offset
// writes on an unknown partition: 20; polls and offset reads: 3007).
//
// # The partition group
//
// Each partition is one consensus group, vsr.Core, on the shard that owns it: group
// id wire.PartitionGroup(stream, topic, partition) tagged with the partition's
// incarnation (incarnation.go; untagged with Replication.UntaggedGroups), this replica Replication.ReplicaID
// of ReplicaCount (NewStore: a group of one, the single-node server, which commits
// its own writes at Advance), driven by a vsr.Driver: the one loop that carries out
// a Core's Readies, in the order and for the reasons vsr's package doc gives, and
// holds the inputs that come while a Ready waits for its durable writes (frames
// copied, proposals queued, never a panic), feeding them after its Advance in
// arrival order. The partition is the Driver's host (host.go): its journal, its
// files, its log and the Outbox. A send's life; the batch stays in the request
// buffer from decode to disk:
//
//	request buffer --ValidateBatch--> Driver.Propose --StampBatch when proposed (in
//	   place)--> Core.Propose (at once, or after the Ready out with those that waited)
//	   Ready.Writes: the partition journal (memory; + partition.journal, fdatasynced,
//	                 for an enforce_fsync topic) --> Ready.Messages (Prepare, PrepareOk)
//	   Ready.Committed: apply, checking the stamp --> Log.Append (one write)
//	   Hooks.Written (enforce_fsync off) or Hooks.Durable (on) --> SendDone(token, confirmation)
//	   Hooks.Failed: batches cut from the log --> SendDone(token, _, 4006)
//
// A replica's Prepare goes down the chain before its own journal file write
// (vsr.Ready.SendableEarly: it promises nothing; its PrepareOk waits for the
// write), so an enforce_fsync op commits after the replicas' fdatasyncs run side by
// side, not one after the other. The primary sends its commit point as soon as its
// pipeline drains (vsr.CoreConfig.CommitEagerly), so a backup applies an op, and a
// consumer reading from it sees the batch, about a round trip after the primary
// committed it, not at the next commit broadcast (500 ms at the defaults) with the
// batch held meanwhile. It costs a Commit frame (a header) per backup per burst: a
// producer that waits for each acknowledgement makes 6 frames an op instead of 4;
// a stream, whose next prepare carries the commit point, none. An idle group sends
// nothing either way.
//
// Prepares are pipelined: a primary has up to PipelineDepth (32) ops prepared and
// not committed, and a backup whose disk is slow does not hold them up. It
// acknowledges once journaled (in memory, or in partition.journal with
// enforce_fsync), not once its log has written; and when an op commits without the
// primary's next hop in the chain, the primary sends each prepare to every backup
// itself until the hop acknowledges again (vsr's hopSilent), so the other backup
// makes the quorum. The ops sent down the chain before that wait one prepare
// retransmission (250 ms) the first time (TestClusterCommitsPastABackupWithAStalledDisk).
// What bounds a group's pipeline is then its depth, the store's body budget on the
// backups (a prepare past it is dropped and retransmitted; the repair candidates
// the cores keep, vsr.CopyBudget, count in it), the primary's journal window (it
// prepares no op 64 or more above the last it applied: JournalSlots), and, for one
// producer, the batches it has in flight:
// an SDK client sends one batch at a time and waits for its acknowledgement, so a
// single producer's partition has one op in flight and gains nothing from the
// pipeline; many producers, or many partitions, fill it.
//
// The stamp is made at prepare: base_offset is the offset after everything prepared
// (not only applied), base_timestamp is the prepare's timestamp (the Core's
// primary-assigned timestamp, strictly increasing, first raised to the last prepared
// batch's), so the prepare's body is final: the batch as stamped by the primary at
// journal append, as iggy.apache.org/docs/binary-protocol/server-to-server asks.
// StoreConsumerOffset and DeleteConsumerOffset with AckQuorum are prepares of the
// same group (operations 161 and 162, the body their command payload with numeric
// ids), applied at commit; AckNoAck writes locally on the primary, as the reference
// does, and so does a poll's auto-commit.
//
// The journal (journal.go) holds the ops prepared and not applied; the segment log
// holds the applied ones. The Core's vsr.Storage reads bodies from the journal, and
// an applied op's batch back from the segment files (repair.go: a replicated group
// remembers where its last applied ops start, and keeps no copy of them), so that a
// peer that missed a few repairs them; a peer that missed more is answered
// RangeEvicted (vsr.RetainingStorage) and takes a state transfer of the segments and
// consumer offsets (transfer.go).
//
// In a cluster a replica's place in each group survives a restart
// (groupstate.go): partition.state holds the view, the log view and its suffix's
// headers, made durable before the Ready that moved them sends anything, and a
// checkpoint, the header of the last applied op the log has written and the log's
// end after it. A restarted replica (Store.Open; Create and a purge start a new
// group) resumes from the checkpoint when its log ends there, with the journal
// file's ops above it when the topic enforces fsync (durable.go), probes its group
// for the view (vsr.Core.Recover) and repairs or transfers what it lacks. One whose
// log it cannot place (it ends elsewhere than the checkpoint, and the journal file
// does not bridge the gap) resumes from op 0; its log does not continue the
// primary's, so it takes the primary's state. A backup that finds its log does not
// continue where the primary's prepares are stamped (ingress, or apply) asks for
// that state at once (vsr.Core.RequestTransfer) instead of stopping.
//
// # The binding of a batch to its prepare
//
// A partition prepare leaves checksum_body zero and its identity covers the 256-byte
// header alone (iggy.apache.org/docs/binary-protocol/server-to-server, "Frame
// integrity"), so the header must name its body. It does through request_checksum
// (bytes 160..176): a partition prepare carries there the stamped batch's
// batch_checksum (low 64 bits; high 64 zero), which commits to partition_id,
// base_offset, base_timestamp, origin_timestamp, batch_length, message_count and
// every frame's checksum, and so to every message byte
// (iggy.apache.org/docs/binary-protocol/messages). A consumer-offset prepare carries
// the XxHash3 of its payload (wire.BodyChecksum). The field is free on this plane: a
// partition op has no exactly-once dedup, so no client table reads request_checksum
// there. The frames stay exactly the spec's: same header layout, same body (the
// batch), checksum_body zero.
//
// A replica verifies at ingress, before its Core journals or acknowledges anything:
// the body's frame checksums and batch_checksum (wire.CheckStoredBatch), the header's
// request_checksum equal to that batch_checksum, partition_id its own, base_timestamp
// the prepare's timestamp, and, for the next op, base_offset its own prepared end;
// apply checks the stamp again against its log. So two replicas can never hold
// different batches under one header: a different batch has a different
// batch_checksum (with overwhelming probability), hence a different header identity,
// and the hash chain of parents breaks.
//
// What a reference replica would see from us: valid frames, and in request_checksum a
// value it copies without reading (its partition arm does not dedup). What we would
// see from a reference primary: the spec has it put the admitted request's
// request_checksum there verbatim, not the batch_checksum, so our ingress check would
// refuse its prepares; a mixed cluster would need the binding made optional per peer.
//
// Storage completions (the log's hooks, the journal and state files' writes) only
// record what completed: a Ready whose writes are durable finishes
// (Driver.Persisted), and a state is installed, once the storage's Poll has returned
// (Partition.resume, from PollIO and every other poll of the store's). An install closes the log and waits for its
// requests, and the shard's disk ring reaps a batch of completions before it runs
// their hooks: a wait inside one hook would wait for ever on a request of the same
// batch.
//
// Timers: the store's vsr.Timers drives every group from one shard tick (Tick) and
// touches only the groups due; a group of one replica has no timer at all. A frame
// from a node counts as a sign of life of every group whose primary is that node
// (NoteLiveness, O(1) per frame, applied lazily per group). An idle group is parked
// off the timers, PollIO visits only the partitions with something to do, and
// TicksUntilDue tells the shard when it next needs to tick, so an idle store's work
// does not grow with its partitions (activity.go).
//
// # Memory
//
// What a node holds for its partitions is a sum that does not grow with the data
// written, only with the partitions, the batches in flight and the indexes. With
// the defaults (PipelineDepth 32, so JournalSlots 64, RepairChunkMax 32), one
// replica of one partition keeps on the heap:
//
//	consensus core (vsr.Core)   275 B x JournalSlots + ~2 KiB (repair
//	                            candidates only while it repairs)               ~20 KiB
//	its vsr.Driver                                                              ~0.5 KiB
//	partition, group state, log, timers, file handles                          ~7 KiB
//	                            = 27 KB a partition created and never written
//	once written: recent ops (56 B x JournalSlots), journal ring (~330 B an entry,
//	up to 64 kept), proposal ring (88 B an entry, 4 at first), log state
//	                            = 40 KB a partition written and idle
//	                            (BenchmarkIdlePartitionMemory, bytes/partition)
//	indexes                     24 B a batch: the open segment's, and those of at
//	                            most IndexCacheSegments (16) sealed segments read lately
//
// and a store (one shard) holds, beyond its partitions:
//
//	body copies                 a backup's journal copies until written, the
//	                            repair candidates its consensus cores keep, frames a
//	                            group's Driver held while its Ready was out, batches
//	                            read back for a peer's repair:
//	                            at most Replication.BodyBudgetBytes (64 MiB) plus one
//	                            group's repair chunk (RepairChunkMax, 32 batches) and
//	                            the ops it needs below it, however many partitions
//	                            take prepares or repair at once (memory.go); the
//	                            buffers of the journal copies of 32 KiB and more
//	                            are reused once written (bodyBuffers), and given
//	                            back to the collector when not reused: none at rest;
//	                            or, when the caller lends its frames (StepLending),
//	                            the frames themselves, at most Replication.
//	                            LentBodiesMax at once, given back once written (lend.go)
//
// Not in that bound yet: a state transfer's artifacts, which the core assembles
// whole before the install.
//
// The primary's batches are its clients' request buffers, and polls read into the
// server's poll memory: both bounded by the server, not here.
//
// Not all of that heap is resident. The Go runtime takes memory from the system
// zeroed and hands it out without writing it, and a page nothing wrote takes no
// room in RAM: the consensus core's journal slots (275 B x 64 = 17.6 KB) stay so
// while a group idles. A replica of a partition created and never written is
// resident for 8.5-8.8 KB of its 27 KB of heap, and once written for 24.3-25.1 KB
// of its 40 KB (BenchmarkIdlePartitionMemory, resident-bytes/partition).
//
// A node's resident size at rest (its groups parked, its garbage collected and the
// pages it freed returned to the system) is then the sum
//
//	RSS = R0 + P x created + W x (written - created)
//
// where P counts the partitions the node holds (in a cluster every node holds a
// replica of each), W those written since they were created, R0 the node without
// partitions, ~18.5 MB on every node (16.9 to 21.0 measured: ~13 MB of the
// binary's pages, a live heap of 3.7 MB, the runtime, the shards' rings as
// touched), and per partition:
//
//	                         resident at rest      live heap
//	                         created   written     created   written
//	single node              8 KB      27 KB       25.2 KB   33.6 KB
//	backup of a cluster      9 KB      28.5 KB     26.7 KB   39 KB
//	leader of a cluster      9.5 KB    34.5 KB     26.7 KB   40 KB
//
// (the leader is the metadata primary, which leads every partition's group; a
// single node's groups keep no recent ops). BenchmarkPartitionMemory in
// internal/clustertest measures these in real nodes at 1,000 and 3,000
// partitions, written with one 100-byte message each, and checks the sum's
// prediction for every node against its resident size: 1 to 5% off at rest, 2 to
// 6% before the forced collections (the terms from two runs, checked by a third;
// per partition, over the three: 7.5-8.4 and 26.7-27.4 KB on a single node,
// 8.7-9.5 and 27.9-29.3 KB on a backup, 8.8-9.9 and 34.1-35.3 KB on the leader).
// The node adds next to nothing of live heap per partition to its store's; the
// resident terms are larger than the store's by what the runtime spends on the
// pages (free slots in the heap's spans, ~1.5 KB a written partition, and the
// collector's metadata) and, on the leader, by ~6 KB a written partition that its
// live heap does not account for (1 KB more than a backup's), which the sum takes
// as measured.
//
// How the Go runtime enters: the terms are resident pages, measured, with the
// runtime's overhead in them, not object sizes, and the sum is a floor: what a
// node holds once its garbage is collected and the pages it freed are returned.
// GOGC does not enter it. A node left alone does not always come down to it: the
// heap grows to (1 + GOGC/100) times its live size before a collection, and the
// runtime's scavenger returns freed pages on its own only past about a tenth over
// that goal (or under GOMEMLIMIT, or on debug.FreeOSMemory), so that a node keeps
// the garbage of its last bursts (topics created, a write load) and 19 MiB for
// each password check (argon2id) it did, up to
//
//	RSS <= R0 + 1.1 x (1 + GOGC/100) x (H0 + P x heap + index bytes + body copies)
//
// with H0 ~4 MB the node's own live heap and the heap column for the partitions,
// as the pages reused for them were zeroed by the runtime first (the old form of
// this sum, without the 1.1: 108 MB resident on a backup of 1,000 partitions
// written 80 one-message batches each, for at most 127 MB). A three-node cluster
// whose 1,000 partitions were created and written right after its start, then
// left alone for five minutes, held 47.6 and 57.8 MB on the backups and 64.7 MB on
// the leader, for a floor of 46.3 and 52.2 MB: the difference is what is left of
// the password checks' garbage (every new node hashes its root user's password;
// the leader also checked a login), which the partitions' pages partly took the
// place of. BenchmarkPartitionMemory brings each node to its floor before it
// creates the partitions (two to four collections through its pprof endpoint),
// and its nodes then hold their floor to within 2 to 6% without it. That garbage
// is also why BenchmarkThousandsOfPartitions found only 0.8 to 3.2 KB of resident
// size a partition while it took its base right after the login: the partitions
// filled pages that held the checks' garbage (it now takes both ends at rest).
//
// 40 partitions that took 10 MB each (1,000-message batches of 1 KB): 107-158 MB
// resident per node, where keeping the last 64 ops of each partition in memory
// (the ring this replaced) took 496-829 MB.
//
// Open files: a store keeps at most Replication.OpenFilesMax of its partitions'
// files open (segment.FileCache; by default half of RLIMIT_NOFILE split over one
// store per core, segment.FilesBudget), however many partitions it holds. A
// partition's files are its segments' .log and .index, partition.state,
// partition.journal with enforce_fsync, and one per consumer whose offset it
// stores; every one is a handle that the cache opens on demand and closes, least
// recently used first, to make room (a request in flight pins its file). What a
// partition needs open is what it is using: a partition that takes sends, its open
// segment's .log (and partition.journal with enforce_fsync, partition.state at a
// checkpoint, an offset file as it is stored, the .index at a seal); a poll, the
// segment it reads; an idle partition and a sealed segment nobody reads, none. So
// the budget bounds the partitions busy at once without reopening, about a half
// to a third of it, not the partitions held: 10,000 partitions on two shards under
// a limit of 20,000 descriptors take 5,000 each (FilesBudget(2)), and a partition
// that wakes after the budget moved on opens its files again (about 4 us each,
// BenchmarkFileCacheWrite). Without the cache, 10,000 written partitions of one
// segment each held about 30,000 descriptors. The budget is exceeded only while
// every open file has a request in flight: the extra file closes once its
// requests are done (FileCacheStats.OverBudget counts them). Transient
// descriptors come on top: a directory fsynced when a file or partition is
// created, a segment hashed for a state transfer.
//
// Pending sends wait in per-partition rings in offset order (proposals the Driver has
// not proposed yet, journal entries, sends applied and not acknowledged), with the
// caller's completion interface and token, so admitting a batch allocates nothing.
//
// A poll's life: Log.ReadAsync reads the batches into the caller's PollResult,
// verifies the checksums not verified before, and slices the batches at either
// end of the range (wire.SliceBatch); the reply is the 16-byte prefix followed
// by each record's header and frames, sent as they lie in the read buffer. A
// poll of whole batches, all verified and durable, of at least
// PlanConfig.ReplyBytesMin, can instead be answered by PlanPoll without reading
// them: the prefix, then runs of the segment files to splice (plan.go).
package partition
