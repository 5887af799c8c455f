// Package sim runs a whole cluster in one goroutine from one seed: on every node the
// server's own metadata plane (package metaplane: admission, the consensus core
// driven by vsr.Driver, apply, checkpoints, state transfer; the very code the
// server runs on shard 0) and the real partition plane (a partition.Store per
// node, one to three partition groups), over one simulated network and simulated
// disks, with seeded clients that log in, write, disconnect and retry as the SDKs
// do. Every run is checked:
//
//   - agreement: no two replicas commit different prepares at one op number
//     (checked at every apply, and as full log equality at the end), and every
//     replica's apply of an op gives the same outcome (reply bytes, partition
//     effects, skipped or not);
//   - durability: every op a client saw acknowledged is in every replica's log at
//     the op its reply named;
//   - exactly once within a session: each (client id, session epoch, request) is
//     executed at most once in the cluster's history (a retry prepared twice is
//     applied once), and every reply a client receives is the reply cached for its
//     request, byte for byte; partition sends are at-least-once, so there only
//     agreement and durability are checked;
//   - equal states: at every checkpoint a replica writes, its metadata and client
//     table (the snapshot's digest) are those of every other replica at that op,
//     and at the end every replica's state is the same bytes;
//   - monotonicity: view and commit point never go back on a replica (the durable
//     view not even across restarts);
//   - liveness: the cluster keeps committing: once the faults heal, every client
//     finishes and every replica of every group catches up within
//     Options.LivenessTicksMax.
//
// # What is modelled
//
// The metadata plane runs at the server's defaults: a header window of 1,024 ops,
// a checkpoint every 960 (vsr's checkpoint rule), a pipeline of 32; its client
// table is smaller (Options.ClientsTableMax), so that it overflows. Its host here
// (metaReplica) is the simulated disk and network: a Ready's journal work lands in
// the page cache and is durable at its sync; a checkpoint writes the snapshot whole
// and cuts the journal below it; password work (new users, the cluster's root,
// which the first primary proposes) is answered at the node's next tick with one
// precomputed hash. Clients log in as the root user, under a fresh client id per
// registration (now and then the previous one again), at the primary or at a
// backup that forwards the login, and write streams, topics, partitions, consumer
// groups and users from small name pools, so that many writes commit as refusals
// (name taken, not found); they log out now and then, and close their connection
// now and then with a request in flight (the node that held it learns of the
// close).
//
// Every node also runs Options.PartitionGroups (zero to three) partition groups, of
// ids wire.PartitionGroup(1, 1, p) tagged with their one incarnation
// (wire.IncarnationGroup; with Options.UntaggedGroups the odd nodes send them
// untagged until they restart, as in an upgrade's two rolls), on a partition.Store (NewReplicatedStore, this node's
// replica of every group) over segment.SimDisk storage, one disk per
// partition directory, through the store's StorageProvider, all over the same
// links: a frame goes to the group its header names, and any intact frame from a
// node counts, through NoteLiveness, as a sign of life of that node for every
// group there, as the server's replica connections do. A client's send goes
// through Store.Send on the node it reached (a real batch, stamped in place; the
// store answers 58 unless it leads), its consumer-offset store through
// Store.StoreConsumerOffset (AckQuorum); the store's replica-plane frames go out
// through its Outbox, the peers' come in through Store.Step; every tick is a
// Store.Tick and a Store.PollIO, which runs the disks' completions and with them
// the sends' SendDone, the only acknowledgement a client gets. The checkers see
// the groups from outside (partition/simhooks.go: the cores' committed headers,
// view, status and commit points, the applied op) and read the logs back through
// Store.Poll: no two replicas commit different prepares at one op number; every
// acknowledged batch is, byte for byte as the primary stamped it, at its
// acknowledged offset in the log of every replica that applied it; a client's
// acknowledged sends are at increasing offsets; the replicas' logs are prefixes
// of one another and those that applied everything hold the same consumer
// offsets; views and commit points never go back; and after the heal the groups
// catch up. A crash of a node whose topic enforces fsync takes its stores down
// too (storesCrash): they reopen from their crashed disks with Store.Open, rejoin
// their groups, and every replica of every group must catch up (repair from a
// peer's retained ops, or state transfer of the segments) and agree. Without
// fsync enforced an acknowledgement promises no durability, so there a crash
// takes down the metadata plane only. A replica refusing an intact prepare whose
// stamp does not continue its log is counted, not a failure.
//
// The network loses, delays, reorders and duplicates frames, flips bits (the
// receiver must refuse a damaged frame), and partitions nodes (symmetric splits,
// one-way cuts, an isolated node). Nodes crash (all their groups at once) and come
// back, some after a long absence (repair, or state transfer once the cluster's
// journals moved past them).
//
// Disks follow segment.SimDisk's page-cache/platter model: a write is durable only
// at the next sync; a crash keeps, loses or tears each unsynced write; a checkpoint
// is written whole. On a restart, synced metadata journal entries may also rot (a
// flipped bit), on at most QuorumReplication-1 nodes of the cluster (chosen per
// seed) and only in entries of ops that node knows committed (at or below its
// durable commit point or its checkpoint) other than its highest entry. Why that
// much and no more:
//
//   - an op commits once QuorumReplication replicas made it durable, so with at most
//     QuorumReplication-1 rotting nodes one of those copies never rots: repair (or a
//     state transfer, once that replica's journal moved past the op) always finds
//     an intact one;
//   - the core cannot be told that an op it once held is now unreadable
//     (vsr.CoreRecovered lists intact entries only), so it would nack an op above
//     its commit point that rotted, and a view change could then truncate a
//     committed op; ops at or below the recovered commit point are never nacked;
//   - sparing the highest entry keeps the recovered head, and with it the commit
//     point the core recovers (it is capped by the head);
//   - groups of one and two replicas commit on one replica (QuorumReplication is 1),
//     so nothing could repair them: they get no rot.
//
// Recovery must notice every rotten entry by its checksums (checked), and the
// replica must repair it from its peers before it applies past it.
//
// # Seed classes
//
// Config (short: 3,000 ticks of faults, tens to hundreds of metadata ops; CI runs
// 1,000) and LongConfig (long: thousands of metadata ops, past at least three
// checkpoints, with one node down while the others take a checkpoint, so that it
// catches up by state transfer; CI runs a handful, -long runs more). Their
// Revocation variants (revocations.go: RevocationConfig, RevocationLongConfig,
// and RevocationBoundConfig, which fills the revoked tokens' table past its
// bound again and again) have nodes serve HTTP logouts that revoke access tokens
// through the plane, and check the revoked tokens' table on every replica;
// TestSimRevocations runs some in CI, -revoke (with -long) runs more.
// PurgeConfig purges the partition groups' topic often, each node carrying the
// purge out on its stores when it applies the op (purge.go says what the checks
// then hold to); TestSimPurge runs some in CI, -purge runs more.
// ForeignConfig runs another incarnation of the partition groups' ids beside the
// cluster, their frames crossing now and then (foreign.go says what crosses and
// what the checks then hold to); TestSimForeignIncarnation runs some in CI,
// -foreign -seed N replays one.
//
// # What is not
//
// The superblock (view, log view, commit point, view headers) and checkpoints never
// rot (they are written in redundant copies); an entry rotting above a node's
// commit point, which the core cannot report, is not modelled; nor are failed
// writes or syncs and full disks (segment.SimDisk can inject them: the server stops
// on them, which the crash model covers). The partition groups are fixed, the
// partitions of stream 1 topic 1, which no op deletes: of the effects of metadata
// writes only their topic's purges are carried out (purge.go), not partitions
// created or deleted; polls run only in the final read-back, and offsets are
// stored only at AckQuorum.
// The clock ticks alike everywhere, requests come one at a time per client, and
// the server's shards and views are not in it.
//
// Clients retry an unanswered request after 60 ticks (clientRetryTick) at the next
// node, as an SDK walks its list of nodes, and one answered 58 or 57 sooner; a
// backup answers a write 58 and forwards a login.
//
// A run is a pure function of its seed: a failure prints the seed, and
// `go test ./sim -run TestSim -seed N` replays it exactly (-long for a long
// seed).
package sim
