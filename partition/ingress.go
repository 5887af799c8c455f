package partition

import (
	"errors"
	"fmt"

	"github.com/iggy-shard/iggy-shard/wire"
)

// IngressDrop is why Store.Step did not give a replica-plane frame to its
// partition's group: the checks the partition plane makes before a group's core
// sees a frame. What the cores ignore is counted apart, by vsr.DropReason
// (Store.Drops); together they account for every frame Step was given and did not
// act on. Step still returns an error for each refusal; these counts are for
// /metrics, one counter per reason (IngressDrop.String), and for tests.
type IngressDrop uint8

const (
	// IngressUnknownPartition: a frame for a partition the store does not hold (a
	// frame of a partition deleted meanwhile: the server holds those of a
	// partition it has not created yet).
	IngressUnknownPartition IngressDrop = iota
	// IngressStorageFailing: the partitions' new directories cannot be made
	// durable (Store.SyncDirs), so nothing is written: the disk is failing.
	IngressStorageFailing
	// IngressBroken: the partition refuses everything until Recover (Store.Err:
	// its log could not repair a storage failure, a durable write of its group
	// failed, or its log does not continue its primary's).
	IngressBroken
	// IngressBodyBudget: a prepare (or another frame with a body, held while its
	// group's Ready was out) whose copy the store's body budget has no room for
	// (memory.go): the sender retransmits it.
	IngressBodyBudget
	// IngressBinding: a prepare whose body is not the batch (or offset op) its
	// header binds, or does not pass the batch's checksums (ErrBatchBinding).
	IngressBinding
	// IngressStamp: a prepare of the next op stamped elsewhere than this
	// replica's position (ErrStampMismatch); the replica asks for the primary's
	// state when its own log is the one that moved.
	IngressStamp
	// IngressParkedKeepAlive: a Commit that brought a parked backup nothing new
	// (its primary's keep-alive: the view it follows, a commit point it has
	// applied). The node's liveness, which Store.NoteLiveness takes from every
	// frame, is all it carries: the group stays parked, its core untouched.
	IngressParkedKeepAlive
	// IngressOtherIncarnation: a frame tagged with another incarnation of the
	// partition's ids (incarnation.go): a deleted partition's group on a node that
	// has not applied the deletion yet, or a newer one on a node that has not
	// created it. An untagged frame is taken as the partition's own.
	IngressOtherIncarnation

	// IngressDropCount is the number of reasons: IngressDrops' length.
	IngressDropCount
)

var ingressDropNames = [IngressDropCount]string{
	IngressUnknownPartition: "unknown_partition",
	IngressStorageFailing:   "storage_failing",
	IngressBroken:           "broken",
	IngressBodyBudget:       "body_budget",
	IngressBinding:          "binding",
	IngressStamp:            "stamp",
	IngressParkedKeepAlive:  "parked_keep_alive",
	IngressOtherIncarnation: "other_incarnation",
}

// String is the reason's name as a metric label: lower case, underscores.
func (r IngressDrop) String() string {
	if r < IngressDropCount {
		return ingressDropNames[r]
	}
	return fmt.Sprintf("IngressDrop(%d)", uint8(r))
}

// IngressDrops are the frames Step did not give to a group, by IngressDrop.
type IngressDrops [IngressDropCount]uint64

// IngressDrops copies out the store's counts of frames it did not give to their
// group, by reason, since it was made. It allocates nothing.
func (s *Store) IngressDrops() IngressDrops { return s.ingress }

// refuse counts a frame Step does not give to its group, and returns err.
func (s *Store) refuse(reason IngressDrop, err error) error {
	s.ingress[reason]++
	return err
}

// ingressReason is the reason of a prepare refused by checkIngress.
func ingressReason(err error) IngressDrop {
	if errors.Is(err, ErrStampMismatch) {
		return IngressStamp
	}
	return IngressBinding
}

// keepAliveOnly reports whether h is a Commit that brings p's parked backup
// nothing: from the primary of the view it follows, with a commit point it has
// applied already. Stepping it would put the group back on the timers until its
// next deadline, for nothing: with one keep-alive per commit broadcast interval,
// naming the next group in turn, every backup would hold a few groups unparked
// at any time, each woken for a heartbeat deadline it does not need.
func (p *Partition) keepAliveOnly(h *wire.GenericHeader) bool {
	if !p.activity.parked || h.Command != wire.CommandCommit || h.Cluster != p.store.repl.Cluster {
		return false
	}
	core := p.group.core
	if core.IsPrimary() || h.View != core.View() || h.Replica != core.Primary() {
		return false
	}
	return h.Commit().Commit <= core.CommitMin()
}
