package vsr

import (
	"errors"
	"testing"

	"github.com/iggy-shard/iggy-shard/wire"
)

// The single-replica group: the server's metadata plane on one node.

func newSingleCore(t testing.TB, group uint64, depth int) (*Core, *memStorage) {
	t.Helper()
	st := newMemStorage(256)
	c, err := NewCore(CoreConfig{
		Config:  Config{Cluster: wire.ClusterID("test"), ReplicaCount: 1, Group: group, PipelineDepth: depth},
		Timing:  testTiming,
		Storage: st,
	})
	if err != nil {
		t.Fatal(err)
	}
	return c, st
}

func TestQuorums(t *testing.T) {
	// From the reference server's table: n -> (replication, view change).
	for _, tc := range []struct{ n, rep, vc int }{{1, 1, 1}, {2, 1, 2}, {3, 2, 2}, {4, 2, 3}, {5, 3, 3}, {7, 3, 5}} {
		if got := QuorumReplication(tc.n); got != tc.rep {
			t.Errorf("QuorumReplication(%d) = %d, want %d", tc.n, got, tc.rep)
		}
		if got := QuorumViewChange(tc.n); got != tc.vc {
			t.Errorf("QuorumViewChange(%d) = %d, want %d", tc.n, got, tc.vc)
		}
	}
}

func TestConfigRejected(t *testing.T) {
	for _, cfg := range []Config{
		{ReplicaCount: 0},
		{ReplicaCount: 33},
		{ReplicaCount: 3, ReplicaID: 3},
		{ReplicaCount: 1, PipelineDepth: 128},
		{ReplicaCount: 1, PipelineDepth: -1},
	} {
		if _, err := NewCore(CoreConfig{Config: cfg, Storage: newMemStorage(8)}); err == nil {
			t.Errorf("NewCore(%+v) accepted", cfg)
		}
	}
}

// TestSingleReplicaGroupCommit: proposals taken before a Ready are journaled by
// it together; they commit at its Advance (the replica is its own quorum) and come
// out, in order, as the next Ready's commits. The hash chain and timestamps hold
// across the batches, with a clock that stands still.
func TestSingleReplicaGroupCommit(t *testing.T) {
	c, st := newSingleCore(t, wire.MetadataGroup, 4)
	var prev wire.Uint128
	var lastTimestamp uint64
	next := uint64(1)
	for batch := 1; batch <= 5; batch++ {
		for k := 0; k < batch && k < 4; k++ {
			body := []byte{byte(next), 1, 2, 3}
			op, err := c.Propose(Proposal{Client: wire.Uint128{Lo: next}, Request: 1, Operation: wire.OperationCreateStream}, body, 1000)
			if err != nil || op != next {
				t.Fatalf("propose %d: op %d, %v", next, op, err)
			}
			next++
		}
		if _, err := c.Propose(Proposal{Client: wire.Uint128{Lo: 99}}, nil, 1000); batch >= 4 && !errors.Is(err, ErrPipelineFull) {
			t.Fatalf("batch %d: a fifth proposal in a pipeline of 4: %v", batch, err)
		} else if batch < 4 && err != nil {
			t.Fatal(err)
		} else if err == nil {
			next++
		}
		rd := c.Ready()
		if len(rd.Committed) != 0 || len(rd.Messages) != 0 {
			t.Fatalf("batch %d: %d commits and %d messages before the journal write", batch, len(rd.Committed), len(rd.Messages))
		}
		for i := range rd.Writes {
			h := &rd.Writes[i].Header
			if h.Parent != prev || h.Timestamp <= lastTimestamp || h.Checksum != h.Identity() ||
				h.ChecksumBody != wire.BodyChecksum(rd.Writes[i].Body) || h.Size != uint32(wire.HeaderSize+len(rd.Writes[i].Body)) {
				t.Fatalf("batch %d: write of op %d breaks the chain, the timestamps or the seals", batch, h.Op)
			}
			prev, lastTimestamp = h.Checksum, h.Timestamp
			st.put(h, rd.Writes[i].Body)
		}
		c.Advance()
		if c.CommitMax() != c.Op() {
			t.Fatalf("batch %d: commit_max %d after the journal write of ops up to %d", batch, c.CommitMax(), c.Op())
		}
		rd = c.Ready()
		if len(rd.Writes) != 0 || len(rd.Committed) == 0 || rd.Committed[len(rd.Committed)-1].Op != c.Op() {
			t.Fatalf("batch %d: the commits' Ready: %d writes, %d commits", batch, len(rd.Writes), len(rd.Committed))
		}
		for i := range rd.Committed {
			var reply wire.ReplyHeader
			c.FillReply(&reply, &rd.Committed[i])
			if reply.Op != rd.Committed[i].Op || reply.Commit != reply.Op || reply.Client != rd.Committed[i].Client || reply.Command != wire.CommandReply {
				t.Fatalf("reply header %+v", reply)
			}
		}
		c.Advance()
		if c.HasReady() {
			t.Fatalf("batch %d: work left after the commits", batch)
		}
	}
}

func TestPartitionPrepareLeavesBodySealZero(t *testing.T) {
	group, ok := wire.PartitionGroup(1, 2, 3)
	if !ok {
		t.Fatal("partition group")
	}
	c, _ := newSingleCore(t, group, 0)
	if _, err := c.Propose(Proposal{Operation: wire.OperationSendMessages}, []byte("batch"), 1); err != nil {
		t.Fatal(err)
	}
	h := c.Ready().Writes[0].Header
	if !h.ChecksumBody.IsZero() || h.Group != group {
		t.Fatalf("partition prepare: body seal %v group %d", h.ChecksumBody, h.Group)
	}
}

// TestInputBetweenReadyAndAdvancePanics: Advance clears the whole Ready, so a
// proposal, frame, tick or forward taken between the two would be marked done
// without being done; the core refuses it as the caller's bug.
func TestInputBetweenReadyAndAdvancePanics(t *testing.T) {
	c, _ := newSingleCore(t, wire.MetadataGroup, 0)
	if _, err := c.Propose(Proposal{Client: wire.Uint128{Lo: 1}, Request: 1}, []byte{1}, 1); err != nil {
		t.Fatal(err)
	}
	_ = c.Ready()
	var g wire.GenericHeader
	for name, input := range map[string]func(){
		"Propose": func() { c.Propose(Proposal{Client: wire.Uint128{Lo: 2}, Request: 1}, []byte{2}, 2) },
		"Step":    func() { c.Step(&g, nil) },
		"Tick":    func() { c.Tick() },
		"Forward": func() { c.ForwardRegister(wire.Uint128{Lo: 3}, 1) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s between Ready and Advance did not panic", name)
				}
			}()
			input()
		}()
	}
	c.Advance()
	if _, err := c.Propose(Proposal{Client: wire.Uint128{Lo: 2}, Request: 1}, []byte{2}, 2); err != nil {
		t.Fatalf("Propose after Advance: %v", err)
	}
}
