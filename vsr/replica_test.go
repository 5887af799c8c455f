package vsr

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/iggy-shard/iggy-shard/wire"
)

func newTestReplica(t *testing.T, n, id uint8, group uint64, depth int) *Replica {
	t.Helper()
	r, err := NewReplica(Config{Cluster: wire.ClusterID("test"), ReplicaID: id, ReplicaCount: n, Group: group, PipelineDepth: depth})
	if err != nil {
		t.Fatal(err)
	}
	return r
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
		if _, err := NewReplica(cfg); err == nil {
			t.Errorf("NewReplica(%+v) accepted", cfg)
		}
	}
}

func TestSingleReplicaPrepareChainCommitApply(t *testing.T) {
	r := newTestReplica(t, 1, 0, wire.MetadataGroup, 4)
	var prev wire.Uint128
	var lastTimestamp uint64
	for i := uint64(1); i <= 10; i++ {
		body := []byte{byte(i), 1, 2, 3}
		var h wire.PrepareHeader
		// A clock that stands still must still give strictly increasing timestamps.
		if err := r.Prepare(&h, Proposal{Client: wire.Uint128{Lo: 7}, Request: i, Operation: wire.OperationCreateStream}, body, 1000); err != nil {
			t.Fatal(err)
		}
		if h.Op != i || h.Parent != prev || h.Timestamp <= lastTimestamp || h.Commit != i-1 {
			t.Fatalf("prepare %d: op %d parent %v timestamp %d commit %d", i, h.Op, h.Parent, h.Timestamp, h.Commit)
		}
		if h.Checksum != h.Identity() || h.ChecksumBody != wire.BodyChecksum(body) || h.Size != uint32(wire.HeaderSize+len(body)) {
			t.Fatalf("prepare %d: identity or body seal or size wrong", i)
		}
		if r.NextCommitPending() {
			t.Fatal("committed before the journal append")
		}
		if !r.OnJournaled(0, h.Op, h.Checksum) {
			t.Fatalf("op %d did not commit on the only replica's ack", i)
		}
		op, ok := r.NextCommit()
		if !ok || op != i {
			t.Fatalf("NextCommit = %d, %v; want %d", op, ok, i)
		}
		r.OnApplied(op)
		var reply wire.ReplyHeader
		r.FillReply(&reply, &h)
		if reply.Op != i || reply.Commit != i || reply.Request != i || reply.Client != h.Client || reply.Command != wire.CommandReply {
			t.Fatalf("reply header %+v", reply)
		}
		prev, lastTimestamp = h.Checksum, h.Timestamp
	}
}

func (r *Replica) NextCommitPending() bool { _, ok := r.NextCommit(); return ok }

func TestPartitionPrepareLeavesBodySealZero(t *testing.T) {
	group, ok := wire.PartitionGroup(1, 2, 3)
	if !ok {
		t.Fatal("partition group")
	}
	r := newTestReplica(t, 1, 0, group, 0)
	var h wire.PrepareHeader
	if err := r.Prepare(&h, Proposal{Operation: wire.OperationSendMessages}, []byte("batch"), 1); err != nil {
		t.Fatal(err)
	}
	if !h.ChecksumBody.IsZero() || h.Group != group {
		t.Fatalf("partition prepare: body seal %v group %d", h.ChecksumBody, h.Group)
	}
}

func TestPipelineFullAndAckFilters(t *testing.T) {
	r := newTestReplica(t, 3, 0, wire.MetadataGroup, 2)
	var h1, h2, h3 wire.PrepareHeader
	if err := r.Prepare(&h1, Proposal{}, nil, 1); err != nil {
		t.Fatal(err)
	}
	if err := r.Prepare(&h2, Proposal{}, nil, 2); err != nil {
		t.Fatal(err)
	}
	if err := r.Prepare(&h3, Proposal{}, nil, 3); !errors.Is(err, ErrPipelineFull) {
		t.Fatalf("third prepare in a pipeline of 2: %v", err)
	}
	// Own ack alone is not a quorum of 2 out of 3.
	if r.OnJournaled(0, 1, h1.Checksum) {
		t.Fatal("committed on one ack of three replicas")
	}
	// Acks that must be ignored: wrong identity, unknown op, replica out of range,
	// a duplicate of our own.
	for _, ack := range []struct {
		replica uint8
		op      uint64
		id      wire.Uint128
	}{{1, 1, h2.Checksum}, {1, 9, h1.Checksum}, {7, 1, h1.Checksum}, {0, 1, h1.Checksum}} {
		if r.OnJournaled(ack.replica, ack.op, ack.id) {
			t.Fatalf("ack %+v moved the commit point", ack)
		}
	}
	// Op 2 reaching its quorum first must not commit past op 1.
	r.OnJournaled(0, 2, h2.Checksum)
	if r.OnJournaled(2, 2, h2.Checksum) || r.CommitMax() != 0 {
		t.Fatalf("op 2 committed before op 1 (commit_max %d)", r.CommitMax())
	}
	if !r.OnJournaled(1, 1, h1.Checksum) || r.CommitMax() != 2 {
		t.Fatalf("quorum on op 1 should commit ops 1 and 2, commit_max %d", r.CommitMax())
	}
	if r.PipelineFull() {
		t.Fatal("pipeline still full after commits")
	}
	// A late ack of a committed op is a retransmit.
	if r.OnJournaled(2, 1, h1.Checksum) {
		t.Fatal("late ack moved the commit point")
	}
}

func TestBackupRefusesToPrepare(t *testing.T) {
	r := newTestReplica(t, 3, 1, wire.MetadataGroup, 0)
	var h wire.PrepareHeader
	if err := r.Prepare(&h, Proposal{}, nil, 1); !errors.Is(err, ErrNotPrimary) {
		t.Fatalf("backup prepared: %v", err)
	}
}

func TestOutOfOrderApplyPanics(t *testing.T) {
	r := newTestReplica(t, 1, 0, wire.MetadataGroup, 0)
	var h wire.PrepareHeader
	_ = r.Prepare(&h, Proposal{}, nil, 1)
	_ = r.Prepare(&h, Proposal{}, nil, 2)
	r.OnJournaled(0, 1, r.pipeline[r.pipelineHead].identity)
	defer func() {
		if recover() == nil {
			t.Fatal("applying op 2 before op 1 did not panic")
		}
	}()
	r.OnApplied(2)
}

func TestRestoreSingleReplica(t *testing.T) {
	r := newTestReplica(t, 1, 0, wire.MetadataGroup, 0)
	last := wire.Uint128{Lo: 99}
	if err := r.Restore(Recovered{Op: 5, Commit: 3, LastIdentity: last, LastTimestamp: 500}); err != nil {
		t.Fatal(err)
	}
	// Ops 4 and 5 were journaled: they are committed and must be applied again.
	for want := uint64(4); want <= 5; want++ {
		op, ok := r.NextCommit()
		if !ok || op != want {
			t.Fatalf("NextCommit = %d, %v; want %d", op, ok, want)
		}
		r.OnApplied(op)
	}
	var h wire.PrepareHeader
	if err := r.Prepare(&h, Proposal{}, nil, 10); err != nil {
		t.Fatal(err)
	}
	if h.Op != 6 || h.Parent != last || h.Timestamp != 501 {
		t.Fatalf("after restore: op %d parent %v timestamp %d", h.Op, h.Parent, h.Timestamp)
	}
	if err := r.Restore(Recovered{}); err == nil {
		t.Fatal("restore after prepare accepted")
	}
	multi := newTestReplica(t, 3, 0, wire.MetadataGroup, 0)
	if err := multi.Restore(Recovered{Op: 1, Commit: 1}); err == nil {
		t.Fatal("multi-replica restore accepted without a view change")
	}
	if err := newTestReplica(t, 1, 0, wire.MetadataGroup, 0).Restore(Recovered{Op: 1, Commit: 2}); err == nil {
		t.Fatal("commit above op accepted")
	}
}

// TestNormalCaseSimulation runs a primary and two backups in one goroutine from a
// seed: acks arrive in any order, duplicated, and the commit point must always be
// the longest prefix of ops with a quorum of acks, applied in order.
func TestNormalCaseSimulation(t *testing.T) {
	for seed := uint64(1); seed <= 50; seed++ {
		rng := rand.New(rand.NewPCG(seed, seed*7919))
		r := newTestReplica(t, 3, 0, wire.MetadataGroup, 8)
		type ack struct {
			replica uint8
			op      uint64
			id      wire.Uint128
		}
		var pending []ack
		acked := map[uint64]uint32{} // op -> replicas whose ack was delivered
		var now uint64
		applied := uint64(0)
		for step := 0; step < 400; step++ {
			now += uint64(rng.IntN(3))
			if rng.IntN(3) > 0 && !r.PipelineFull() {
				var h wire.PrepareHeader
				if err := r.Prepare(&h, Proposal{Request: uint64(step)}, nil, now); err != nil {
					t.Fatal(err)
				}
				for rep := uint8(0); rep < 3; rep++ {
					pending = append(pending, ack{rep, h.Op, h.Checksum})
				}
			}
			if len(pending) > 0 {
				k := rng.IntN(len(pending))
				a := pending[k]
				if rng.IntN(5) > 0 { // else it stays pending and arrives again: a duplicate
					pending = append(pending[:k], pending[k+1:]...)
				}
				acked[a.op] |= 1 << a.replica
				r.OnJournaled(a.replica, a.op, a.id)
			}
			// The commit point is the longest prefix with 2 acks.
			want := uint64(0)
			for op := uint64(1); popcount(acked[op]) >= 2; op++ {
				want = op
			}
			if r.CommitMax() != want {
				t.Fatalf("seed %d step %d: commit_max %d, want %d", seed, step, r.CommitMax(), want)
			}
			for {
				op, ok := r.NextCommit()
				if !ok {
					break
				}
				if op != applied+1 {
					t.Fatalf("seed %d: apply %d after %d", seed, op, applied)
				}
				r.OnApplied(op)
				applied = op
			}
		}
	}
}

// BenchmarkReplicaSingleNormalCase is the older single-replica path the server runs
// today (Prepare, OnJournaled, NextCommit, OnApplied), the baseline of
// BenchmarkCoreNormalCase/replicas=1.
func BenchmarkReplicaSingleNormalCase(b *testing.B) {
	r, err := NewReplica(Config{Cluster: wire.ClusterID("test"), ReplicaCount: 1, Group: wire.MetadataGroup})
	if err != nil {
		b.Fatal(err)
	}
	body := make([]byte, 128)
	var h wire.PrepareHeader
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for i := 0; b.Loop(); i++ {
		if err := r.Prepare(&h, Proposal{Client: wire.Uint128{Lo: 1}, Request: uint64(i + 1)}, body, uint64(i)); err != nil {
			b.Fatal(err)
		}
		r.OnJournaled(0, h.Op, h.Checksum)
		for op, ok := r.NextCommit(); ok; op, ok = r.NextCommit() {
			r.OnApplied(op)
		}
	}
}
