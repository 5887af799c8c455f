package vsr

import (
	"slices"
	"testing"

	"github.com/iggy-shard/iggy-shard/wire"
)

// recoveredCore is replica id of a group of three, restarted from rec.
func recoveredCore(t *testing.T, id uint8, rec CoreRecovered) *Core {
	t.Helper()
	c, err := NewCore(CoreConfig{
		Config: Config{Cluster: wire.ClusterID("test"), ReplicaID: id, ReplicaCount: 3, Group: wire.MetadataGroup},
		Timing: testTiming, JournalSlots: 64, Storage: newMemStorage(64), Incarnation: wire.Uint128{Lo: uint64(id) + 1},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Recover(rec); err != nil {
		t.Fatal(err)
	}
	return c
}

func headersOf(log []wire.PrepareHeader, ops ...uint64) []wire.PrepareHeader {
	var hs []wire.PrepareHeader
	for _, h := range log {
		if slices.Contains(ops, h.Op) {
			hs = append(hs, h)
		}
	}
	return hs
}

// TestCoreFaultyOpIsNotNacked: a replica that restarts with a corrupt journal entry
// above its commit point prepared that op, so its DoViewChange must not nack it
// (the nack is the authority to truncate); an op it never journaled is nacked.
func TestCoreFaultyOpIsNotNacked(t *testing.T) {
	log := chain(wire.Uint128{}, 1, 5, 'a')
	for _, tc := range []struct {
		name        string
		rec         CoreRecovered
		head        uint64
		nack        []uint64 // ops nacked
		present     []uint64 // ops with their body
		headersKnow []uint64 // ops whose header the vote carries
	}{
		{
			name: "an op never journaled is nacked",
			rec:  CoreRecovered{State: DurableState{CommitMax: 2}, Headers: headersOf(log, 1, 2, 3, 5)},
			head: 5, nack: []uint64{4}, present: []uint64{2, 3, 5}, headersKnow: []uint64{2, 3, 5},
		},
		{
			name: "a corrupt entry in the middle is neither present nor nacked",
			rec:  CoreRecovered{State: DurableState{CommitMax: 2}, Headers: headersOf(log, 1, 2, 3, 5), Faulty: []uint64{4}},
			head: 5, present: []uint64{2, 3, 5}, headersKnow: []uint64{2, 3, 5},
		},
		{
			name: "a torn entry at the head raises the head and is not nacked",
			rec:  CoreRecovered{State: DurableState{CommitMax: 2}, Headers: headersOf(log, 1, 2, 3, 4), Faulty: []uint64{5}},
			head: 5, present: []uint64{2, 3, 4}, headersKnow: []uint64{2, 3, 4},
		},
		{
			name: "an op found intact is not faulty",
			rec:  CoreRecovered{State: DurableState{CommitMax: 2}, Headers: headersOf(log, 1, 2, 3, 4, 5), Faulty: []uint64{4}},
			head: 5, present: []uint64{2, 3, 4, 5}, headersKnow: []uint64{2, 3, 4, 5},
		},
		{
			name: "the persisted view headers name a faulty op: a header without its body",
			rec: CoreRecovered{State: DurableState{CommitMax: 2}, Headers: headersOf(log, 1, 2, 3, 5), Faulty: []uint64{4},
				ViewHeaders: headersOf(log, 5, 4, 3, 2)},
			head: 5, present: []uint64{2, 3, 5}, headersKnow: []uint64{2, 3, 4, 5},
		},
		{
			name: "an op whose header alone was persisted is nacked: it was never journaled",
			rec: CoreRecovered{State: DurableState{CommitMax: 2}, Headers: headersOf(log, 1, 2, 3, 5),
				ViewHeaders: headersOf(log, 5, 4, 3, 2)},
			head: 5, nack: []uint64{4}, present: []uint64{2, 3, 5}, headersKnow: []uint64{2, 3, 4, 5},
		},
		{
			name: "a faulty op at or below the checkpoint is applied already",
			rec: CoreRecovered{State: DurableState{CommitMax: 3}, Headers: headersOf(log, 3, 4, 5), Faulty: []uint64{2},
				Checkpoint: Checkpoint{Op: 3, Identity: log[2].Checksum, Timestamp: log[2].Timestamp}},
			head: 5, present: []uint64{3, 4, 5}, headersKnow: []uint64{3, 4, 5},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := recoveredCore(t, 2, tc.rec)
			if c.Op() != tc.head {
				t.Fatalf("recovered head %d, want %d", c.Op(), tc.head)
			}
			c.startViewChange(1) // replica 1 leads view 1
			c.vc.svcFrom |= 1 << 0
			c.checkStartViewChangeQuorum()
			var dvc *Message
			rd := c.Ready()
			for i := range rd.Messages {
				if rd.Messages[i].Header.Command == wire.CommandDoViewChange {
					dvc = &rd.Messages[i]
				}
			}
			if dvc == nil {
				t.Fatal("no DoViewChange sent")
			}
			m := dvc.Header.DoViewChange()
			if m.Op != tc.head {
				t.Fatalf("DoViewChange head %d, want %d", m.Op, tc.head)
			}
			headers, err := c.decodeSuffix(dvc.Body, m.Op, true)
			if err != nil {
				t.Fatal(err)
			}
			for i, h := range headers {
				op := m.Op - uint64(i)
				if got, want := hasBit(m.NackBitset, i), slices.Contains(tc.nack, op); got != want {
					t.Errorf("op %d: nacked %v, want %v", op, got, want)
				}
				if got, want := hasBit(m.PresentBitset, i), slices.Contains(tc.present, op); got != want {
					t.Errorf("op %d: present %v, want %v", op, got, want)
				}
				if got, want := !h.Checksum.IsZero(), slices.Contains(tc.headersKnow, op); got != want {
					t.Errorf("op %d: header carried %v, want %v", op, got, want)
				}
			}
			c.Advance()
		})
	}
}

// TestCoreFaultyOpKeepsCommittedOp: view 4 of three replicas (replica 1 leads it,
// nack quorum 2). Op 4 committed in view 3 at replicas 0 and 2; replica 1 never
// got it. Replica 2 restarted with op 4's entry corrupt. Had it nacked op 4, its
// nack and replica 1's would have truncated a committed op; not nacked, the new
// primary waits for a vote that holds it.
func TestCoreFaultyOpKeepsCommittedOp(t *testing.T) {
	base := chain(wire.Uint128{}, 1, 3, 'a')
	log := append(base, chain(base[2].Checksum, 4, 4, 'a')...)
	for _, tc := range []struct {
		name     string
		faulty   []uint64 // replica 2's corrupt entries
		withZero bool     // replica 0's vote is in
		merged   bool
		head     uint64
	}{
		{name: "a lost entry taken for never prepared truncates the committed op", faulty: nil, merged: true, head: 3},
		{name: "a faulty entry is not a nack: the primary waits", faulty: []uint64{4}, merged: false},
		{name: "the vote that holds it keeps the committed op", faulty: []uint64{4}, withZero: true, merged: true, head: 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Replica 2 restarts; its probes go unanswered and it elects.
			r2 := recoveredCore(t, 2, CoreRecovered{State: DurableState{View: 3, LogView: 3, CommitMax: 3}, Headers: base, Faulty: tc.faulty})
			r2.startViewChange(4)
			vote2 := r2.ownDoViewChange()

			st := newMemStorage(64)
			c, err := NewCore(CoreConfig{
				Config: Config{Cluster: wire.ClusterID("test"), ReplicaID: 1, ReplicaCount: 3, Group: wire.MetadataGroup},
				Timing: testTiming, JournalSlots: 64, Storage: st,
			})
			if err != nil {
				t.Fatal(err)
			}
			for _, h := range base {
				c.log.slots[h.Op%64] = slot{header: h, trusted: true, body: bodyDurable}
				st.put(&h, nil)
				c.op = h.Op
			}
			c.view, c.logView, c.commitMax = 3, 3, 3
			c.startViewChange(4)
			c.vc.dvcs[1] = c.ownDoViewChange()
			c.vc.dvcs[2] = vote2
			if tc.withZero {
				c.vc.dvcs[0] = vote(3, 3, logOf(log), 4, all)
			}
			c.checkDoViewChangeQuorum()
			merged := c.vc.mergeDone || c.status == StatusNormal
			if merged != tc.merged {
				t.Fatalf("merged %v, want %v (head %d)", merged, tc.merged, c.op)
			}
			if merged && c.op != tc.head {
				t.Fatalf("merged head %d, want %d", c.op, tc.head)
			}
		})
	}
}

// TestMergeWithFaultyOps drives the merge of view 4 of three replicas (replica 1
// leads it; nack quorum 2) where a faulty entry leaves a gap in the canonical log.
func TestMergeWithFaultyOps(t *testing.T) {
	base := chain(wire.Uint128{}, 1, 3, 'a')
	top := base[2].Checksum
	ops := chain(top, 4, 6, 'a')
	type ownSlot struct {
		op             uint64
		header, faulty bool
		body           bool
	}
	for _, tc := range []struct {
		name   string
		own    []ownSlot // replica 1's ops above 3 (log view 3, commit 3)
		votes  map[uint8]*doViewChange
		merged bool
		head   uint64
	}{
		{
			name:   "the hash chain names a faulty op's header, held in an older log",
			own:    []ownSlot{{op: 4, faulty: true}, {op: 5, header: true, body: true}},
			votes:  map[uint8]*doViewChange{2: vote(2, 3, logOf(base, ops), 5, all)},
			merged: true, head: 5,
		},
		{
			// Ops 4 and 5 are faulty here and op 5 is nowhere else, so op 4's
			// canonical header is unknown: the older log's op 4 at replicas 0 and 2
			// may be it (then committed), so they are no nack quorum.
			name:   "an older log's header where the canonical one is unknown is no nack",
			own:    []ownSlot{{op: 4, faulty: true}, {op: 5, faulty: true}, {op: 6, header: true, body: true}},
			votes:  map[uint8]*doViewChange{0: vote(2, 3, logOf(base, ops[:1]), 4, all), 2: vote(2, 3, logOf(base, ops[:1]), 4, all)},
			merged: false,
		},
		{
			name:   "a nack quorum at a lower op truncates the ops above it, whose bodies are held",
			own:    []ownSlot{{op: 4, header: true}, {op: 5, header: true, body: true}},
			votes:  map[uint8]*doViewChange{2: vote(3, 3, logOf(base), 3, all)},
			merged: true, head: 3,
		},
		{
			name:   "a faulty op is no nack: without a body anywhere the primary waits",
			own:    []ownSlot{{op: 4, faulty: true, header: true}, {op: 5, header: true, body: true}},
			votes:  map[uint8]*doViewChange{2: vote(3, 3, logOf(base), 3, all)},
			merged: false,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := newMemStorage(64)
			c, err := NewCore(CoreConfig{
				Config: Config{Cluster: wire.ClusterID("test"), ReplicaID: 1, ReplicaCount: 3, Group: wire.MetadataGroup},
				Timing: testTiming, JournalSlots: 64, Storage: st,
			})
			if err != nil {
				t.Fatal(err)
			}
			for _, h := range base {
				c.log.slots[h.Op%64] = slot{header: h, trusted: true, body: bodyDurable}
				st.put(&h, nil)
			}
			c.op = 3
			for _, o := range tc.own {
				s := slot{faulty: o.faulty}
				s.header.Op = o.op
				if o.header {
					s.header, s.trusted = ops[o.op-4], true
				}
				if o.body {
					s.body = bodyDurable
					st.put(&s.header, nil)
				}
				c.log.slots[o.op%64] = s
				c.op = o.op
			}
			c.logView, c.commitMax, c.commitMin = 3, 3, 3
			c.startViewChange(4)
			c.vc.dvcs[1] = c.ownDoViewChange()
			for replica, d := range tc.votes {
				c.vc.dvcs[replica] = d
			}
			c.checkDoViewChangeQuorum()
			merged := c.vc.mergeDone || c.status == StatusNormal
			if merged != tc.merged {
				t.Fatalf("merged %v, want %v (op %d)", merged, tc.merged, c.op)
			}
			if merged && c.op != tc.head {
				t.Fatalf("merged head %d, want %d", c.op, tc.head)
			}
		})
	}
}

// TestCoreFaultyOpRepaired: a backup restarts with a corrupt entry in the middle
// of its journal and a torn one at its head, follows the primary's StartView and
// repairs both from its peers, without discarding the intact entries between.
func TestCoreFaultyOpRepaired(t *testing.T) {
	tc := newTestCluster(t, 3)
	for r := uint64(1); r <= 5; r++ {
		tc.propose(0, r, 1)
		tc.deliver(100)
	}
	tc.tick(int(testTiming.CommitBroadcastIntervalTicks))
	tc.deliver(100)
	st := tc.storages[2]
	rec := CoreRecovered{State: tc.cores[2].durable, Faulty: []uint64{3, 5}}
	for _, op := range []uint64{1, 2, 4} {
		rec.Headers = append(rec.Headers, st.headers[op])
	}
	st.headers[3], st.headers[5] = wire.PrepareHeader{}, wire.PrepareHeader{} // the journal lost them
	c, err := NewCore(CoreConfig{Config: tc.cores[2].cfg.Config, Timing: testTiming, JournalSlots: 256, Storage: st, Incarnation: wire.Uint128{Lo: 9}})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Recover(rec); err != nil {
		t.Fatal(err)
	}
	tc.cores[2] = c
	tc.discarded = make([][]uint64, 3)
	tc.drain(2)
	for range 20 {
		tc.deliver(100)
		tc.tick(int(testTiming.RepairRetryIntervalTicks))
	}
	if c.Status() != StatusNormal || c.CommitMin() != 5 {
		t.Fatalf("restarted backup: %v applied %d, want Normal and 5", c.Status(), c.CommitMin())
	}
	for op := 1; op <= 5; op++ {
		if want := tc.storages[0].headers[op].Checksum; st.headers[op].Checksum != want {
			t.Errorf("op %d not repaired", op)
		}
	}
	if len(tc.discarded[2]) > 0 {
		t.Errorf("the restarted backup discarded %v", tc.discarded[2])
	}
}

// TestCoreSingleReplicaRefusesFaulty: a group of one has nobody to repair from.
func TestCoreSingleReplicaRefusesFaulty(t *testing.T) {
	c, _ := newSingleCore(t, wire.MetadataGroup, 0)
	log := chain(wire.Uint128{}, 1, 3, 'a')
	if err := c.Recover(CoreRecovered{Headers: headersOf(log, 1, 3), Faulty: []uint64{2}}); err == nil {
		t.Fatal("a group of one recovered with a faulty entry")
	}
}
