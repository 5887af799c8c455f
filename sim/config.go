package sim

import (
	"github.com/iggy-shard/iggy-shard/metaplane"
	"github.com/iggy-shard/iggy-shard/vsr"
)

// Options shape one run. Config derives them from a seed.
type Options struct {
	Seed     uint64
	Replicas int
	Clients  int
	// PartitionGroups is how many partition groups every node runs besides the
	// metadata group.
	PartitionGroups int
	// FaultTicks is how long faults are injected; then they heal.
	FaultTicks uint64
	// LivenessTicksMax bounds the ticks from the heal until every client has
	// finished RequestsAfterHeal more requests and every replica caught up.
	LivenessTicksMax  uint64
	RequestsAfterHeal int
	Faults            bool
	// ClientsTableMax is the metadata plane's client table size: small, so that
	// the sessions of a run overflow it.
	ClientsTableMax int
	// DownAcrossCheckpoint: one node goes down at a third of the fault period and
	// stays down until the others have committed more than a header window past
	// where it stopped (checkpoints taken meanwhile): it catches up by state
	// transfer.
	DownAcrossCheckpoint bool
	// Mutation breaks a rule of the metadata core, PlaneMutation one of the
	// metadata plane, so that tests show the checkers catch it.
	Mutation      vsr.Mutation
	PlaneMutation metaplane.Mutation
	// CatchUp: the partition plane is expected to catch a partition up: a crash
	// takes the node's stores down too (and they reopen from their crashed
	// disks), and every replica of every partition group must catch up. Without
	// it a crash takes down only the metadata plane, the stores running on, and
	// what a replica that fell behind causes is tolerated (see the package doc).
	CatchUp bool
	// UntaggedGroups: the odd nodes' partition stores send untagged group ids
	// (cluster.partition_incarnation_tags = false, the first roll of an upgrade
	// from a binary before incarnation tags) until the node restarts, and then
	// tagged ones (the second roll), beside nodes that send tagged ids throughout.
	UntaggedGroups bool
	// PurgeGroups: the workload purges the partition groups' topic often (seven
	// metadata writes in fifty-two), and every node carries the purge out when
	// it applies it (purge.go); off, no op purges it (the partitions' other
	// effects are not carried out either way).
	PurgeGroups bool
	// ForeignIncarnation: another incarnation of the same group ids (a second
	// cluster of the same name and size, from another seed: its own clients, its
	// own ops, every group id alike, partition groups with the same incarnation
	// tag) runs beside this one while the faults last, and now and then a replica
	// frame of either is also delivered to the other's node of the same id, as
	// when a node still runs a deleted partition's group under ids a recreated
	// one reuses and the tags collide (or are not sent). Both clusters' checks
	// hold (foreign.go).
	ForeignIncarnation bool
	// foreignNormalCase lets the normal case's frames (Prepare, PrepareOk,
	// Commit) cross too (foreign.go says why they do not by default).
	foreignNormalCase bool
	// foreignAnswers: the answers to a request that crossed cross back, all of
	// them, for a while (foreign.go), instead of now and then as any frame.
	foreignAnswers bool
	// broken breaks a rule of the simulated server instead of the core's, so that
	// tests can show the checkers catch it.
	broken brokenRule
	// checkpointIntervalOps, when set, is the metadata plane's checkpoint
	// interval, taken as given past vsr's rule (metaplane.Config's
	// OldCheckpointRule): tests find the lock-up's boundary with it.
	checkpointIntervalOps uint64
	// Revocations are the HTTP logouts nodes serve (revocations.go).
	Revocations RevocationLoad
	// Trace, when set, receives one line per event.
	Trace func(string)
}

// Timing is the replicas' timers in the simulation: the reference's ratios, fewer
// ticks, so that a run covers many view changes.
var Timing = vsr.Timing{
	HeartbeatTimeoutTicks:           40,
	CommitBroadcastIntervalTicks:    8,
	PrepareRetransmitIntervalTicks:  5,
	ViewChangeRetransmitTicks:       10,
	ViewChangeStatusTimeoutTicks:    60,
	RequestStartViewRetransmitTicks: 10,
	ViewProbeAttemptsMax:            5,
	RepairRetryIntervalTicks:        10,
	RepairChunkMax:                  16,
}

// Config is the run a seed stands for: mostly 3 and 5 replicas, some 1 and 2.
func Config(seed uint64) Options {
	sizes := [...]int{3, 5, 3, 5, 1, 3, 5, 2}
	return Options{
		Seed:              seed,
		Replicas:          sizes[seed%uint64(len(sizes))],
		Clients:           1 + int(seed>>3)%4,
		PartitionGroups:   1 + int(seed>>6)%3,
		FaultTicks:        3000,
		LivenessTicksMax:  4000,
		RequestsAfterHeal: 3,
		Faults:            true,
		ClientsTableMax:   clientsTableMax,
		CatchUp:           true,
		UntaggedGroups:    seed>>5%2 == 1,
	}
}

// LongConfig is a long seed: eight to fifteen clients writing metadata for 60,000
// ticks of faults (thousands of ops: at least three checkpoints at the server's
// defaults), the partition plane in half of them, and one node down while the
// others take a checkpoint (go test ./sim -long).
func LongConfig(seed uint64) Options {
	o := Config(seed)
	o.Replicas = [...]int{3, 5}[seed%2]
	o.Clients = 8 + int(seed>>1)%8
	o.PartitionGroups = int(seed>>1) % 2
	o.FaultTicks = 60_000
	o.LivenessTicksMax = 8000
	o.DownAcrossCheckpoint = true
	return o
}

// PurgeConfig is Config with the partition groups' topic purged often
// (Options.PurgeGroups): many seeds cross several purges, sends in flight and
// nodes at different apply points (go test ./sim -purge).
func PurgeConfig(seed uint64) Options {
	o := Config(seed)
	o.PurgeGroups = true
	return o
}

// HeavyConfig is Config with four to eleven clients and twice the fault period:
// more requests in flight, and a cluster further ahead of a replica that was away,
// while the faults last (go test ./sim -heavy).
func HeavyConfig(seed uint64) Options {
	o := Config(seed)
	o.Clients = 4 + int(seed>>3)%8
	o.FaultTicks = 2 * o.FaultTicks
	return o
}

const (
	clusterName     = "sim"
	clientRetryTick = 60
	clientsTableMax = 64
	frameSizeMax    = 1 << 20
	// packetsInFlightMax turns a storm into a failing seed instead of an
	// exhausted machine (vsr.Driver bounds the Readies of one input).
	packetsInFlightMax = 100_000
	// metadataGroupIndex is the metadata group's place in cluster.groups;
	// partition groups follow it.
	metadataGroupIndex = 0
	// stateCreatedAtMicros is the partitions' creation time: every replica's
	// initial state must be the same bytes.
	stateCreatedAtMicros = 1_700_000_000_000_000
)

// brokenRule is a rule of the simulated server (not of the core) broken on purpose.
type brokenRule uint8

const (
	brokenNone brokenRule = iota
	// brokenRotEverywhere lets every node's journal rot, beyond the fault model.
	brokenRotEverywhere
	// brokenRotAboveCommit rots up to fifty entries of the rotting nodes at every
	// restart, any but the highest, above the commit point too: beyond the model.
	brokenRotAboveCommit
	// brokenStoreAckAtPrepare acknowledges a send once the real store admitted it,
	// at the offset it was stamped with, before it commits.
	brokenStoreAckAtPrepare
	// brokenStoreAckFlipsBit acknowledges sends with a bit of their batch flipped.
	brokenStoreAckFlipsBit
)
