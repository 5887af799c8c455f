package vsr

import (
	"testing"

	"github.com/iggy-shard/iggy-shard/wire"
)

// TestRepairKeepsTheWindowsHead: a backup that applied nothing joins a view whose
// head is more than a journal window above it (sim/ seed 7038202: a replica
// restarted at op 4 followed a view at op 157 with 128 slots). It journals and
// acknowledges the head op, so the head may be one of a commit quorum's copies.
// Repair verifies the chain downward from the head; the ops below the window share
// their slots with the window's top ones, so fetching them would overwrite the
// acknowledged head, whose next DoViewChange would then nack it, and a nack quorum
// would truncate a committed op. The backup must keep the head and take a state
// transfer for what lies below the window.
func TestRepairKeepsTheWindowsHead(t *testing.T) {
	const slots = 64
	const head, commit = slots + 6, slots + 4
	// chain's headers, sized as frames of an empty body.
	log := chain(wire.Uint128{}, 1, head, 'a')
	for i := range log {
		log[i].Size = wire.HeaderSize
		if i > 0 {
			log[i].Parent = log[i-1].Checksum
		}
		log[i].SetIdentity()
	}
	c, err := NewCore(CoreConfig{
		Config: Config{Cluster: wire.ClusterID("test"), ReplicaID: 2, ReplicaCount: 3, Group: wire.MetadataGroup},
		Timing: testTiming, JournalSlots: slots, Storage: newMemStorage(slots),
	})
	if err != nil {
		t.Fatal(err)
	}
	step := func(h *wire.GenericHeader, body []byte) {
		t.Helper()
		h.Size = uint32(wire.HeaderSize + len(body))
		if h.Command.FrameSealed() {
			wire.SealFrame(h.Bytes())
		}
		if err := c.Step(h, body); err != nil {
			t.Fatalf("%v: %v", h.Command, err)
		}
	}
	prepare := func(op uint64, command wire.Command) {
		t.Helper()
		var h wire.GenericHeader
		p := (*wire.PrepareHeader)(headerPointer(&h))
		*p = log[op-1]
		p.View, p.Command = 1, command
		step(&h, nil)
	}
	// Replica 1 starts view 1 at the head; replica 2 takes the suffix's headers.
	var sv wire.GenericHeader
	sv.Cluster, sv.View, sv.Command, sv.Replica = wire.ClusterID("test"), 1, wire.CommandStartView, 1
	m := sv.StartView()
	m.Op, m.Commit, m.Group = head, commit, wire.MetadataGroup
	body := make([]byte, 0, (head-commit+1)*wire.HeaderSize)
	for op := uint64(head); op >= commit; op-- {
		h := log[op-1]
		body = append(body, wire.HeaderBytes(&h)[:]...)
	}
	sv.SealBody(body)
	step(&sv, body)
	// The head's prepare arrives: journaled and acknowledged.
	prepare(head, wire.CommandPrepare)
	acked, transfer := false, false
	// Replica 1 answers every repair request from its own log, which reaches
	// below the backup's window.
	for round := 0; round < 2*slots && !transfer; round++ {
		var requests []wire.RequestPreparesHeader
		for c.HasReady() {
			rd := c.Ready()
			for i := range rd.Messages {
				h := &rd.Messages[i].Header
				switch h.Command {
				case wire.CommandPrepareOk:
					acked = acked || h.PrepareOk().Op == head
				case wire.CommandRequestPrepares:
					requests = append(requests, *h.RequestPrepares())
					if cap(c.repair.candidates) != 0 {
						t.Fatalf("a new repair round holds the last round's room for %d candidates", cap(c.repair.candidates))
					}
				case wire.CommandRequestStateTransfer:
					transfer = true
				}
			}
			c.Advance()
		}
		if len(requests) == 0 {
			c.Tick()
			continue
		}
		for _, r := range requests {
			for op := r.FromOp; op <= r.ToOp && op <= head; op++ {
				prepare(op, wire.CommandRepairPrepare)
			}
			var done wire.GenericHeader
			done.Cluster, done.View, done.Command, done.Replica = wire.ClusterID("test"), 1, wire.CommandRepairDone, 1
			d := done.RepairRange()
			d.Nonce, d.Op, d.Group = r.Nonce, r.ToOp, wire.MetadataGroup
			step(&done, nil)
		}
	}
	if !acked {
		t.Fatal("the backup did not acknowledge the head op")
	}
	if h, ok := c.Header(head); !ok || h.Checksum != log[head-1].Checksum {
		t.Fatalf("the backup lost its acknowledged head op %d", head)
	}
	d := c.ownDoViewChange()
	if hasBit(d.nack, 0) || !hasBit(d.present, 0) {
		t.Fatalf("the backup's DoViewChange nacks its acknowledged head op %d (present %v)", head, hasBit(d.present, 0))
	}
	if !transfer {
		t.Fatal("the backup asked for no state to reach the ops below its window")
	}
}

// A core keeps room for repair candidates (copied bodies, up to RepairChunkMax of
// them) only while it repairs: a shard holds thousands of partition groups that
// never repair, and a group that repaired once must not hold its last round's
// bodies for the rest of its life.
func TestRepairCandidatesHeldOnlyWhileRepairing(t *testing.T) {
	c, err := NewCore(CoreConfig{
		Config: Config{Cluster: wire.ClusterID("test"), ReplicaID: 2, ReplicaCount: 3, Group: wire.MetadataGroup},
		Timing: testTiming, JournalSlots: 64, Storage: newMemStorage(64),
	})
	if err != nil {
		t.Fatal(err)
	}
	if cap(c.repair.candidates) != 0 {
		t.Fatalf("a fresh core holds room for %d repair candidates", cap(c.repair.candidates))
	}
	// A group that repairs holds the room while the round's candidates come
	// (TestRepairKeepsTheWindowsHead checks each new round starts without it).
}
