package vsr

import (
	"errors"
	"hash/fnv"
	"testing"

	"github.com/iggy-shard/iggy-shard/wire"
)

// protocolState is what an input a replica drops must leave as it was: its status,
// view and log, commit points, journal slots, pipeline, votes, transfer and the
// durable work its Ready holds. Timers, rate limits and the frames it sends are
// not in it: a dropped frame may still prove its sender alive, or be answered
// with the view the sender missed (DropReason).
type protocolState struct {
	status                                                   Status
	view, logView                                            uint32
	op, commitMin, commitMax, trustLow, retained, checkpoint uint64
	durable                                                  DurableState
	stateChanged                                             bool
	slots, pipeline                                          uint64
	svcFrom                                                  uint32
	votes, candidates                                        int
	transfer                                                 transferPhase
	forwardsOut, forwardsIn, offers, stateRequests           int
	writes, committed, discards                              int
	truncate, install                                        bool
}

func protocolStateOf(c *Core) protocolState {
	slots := fnv.New64a()
	for i := range c.log.slots {
		s := &c.log.slots[i]
		slots.Write(wire.HeaderBytes(&s.header)[:])
		slots.Write([]byte{byte(s.body), boolByte(s.trusted), boolByte(s.faulty)})
	}
	pipeline := fnv.New64a()
	for _, e := range c.normal.pipeline {
		pipeline.Write([]byte{byte(e.op), byte(e.op >> 8), byte(e.identity.Lo), byte(e.acks), byte(e.acks >> 8)})
	}
	votes := 0
	for _, d := range c.vc.dvcs {
		if d != nil {
			votes++
		}
	}
	return protocolState{
		status: c.status, view: c.view, logView: c.logView,
		op: c.op, commitMin: c.commitMin, commitMax: c.commitMax, trustLow: c.log.trustLow, retained: c.log.retainedLow, checkpoint: c.log.checkpointOp,
		durable: c.durable, stateChanged: c.out.stateChanged,
		slots: slots.Sum64(), pipeline: pipeline.Sum64(),
		svcFrom: c.vc.svcFrom, votes: votes, candidates: len(c.repair.candidates),
		transfer:    c.transfer.phase,
		forwardsOut: len(c.forwards.out), forwardsIn: len(c.forwards.in), offers: len(c.transfer.offers), stateRequests: len(c.transfer.stateRequests),
		writes: len(c.rd.Writes), committed: len(c.rd.Committed), discards: len(c.rd.Discards),
		truncate: c.rd.Truncate, install: c.rd.Install != nil,
	}
}

func boolByte(b bool) byte {
	if b {
		return 1
	}
	return 0
}

// expectDrop steps a frame into c and checks that it is counted under want, under
// no other reason, and that it changed nothing of c's protocol state.
func expectDrop(t *testing.T, c *Core, want DropReason, h *wire.GenericHeader, body []byte) {
	t.Helper()
	before, counts := protocolStateOf(c), c.Drops()
	err := c.Step(h, body)
	if (want == DropMalformed) != errors.Is(err, ErrBadMessage) {
		t.Errorf("%v: Step = %v", want, err)
	}
	counts[want]++
	if got := c.Drops(); got != counts {
		t.Errorf("%v: counts %v, want %v", want, got, counts)
	}
	if after := protocolStateOf(c); after != before {
		t.Errorf("%v: the dropped %v changed the replica:\n before %+v\n after  %+v", want, h.Command, before, after)
	}
}

// replicaFrame is a header-only frame of command from replica in view, its fields
// set by fill.
func replicaFrame(command wire.Command, from uint8, view uint32, fill func(h *wire.GenericHeader)) wire.GenericHeader {
	var g wire.GenericHeader
	g.Cluster, g.Size, g.Command, g.Replica, g.View = wire.ClusterID("test"), wire.HeaderSize, command, from, view
	if fill != nil {
		fill(&g)
	}
	return g
}

// take removes and returns the first queued message of command to replica to,
// its body copied.
func (tc *testCluster) take(command wire.Command, to int) queued {
	tc.t.Helper()
	for i, q := range tc.queue {
		if q.header.Command == command && q.to == to {
			tc.queue = append(tc.queue[:i], tc.queue[i+1:]...)
			q.body = append([]byte(nil), q.body...)
			return q
		}
	}
	tc.t.Fatalf("no %v to %d queued", command, to)
	return queued{}
}

// journaled is op's prepare as replica i journaled it, as a frame of command.
func (tc *testCluster) journaled(i int, op uint64, command wire.Command) (wire.GenericHeader, []byte) {
	tc.t.Helper()
	h, ok := tc.cores[i].Header(op)
	if !ok {
		tc.t.Fatalf("replica %d holds no header of op %d", i, op)
	}
	body, ok := tc.storages[i].Body(op, h.Checksum)
	if !ok {
		tc.t.Fatalf("replica %d holds no body of op %d", i, op)
	}
	var g wire.GenericHeader
	p := (*wire.PrepareHeader)(headerPointer(&g))
	*p = h
	p.Command = command
	return g, append([]byte(nil), body...)
}

// committedCluster is three replicas that applied two ops of view 0.
func committedCluster(t *testing.T) *testCluster {
	tc := newTestCluster(t, 3)
	for r := uint64(1); r <= 2; r++ {
		tc.propose(0, 1, r)
		tc.deliver(100)
	}
	tc.tick(int(testTiming.CommitBroadcastIntervalTicks))
	for i, c := range tc.cores {
		if c.CommitMin() != 2 {
			t.Fatalf("replica %d applied %d, want 2", i, c.CommitMin())
		}
	}
	return tc
}

// behindCluster is three replicas where replica 1, cut off while the others
// committed ops ops, learned the head from a StartView of its view and holds none
// of their bodies.
func behindCluster(t *testing.T, ops uint64) *testCluster {
	tc := cutOffCluster(t, ops)
	tc.cores[0].sendStartView(1, wire.Uint128{})
	tc.drain(0)
	sv := tc.take(wire.CommandStartView, 1)
	if err := tc.cores[1].Step(&sv.header, sv.body); err != nil {
		t.Fatal(err)
	}
	if c := tc.cores[1]; c.Op() != ops || c.CommitMin() != 0 {
		t.Fatalf("replica 1 at op %d applied %d, want op %d applied 0", c.Op(), c.CommitMin(), ops)
	}
	return tc
}

// cutOffCluster is three replicas where replica 1 was cut off while the others
// committed ops ops; the primary reaches it again, replica 1 still does not reach
// the others.
func cutOffCluster(t *testing.T, ops uint64) *testCluster {
	tc := newTestClusterSlots(t, 3, 64)
	for _, peer := range []int{0, 2} {
		tc.cut[[2]int{peer, 1}] = true
		tc.cut[[2]int{1, peer}] = true
	}
	for r := uint64(1); r <= ops; r++ {
		tc.propose(0, 1, r)
		tc.deliver(1000)
		if r == 1 {
			// The chain's next hop is cut: the first op commits once its
			// retransmission reaches replica 2, the others at once.
			tc.tick(int(testTiming.PrepareRetransmitIntervalTicks))
		}
	}
	if c := tc.cores[0]; c.CommitMax() != ops {
		t.Fatalf("primary committed %d of %d ops", c.CommitMax(), ops)
	}
	delete(tc.cut, [2]int{0, 1})
	tc.queue = nil
	return tc
}

type failingSource struct{}

func (failingSource) SizeBytes() uint64               { return 100 }
func (failingSource) Checksum() uint64                { return 1 }
func (failingSource) ReadAt(p []byte, _ uint64) error { return errors.New("disk gone") }

// TestDropReasonsReachableAndHarmless: every DropReason is reachable by a frame
// (one row at least per reason), each drop is counted under its reason alone, and
// a dropped frame changes nothing of the replica's protocol state.
func TestDropReasonsReachableAndHarmless(t *testing.T) {
	group := uint64(wire.MetadataGroup)
	cases := []struct {
		name   string
		reason DropReason
		run    func(t *testing.T)
	}{
		{"a prepare of another cluster", DropMalformed, func(t *testing.T) {
			tc := newTestCluster(t, 3)
			tc.propose(0, 1, 1)
			p := tc.take(wire.CommandPrepare, 1)
			p.header.Cluster = wire.ClusterID("other")
			expectDrop(t, tc.cores[1], DropMalformed, &p.header, p.body)
		}},
		{"a view-change vote of a newer view, its suffix short", DropMalformed, func(t *testing.T) {
			// Refused before it starts that view change here.
			tc := committedCluster(t)
			blank := wire.PrepareHeader{Op: 5}
			blank.Command = wire.CommandPrepare
			body := make([]byte, wire.HeaderSize)
			blank.Put(body)
			dvc := replicaFrame(wire.CommandDoViewChange, 2, 4, func(h *wire.GenericHeader) {
				d := h.DoViewChange()
				d.Op, d.Commit, d.LogView, d.Group = 5, 0, 0, group
				d.SealBody(body)
			})
			dvc.Size += uint32(len(body))
			expectDrop(t, tc.cores[1], DropMalformed, &dvc, body)
		}},
		{"a prepare of a view not joined", DropNewerView, func(t *testing.T) {
			tc := newTestCluster(t, 3)
			tc.propose(0, 1, 1)
			p := tc.take(wire.CommandPrepare, 1)
			p.header.View = 3
			expectDrop(t, tc.cores[1], DropNewerView, &p.header, p.body)
		}},
		{"a Commit of an older view", DropOlderView, func(t *testing.T) {
			tc := newTestCluster(t, 3)
			old := replicaFrame(wire.CommandCommit, 0, 0, func(h *wire.GenericHeader) { h.Commit().Group = group })
			for _, to := range []int{1, 2} {
				tc.cut[[2]int{0, to}] = true
				tc.cut[[2]int{to, 0}] = true
			}
			tc.tick(int(testTiming.HeartbeatTimeoutTicks) + 5)
			if !tc.cores[1].IsPrimary() || tc.cores[1].View() != 1 {
				t.Fatalf("replica 1 is not the primary of view 1")
			}
			expectDrop(t, tc.cores[1], DropOlderView, &old, nil)
		}},
		{"a StartViewChange at a recovering replica", DropNotNormal, func(t *testing.T) {
			c, err := NewCore(CoreConfig{Config: Config{Cluster: wire.ClusterID("test"), ReplicaID: 2, ReplicaCount: 3, Group: group}, Timing: testTiming, JournalSlots: 256, Storage: newMemStorage(256)})
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Recover(CoreRecovered{}); err != nil || c.Status() != StatusRecovering {
				t.Fatalf("recover: %v, %v", err, c.Status())
			}
			svc := replicaFrame(wire.CommandStartViewChange, 0, 1, func(h *wire.GenericHeader) { h.StartViewChange().Group = group })
			expectDrop(t, c, DropNotNormal, &svc, nil)
		}},
		{"a prepare at the primary", DropNotForRole, func(t *testing.T) {
			tc := newTestCluster(t, 3)
			tc.propose(0, 1, 1)
			p := tc.take(wire.CommandPrepare, 1)
			expectDrop(t, tc.cores[0], DropNotForRole, &p.header, p.body)
		}},
		{"a probe at a backup", DropNotForRole, func(t *testing.T) {
			tc := committedCluster(t)
			probe := replicaFrame(wire.CommandRequestStartView, 2, 0, func(h *wire.GenericHeader) { h.RequestStartView().Group = group })
			expectDrop(t, tc.cores[1], DropNotForRole, &probe, nil)
		}},
		{"an ack of an op above the head", DropNotInLog, func(t *testing.T) {
			tc := committedCluster(t)
			ok := replicaFrame(wire.CommandPrepareOk, 1, 0, func(h *wire.GenericHeader) {
				o := h.PrepareOk()
				o.Op, o.Group = 9, group
			})
			expectDrop(t, tc.cores[0], DropNotInLog, &ok, nil)
		}},
		{"a prepare beyond a gap", DropGap, func(t *testing.T) {
			tc := newTestCluster(t, 3)
			tc.propose(0, 1, 1)
			tc.propose(0, 1, 2)
			tc.take(wire.CommandPrepare, 1)
			second := tc.take(wire.CommandPrepare, 1)
			expectDrop(t, tc.cores[1], DropGap, &second.header, second.body)
		}},
		{"a prepare a journal window ahead of the applied op", DropBehind, func(t *testing.T) {
			tc := behindCluster(t, 70)
			tc.propose(0, 1, 71)
			p, body := tc.journaled(0, 71, wire.CommandPrepare)
			expectDrop(t, tc.cores[1], DropBehind, &p, body)
		}},
		{"a second ack of a committed op", DropDuplicate, func(t *testing.T) {
			tc := newTestCluster(t, 3)
			tc.propose(0, 1, 1)
			tc.deliver(100) // the chain: 1 journals, acks, forwards to 2, which acks
			tc.tick(1)
			ok := replicaFrame(wire.CommandPrepareOk, 2, 0, func(h *wire.GenericHeader) {
				o := h.PrepareOk()
				hd, _ := tc.cores[0].Header(1)
				o.Op, o.PrepareChecksum, o.Parent, o.Group = 1, hd.Checksum, hd.Parent, group
			})
			expectDrop(t, tc.cores[0], DropDuplicate, &ok, nil)
		}},
		{"a prepare of an applied op", DropDuplicate, func(t *testing.T) {
			tc := committedCluster(t)
			p, body := tc.journaled(0, 2, wire.CommandPrepare)
			expectDrop(t, tc.cores[1], DropDuplicate, &p, body)
		}},
		{"a StartView of the view followed, with nothing new", DropNothingNew, func(t *testing.T) {
			tc := committedCluster(t)
			tc.cores[0].sendStartView(1, wire.Uint128{})
			tc.drain(0)
			sv := tc.take(wire.CommandStartView, 1)
			expectDrop(t, tc.cores[1], DropNothingNew, &sv.header, sv.body)
		}},
		{"a RepairDone of no repair round", DropStale, func(t *testing.T) {
			tc := committedCluster(t)
			done := replicaFrame(wire.CommandRepairDone, 0, 0, func(h *wire.GenericHeader) {
				r := h.RepairRange()
				r.Nonce, r.Op, r.Group = wire.Uint128{Lo: 1, Hi: 2}, 2, group
			})
			expectDrop(t, tc.cores[1], DropStale, &done, nil)
		}},
		{"a state chunk of no transfer", DropStale, func(t *testing.T) {
			tc := committedCluster(t)
			chunk := replicaFrame(wire.CommandStateChunk, 0, 0, func(h *wire.GenericHeader) {
				r := h.StateChunk()
				r.Nonce, r.Group = wire.Uint128{Lo: 1, Hi: 2}, group
			})
			body := []byte("0123456789abcdef")
			chunk.Size += uint32(len(body))
			expectDrop(t, tc.cores[1], DropStale, &chunk, body)
		}},
		{"a repaired body below the chain, the repair buffer full", DropRepairBufferFull, func(t *testing.T) {
			tc := behindCluster(t, 20)
			c := tc.cores[1]
			if !c.repair.active || c.log.trustLow != 20 {
				t.Fatalf("replica 1: repair active %v, trusted from %d", c.repair.active, c.log.trustLow)
			}
			for op := uint64(1); op <= uint64(testTiming.RepairChunkMax); op++ {
				p, body := tc.journaled(0, op, wire.CommandRepairPrepare)
				if err := c.Step(&p, body); err != nil {
					t.Fatal(err)
				}
			}
			p, body := tc.journaled(0, uint64(testTiming.RepairChunkMax)+1, wire.CommandRepairPrepare)
			expectDrop(t, c, DropRepairBufferFull, &p, body)
		}},
		{"a chunk request whose artifact cannot be read", DropReadFailed, func(t *testing.T) {
			tc := committedCluster(t)
			c := tc.cores[0]
			nonce := wire.Uint128{Lo: 5, Hi: 2}
			ask := replicaFrame(wire.CommandRequestStateTransfer, 1, 0, func(h *wire.GenericHeader) {
				r := h.RequestStateTransfer()
				r.Nonce, r.Group = nonce, group
			})
			if err := c.Step(&ask, nil); err != nil {
				t.Fatal(err)
			}
			c.OfferState(StateRequest{From: 1, Nonce: nonce}, c.CommitMin(), []Artifact{{Kind: wire.ArtifactClientTable, Source: failingSource{}}})
			chunk := replicaFrame(wire.CommandRequestStateChunk, 1, 0, func(h *wire.GenericHeader) {
				r := h.RequestStateChunk()
				r.Nonce, r.Group, r.Len = nonce, group, 100
			})
			expectDrop(t, c, DropReadFailed, &chunk, nil)
		}},
		{"a chunk request beyond the offer made under its nonce", DropStale, func(t *testing.T) {
			tc := committedCluster(t)
			c := tc.cores[0]
			nonce := wire.Uint128{Lo: 5, Hi: 2}
			ask := replicaFrame(wire.CommandRequestStateTransfer, 1, 0, func(h *wire.GenericHeader) {
				r := h.RequestStateTransfer()
				r.Nonce, r.Group = nonce, group
			})
			if err := c.Step(&ask, nil); err != nil {
				t.Fatal(err)
			}
			c.OfferState(StateRequest{From: 1, Nonce: nonce}, c.CommitMin(), []Artifact{
				{Kind: wire.ArtifactMetadataSnapshot, Bytes: []byte("ours")},
				{Kind: wire.ArtifactClientTable, Source: failingSource{}},
			})
			for _, beyond := range []struct {
				artifact uint32
				offset   uint64
			}{{2, 0}, {0, 5}, {1, 101}} {
				chunk := replicaFrame(wire.CommandRequestStateChunk, 1, 0, func(h *wire.GenericHeader) {
					r := h.RequestStateChunk()
					r.Nonce, r.Group, r.Len, r.Artifact, r.Offset = nonce, group, 100, beyond.artifact, beyond.offset
				})
				expectDrop(t, c, DropStale, &chunk, nil)
			}
		}},
		{"a state transfer target that contradicts the log", DropContradictsCommitted, func(t *testing.T) {
			tc := committedCluster(t)
			c := tc.cores[2]
			if !c.RequestTransfer(1) {
				t.Fatal("replica 2 asks for no state")
			}
			other, _ := forgedChain(2, 2, wire.Uint128{Lo: 0xbad})
			target := replicaFrame(wire.CommandStateTransferTarget, 0, 0, func(h *wire.GenericHeader) {
				s := (*wire.StateTransferTargetHeader)(headerPointer(h))
				s.Nonce, s.Group, s.Available, s.CommitOp, s.CommitChecksum = c.transfer.nonce, group, 1, 2, other[0].Checksum
			})
			body := wire.AppendManifest(nil, []wire.StateArtifact{{Kind: wire.ArtifactMetadataSnapshot, SizeBytes: 4, Checksum: wire.ArtifactChecksum([]byte("ours"))}})
			sealed(&target, body)
			expectDrop(t, c, DropContradictsCommitted, &target, body)
		}},
		{"a StartView whose log contradicts the applied ops", DropContradictsCommitted, func(t *testing.T) {
			tc := committedCluster(t)
			unchained, _ := forgedChain(3, 3, wire.Uint128{Lo: 0xbad})
			body := suffixBody(unchained)
			sv := replicaFrame(wire.CommandStartView, 1, 1, func(h *wire.GenericHeader) {
				s := h.StartView()
				s.Op, s.Commit, s.Group = 3, 3, group
			})
			sealed(&sv, body)
			expectDrop(t, tc.cores[2], DropContradictsCommitted, &sv, body)
		}},
		{"a frame while a Ready is out, the driver's queue full", DropFramesQueueFull, func(t *testing.T) {
			tc := committedCluster(t)
			tc.driverConfig.FramesQueuedMax = 1
			tc.drivers[0] = nil
			later(tc)
			d := tc.driver(0)
			tc.propose(0, 1, 3) // its Ready waits for the disk
			probe := replicaFrame(wire.CommandRequestStartView, 2, 0, func(h *wire.GenericHeader) { h.RequestStartView().Group = group })
			if err := d.Step(&probe, nil); err != nil {
				t.Fatal(err)
			}
			c := tc.cores[0]
			before, counts := protocolStateOf(c), c.Drops()
			if err := d.Step(&probe, nil); err != nil {
				t.Fatal(err)
			}
			counts[DropFramesQueueFull]++
			if got := c.Drops(); got != counts || protocolStateOf(c) != before {
				t.Fatalf("counts %v, want %v; state changed: %v", got, counts, protocolStateOf(c) != before)
			}
		}},
	}
	reached := map[DropReason]bool{}
	for _, tcase := range cases {
		reached[tcase.reason] = true
		t.Run(tcase.reason.String()+"/"+tcase.name, tcase.run)
	}
	for r := DropReason(0); r < DropReasonCount; r++ {
		if !reached[r] {
			t.Errorf("no input reaches drop reason %v", r)
		}
		if r.String() == "" || r.String() == DropReason(DropReasonCount).String() {
			t.Errorf("drop reason %d has no name", r)
		}
	}
}

// TestDropsAllocateNothing: reading the counts copies them out.
func TestDropsAllocateNothing(t *testing.T) {
	tc := committedCluster(t)
	var total uint64
	if n := testing.AllocsPerRun(100, func() { d := tc.cores[0].Drops(); total += d.Total() }); n != 0 {
		t.Fatalf("Drops allocates %v times", n)
	}
}

// A primary tells a stale replica its view at most once per view-change
// retransmit interval, however many of its frames arrive meanwhile: the limit
// was written and then overwritten with now, so every stale frame got a
// StartView of its own (the whole suffix of headers each).
func TestStaleReplicaToldItsViewOncePerInterval(t *testing.T) {
	tc := newTestCluster(t, 3)
	c := tc.cores[0]
	if !c.IsPrimary() {
		t.Fatal("replica 0 does not lead view 0")
	}
	for range 5 {
		c.answerStaleView(1)
	}
	if n := len(c.rd.Messages); n != 1 {
		t.Fatalf("%d StartViews for five stale frames within an interval, want 1", n)
	}
	c.now += testTiming.ViewChangeRetransmitTicks
	c.answerStaleView(1)
	c.answerStaleView(2)
	if n := len(c.rd.Messages); n != 3 {
		t.Fatalf("%d StartViews after the interval, want 3 (one more to each stale replica)", n)
	}
}
