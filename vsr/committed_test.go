package vsr

import (
	"testing"

	"github.com/iggy-shard/iggy-shard/wire"
)

// forgedChain is a chain of prepares from op from to op to whose first op chains
// to parent: a log of no view of committedCluster's (its ops are other clients'
// requests), as a peer of another incarnation of the group's ids would hold.
func forgedChain(from, to uint64, parent wire.Uint128) ([]wire.PrepareHeader, [][]byte) {
	var headers []wire.PrepareHeader
	var bodies [][]byte
	for op := from; op <= to; op++ {
		body := []byte{byte(op), 0xf0, 0x0d}
		var h wire.PrepareHeader
		h.Cluster, h.Command = wire.ClusterID("test"), wire.CommandPrepare
		h.Op, h.Parent, h.Group, h.Timestamp = op, parent, wire.MetadataGroup, 7000+op
		h.Request, h.Client, h.Operation = op, wire.Uint128{Lo: 99}, wire.OperationCreateStream
		h.Size = uint32(wire.HeaderSize + len(body))
		h.ChecksumBody = wire.BodyChecksum(body)
		h.SetIdentity()
		parent = h.Checksum
		headers = append(headers, h)
		bodies = append(bodies, body)
	}
	return headers, bodies
}

// suffixBody is headers (ascending) as a DoViewChange or StartView body: head
// first.
func suffixBody(headers []wire.PrepareHeader) []byte {
	body := make([]byte, len(headers)*wire.HeaderSize)
	for i := range headers {
		h := headers[len(headers)-1-i]
		h.View = 0
		h.Put(body[i*wire.HeaderSize:])
	}
	return body
}

// sealed finishes a frame of body: its size and seals.
func sealed(g *wire.GenericHeader, body []byte) {
	g.Size = uint32(wire.HeaderSize + len(body))
	g.SealBody(body)
	if g.Command.FrameSealed() {
		wire.SealFrame(g.Bytes())
	}
}

// contradictingLogs are the two ways a peer's suffix contradicts committedCluster's
// applied ops 1 and 2: op 3 chained to another op 2, or another op 2 itself.
func contradictingLogs(t *testing.T, tc *testCluster) map[string][]wire.PrepareHeader {
	applied, ok := tc.cores[1].Header(2)
	if !ok {
		t.Fatal("replica 1 holds no header of its applied op 2")
	}
	other, _ := forgedChain(2, 3, applied.Parent)
	unchained, _ := forgedChain(3, 3, wire.Uint128{Lo: 0xbad})
	return map[string][]wire.PrepareHeader{
		"the op above the applied one chained elsewhere": unchained,
		"another op at an applied op":                    other,
	}
}

// A DoViewChange whose log (of our log view) contradicts the ops this replica
// applied is refused before it starts or counts in a view change: on main, the
// new primary merged it with its own vote into a quorum and installed it,
// replacing its applied op 2's header, or panicked ("a committed op changed").
// The view change then waits for a correct vote and starts with the applied ops.
func TestDoViewChangeContradictingAppliedOpsIsRefused(t *testing.T) {
	for name := range contradictingLogs(t, committedCluster(t)) {
		t.Run(name, func(t *testing.T) {
			tc := committedCluster(t)
			suffix := contradictingLogs(t, tc)[name]
			head := suffix[len(suffix)-1].Op
			body := suffixBody(suffix)
			dvc := replicaFrame(wire.CommandDoViewChange, 2, 1, func(h *wire.GenericHeader) {
				d := h.DoViewChange()
				d.Op, d.Commit, d.LogView, d.Group = head, suffix[0].Op, 0, wire.MetadataGroup
				for i := range suffix {
					setBit(&d.PresentBitset, i)
				}
			})
			sealed(&dvc, body)
			primary := tc.cores[1]
			expectDrop(t, primary, DropContradictsCommitted, &dvc, body)

			// A correct replica's vote elects the view with the applied ops.
			want, _ := primary.Header(2)
			tc.cut[[2]int{0, 1}], tc.cut[[2]int{1, 0}] = true, true
			tc.cut[[2]int{0, 2}], tc.cut[[2]int{2, 0}] = true, true
			tc.tick(int(testTiming.HeartbeatTimeoutTicks) + 5)
			if !primary.IsPrimary() || primary.CommitMin() != 2 {
				t.Fatalf("replica 1: %v view %d primary %v applied %d", primary.Status(), primary.View(), primary.IsPrimary(), primary.CommitMin())
			}
			if got, _ := primary.Header(2); got.Checksum != want.Checksum {
				t.Fatalf("replica 1's applied op 2 changed")
			}
		})
	}
}

// A vote of an older log view may hold, above its commit point, ops a later view
// cut: they do not make it contradict the applied ops, and it still counts.
func TestDoViewChangeOfOlderLogViewCountsAboveItsCommit(t *testing.T) {
	tc := committedCluster(t)
	c := tc.cores[1]
	c.logView = 1 // as if it had joined view 1, whose log kept ops 1 and 2
	applied, _ := c.Header(1)
	cut, _ := forgedChain(2, 3, applied.Checksum)
	older := &doViewChange{logView: 0, op: 3, commit: 1, headers: nil}
	if c.voteContradictsApplied(older) {
		t.Fatal("an empty vote contradicts")
	}
	older.headers = []wire.PrepareHeader{cut[1], cut[0], applied}
	if c.voteContradictsApplied(older) {
		t.Fatal("an older log view's uncommitted ops count as a contradiction")
	}
	older.commit = 2
	if !c.voteContradictsApplied(older) {
		t.Fatal("an older log view's committed op 2, not ours, is not a contradiction")
	}
	older.logView, older.commit = 1, 1
	if !c.voteContradictsApplied(older) {
		t.Fatal("a vote of our log view holding another op 2 is not a contradiction")
	}
}

// A StartView whose log contradicts the applied ops is refused, its commit point
// too: on main the backup installed it over its applied op 2, or panicked.
func TestStartViewContradictingAppliedOpsIsRefused(t *testing.T) {
	for name := range contradictingLogs(t, committedCluster(t)) {
		t.Run(name, func(t *testing.T) {
			tc := committedCluster(t)
			suffix := contradictingLogs(t, tc)[name]
			head := suffix[len(suffix)-1].Op
			body := suffixBody(suffix)
			sv := replicaFrame(wire.CommandStartView, 1, 1, func(h *wire.GenericHeader) {
				s := h.StartView()
				s.Op, s.Commit, s.Group = head, suffix[0].Op, wire.MetadataGroup
			})
			sealed(&sv, body)
			expectDrop(t, tc.cores[2], DropContradictsCommitted, &sv, body)
		})
	}
}

// A StartView may name a head far above the applied op, its chain down to the
// applied op unseen: the repaired prepares reveal that it never reaches it. The
// one that would join the applied op is refused and nothing of that log is
// applied: on main, verifyDown panicked ("a committed op changed").
func TestRepairCandidateContradictingAppliedOpIsRefused(t *testing.T) {
	tc := committedCluster(t)
	c := tc.cores[2]
	chain, bodies := forgedChain(3, 10, wire.Uint128{Lo: 0xbad})
	top := chain[len(chain)-1]
	sv := replicaFrame(wire.CommandStartView, 1, 1, func(h *wire.GenericHeader) {
		s := h.StartView()
		s.Op, s.Commit, s.Group = top.Op, top.Op, wire.MetadataGroup
	})
	body := suffixBody(chain[len(chain)-1:])
	sealed(&sv, body)
	if err := c.Step(&sv, body); err != nil {
		t.Fatal(err)
	}
	if c.Op() != 10 || c.log.trustLow != 10 || !c.repair.active {
		t.Fatalf("replica 2 at op %d trusted from %d repairing %v, want op 10 from 10 repairing", c.Op(), c.log.trustLow, c.repair.active)
	}
	for op := uint64(9); op >= 3; op-- {
		var g wire.GenericHeader
		p := (*wire.PrepareHeader)(headerPointer(&g))
		*p = chain[op-3]
		p.Command = wire.CommandRepairPrepare
		if err := c.Step(&g, bodies[op-3]); err != nil {
			t.Fatalf("op %d: %v", op, err)
		}
	}
	if got := c.Drops()[DropContradictsCommitted]; got != 1 {
		t.Fatalf("%d repaired prepares refused as contradicting, want 1", got)
	}
	if c.log.trustLow != 4 || c.CommitMin() != 2 || len(c.repair.candidates) != 0 {
		t.Fatalf("replica 2 trusted from %d, applied %d, %d candidates; want 4, 2, 0", c.log.trustLow, c.CommitMin(), len(c.repair.candidates))
	}
	tc.drain(2)
	if c.CommitMin() != 2 {
		t.Fatalf("replica 2 applied up to %d of a log contradicting its applied ops", c.CommitMin())
	}
}

// A group of another incarnation of the same ids (its own replicas, its own
// committed ops) elects a view while ours does: its vote and its StartView reach
// our replicas in the middle of our view change. They are refused, and our view
// change elects a view that keeps our applied ops and commits new ones. On main,
// its vote with our new primary's own made a quorum: a committed op changed.
func TestOtherIncarnationsViewChangeIsRefused(t *testing.T) {
	ours := committedCluster(t)
	theirs := newTestCluster(t, 3)
	for r := uint64(1); r <= 3; r++ {
		theirs.propose(0, 7, r)
		theirs.deliver(100)
	}
	theirs.tick(int(testTiming.CommitBroadcastIntervalTicks))
	var foreign [][]byte
	theirs.onFrame = func(frame []byte) {
		if c, _ := wire.PeekCommand(frame); c == wire.CommandDoViewChange || c == wire.CommandStartView {
			foreign = append(foreign, append([]byte(nil), frame...))
		}
	}
	isolate := func(tc *testCluster, i int) {
		for _, to := range []int{1, 2} {
			if to != i {
				tc.cut[[2]int{i, to}], tc.cut[[2]int{to, i}] = true, true
			}
		}
	}
	isolate(theirs, 0)
	theirs.tick(int(testTiming.HeartbeatTimeoutTicks) + 5)
	if !theirs.cores[1].IsPrimary() || len(foreign) == 0 {
		t.Fatalf("their replica 1 does not lead view 1 (%d view-change frames)", len(foreign))
	}

	isolate(ours, 0)
	ours.cut[[2]int{2, 1}] = true // our replica 1's view change waits for our replica 2
	primary := ours.cores[1]
	for tick := 0; primary.Status() != StatusViewChange; tick++ {
		if tick > int(testTiming.HeartbeatTimeoutTicks)*2 {
			t.Fatal("our replica 1 never changes view")
		}
		ours.tick(1)
	}
	applied := [2]wire.PrepareHeader{}
	for op := uint64(1); op <= 2; op++ {
		applied[op-1], _ = primary.Header(op)
	}
	for _, frame := range foreign {
		aligned := ours.frame[:len(frame)]
		copy(aligned, frame)
		h, err := wire.DecodeReplicaHeader(aligned, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		for _, to := range []int{1, 2} {
			if err := ours.driver(to).Step(h, append([]byte(nil), frame[wire.HeaderSize:]...)); err != nil {
				t.Fatalf("our replica %d refused their %v: %v", to, h.Command, err)
			}
		}
	}
	for _, i := range []int{1, 2} {
		if ours.cores[i].Drops()[DropContradictsCommitted] == 0 {
			t.Fatalf("our replica %d refused none of their frames as contradicting", i)
		}
	}
	delete(ours.cut, [2]int{2, 1})
	ours.tick(int(testTiming.ViewChangeStatusTimeoutTicks))
	if !primary.IsPrimary() {
		t.Fatalf("our replica 1: %v view %d, not a primary", primary.Status(), primary.View())
	}
	op := ours.propose(1, 9, 1)
	ours.deliver(100)
	ours.tick(int(testTiming.CommitBroadcastIntervalTicks))
	for _, i := range []int{1, 2} {
		c := ours.cores[i]
		if c.CommitMin() != op {
			t.Fatalf("our replica %d applied %d, want %d", i, c.CommitMin(), op)
		}
		for k := range applied {
			if got, _ := c.Header(uint64(k + 1)); got.Checksum != applied[k].Checksum {
				t.Fatalf("our replica %d: applied op %d changed", i, k+1)
			}
		}
	}
}

// voteFrame is replica from's DoViewChange for view: headers (ascending, a zero
// Op standing for a blank) from its commit point to its head.
func voteFrame(from uint8, view, logView uint32, commit uint64, headers []wire.PrepareHeader) (wire.GenericHeader, []byte) {
	for i := range headers {
		if headers[i].Checksum.IsZero() {
			headers[i].Command, headers[i].Operation = wire.CommandPrepare, wire.OperationReserved
		}
	}
	body := suffixBody(headers)
	dvc := replicaFrame(wire.CommandDoViewChange, from, view, func(h *wire.GenericHeader) {
		d := h.DoViewChange()
		d.Op, d.Commit, d.LogView, d.Group = headers[len(headers)-1].Op, commit, logView, wire.MetadataGroup
	})
	sealed(&dvc, body)
	return dvc, body
}

// Each vote agrees with the applied ops where it must, yet the merged log does
// not: a vote of our log view names, above a blank, an op that only an older log
// view's vote holds, above that vote's commit point (where it may differ from
// ours), and that op does not chain to our applied op. The merge waits rather
// than install it: on main the new primary panicked ("a committed op changed").
func TestMergedLogContradictingAppliedOpsIsNotInstalled(t *testing.T) {
	tc := committedCluster(t)
	c := tc.cores[1]
	c.logView = 1 // as if it had joined view 1, whose log kept ops 1 and 2
	one, _ := c.Header(1)
	older, _ := forgedChain(2, 3, one.Checksum) // ops 2 and 3 of a log view 0 cut
	head, _ := forgedChain(4, 4, older[1].Checksum)
	blank := wire.PrepareHeader{Op: 3}

	v, body := voteFrame(2, 4, 1, 3, []wire.PrepareHeader{blank, head[0]})
	if err := c.Step(&v, body); err != nil {
		t.Fatal(err)
	}
	v, body = voteFrame(0, 4, 0, 1, []wire.PrepareHeader{one, older[0], older[1]})
	if err := c.Step(&v, body); err != nil {
		t.Fatal(err)
	}
	if got := c.Drops()[DropContradictsCommitted]; got != 0 {
		t.Fatalf("%d votes refused: each agrees with the applied ops where it must", got)
	}
	applied, _ := tc.cores[0].Header(2)
	if h, ok := c.Header(2); c.vc.mergeDone || c.Op() != 2 || c.CommitMin() != 2 || !ok || h.Checksum != applied.Checksum {
		t.Fatalf("replica 1 installed a merged log: merged %v op %d applied %d", c.vc.mergeDone, c.Op(), c.CommitMin())
	}
}
