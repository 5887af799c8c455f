package sim

import (
	"github.com/iggy-shard/iggy-shard/partition"
	"github.com/iggy-shard/iggy-shard/vsr"
)

// Result is what a run saw: the run's own figures, then the metadata plane's,
// the clients' and the partition plane's.
type Result struct {
	Seed uint64
	// Violation is the first broken property, nil on a clean run.
	Violation error
	Ticks     uint64
	// LivenessTicks is how long the cluster took to finish after the heal.
	LivenessTicks uint64
	// Committed counts committed ops over every group; Acknowledged the requests
	// of either plane a client saw answered.
	Committed    uint64
	Acknowledged int
	Crashes      int
	ViewChanges  uint32
	Messages     int
	// CorruptRefused is how many corrupted frames the receivers refused.
	CorruptRefused int
	// ForeignDelivered is how many frames of the other incarnation
	// (Options.ForeignIncarnation) were delivered to this cluster's nodes,
	// ForeignRefused how many of them a receiver refused as bad input.
	ForeignDelivered, ForeignRefused int
	// DownAcrossCheckpoint: the node held down (Options.DownAcrossCheckpoint)
	// came back after another replica checkpointed past where it stopped.
	DownAcrossCheckpoint bool

	Metadata    MetadataResult
	Clients     ClientsResult
	Partitions  PartitionsResult
	Revocations RevocationsResult
}

// MetadataResult is what the metadata group's replicas did.
type MetadataResult struct {
	// Committed is the metadata group's highest committed op.
	Committed uint64
	// CommittedRefusals is how many metadata ops committed as a rejection;
	// AdmitRefused how many requests admission denied before consensus.
	CommittedRefusals, AdmitRefused int
	// Checkpoints counts the checkpoints its replicas wrote, DuplicatesSkipped the
	// committed prepares its apply skipped (a request applied already, or of a
	// session ended), StateInstalls the states installed by state transfer.
	Checkpoints, DuplicatesSkipped, StateInstalls int
	// Evictions counts the sessions a Register pushed out of a full client table
	// (each counted once, at the op that evicted it).
	Evictions int
	// ForwardedLogins is how many logins at a backup the primary answered Ok.
	ForwardedLogins int
	// RottenEntries is how many synced journal entries rotted at a restart,
	// RottenToRepair how many of them their replica had not checkpointed (it must
	// repair them before it applies past them); DamagedEntriesDropped how many
	// entries recovery found damaged (rotten or torn).
	RottenEntries, RottenToRepair, DamagedEntriesDropped int
	// Drops are the inputs the metadata group dropped, by reason, over every
	// incarnation.
	Drops vsr.DropCounts
}

// ClientsResult is what the clients did to their connections.
type ClientsResult struct {
	// Disconnects counts the connections clients closed, Abandoned the requests
	// they had in flight then; Refused58 the requests given up after a 58 to
	// their only send (they must never be in the log).
	Disconnects, Abandoned, Refused58 int
}

// PartitionsResult is what the real partition stores did.
type PartitionsResult struct {
	// Acks is how many partition requests were answered.
	Acks int
	// SendsFailed is how many sends the stores admitted and then failed (their
	// ops truncated by a view change: the clients retried); OffsetStores how many
	// consumer-offset stores they acknowledged.
	SendsFailed, OffsetStores int
	// CommitsUnobserved is how many partition ops a store's core committed past its
	// journal window between two looks of the agreement check.
	CommitsUnobserved int
	// StampRefusals is how many intact prepares a lagging store refused for their
	// stamp (without Options.CatchUp); LaggingReplicas how many partition replicas
	// had not caught up at the end.
	StampRefusals, LaggingReplicas int
	// DivergedRefusals is how many requests a store refused because its partition
	// took itself for diverged (see cluster.diverged).
	DivergedRefusals int
	// Stalled: the run ended at the liveness bound with a partition group stalled
	// behind a replica that cannot catch up (cluster.partitionsStalled).
	Stalled bool
	// StatesInstalled is how many partition states the stores installed by
	// state transfer, over every store incarnation.
	StatesInstalled int
	// ForeignWedged: with Options.ForeignIncarnation, the run ended at the
	// liveness bound, the metadata group done, with a partition group that
	// cannot commit: it took ops of the other incarnation's log above its
	// applied ones, whose bodies left with it (foreign.go).
	ForeignWedged bool
	// Purges is how many partitions the stores purged (purge.go), PurgesSkipped
	// how many purges an op applied again found carried out already (the
	// partition's record at its generation); AcksPurged how many acknowledged
	// sends a later purge of the topic released from the durability check.
	Purges, PurgesSkipped, AcksPurged int
	// OtherLifeDropped is how many intact frames a store dropped as of another
	// life of their group (a replica behind on a purge, or ahead of it).
	OtherLifeDropped int
	// Drops are the inputs the stores' groups dropped (partition.Store.Drops),
	// IngressDrops the frames the stores did not give to a group
	// (Store.IngressDrops), over every store incarnation.
	Drops        vsr.DropCounts
	IngressDrops partition.IngressDrops
}
