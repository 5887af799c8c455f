package vsr

import (
	"errors"
	"testing"

	"github.com/iggy-shard/iggy-shard/wire"
)

type stubSessions struct {
	owners    map[wire.Uint128]uint32
	watermark uint64
}

func (s *stubSessions) RegisterAllowed(client wire.Uint128, userID uint32) bool {
	owner, ok := s.owners[client]
	return !ok || owner == userID
}

func (s *stubSessions) Watermark(wire.Uint128) uint64 { return s.watermark }

func (tc *testCluster) forwardsOf(i int) []ForwardOutcome {
	if i >= len(tc.forwards) {
		return nil
	}
	return tc.forwards[i]
}

func TestForwardRegisterCommitsAndAnswersWithEpoch(t *testing.T) {
	tc := newTestCluster(t, 3)
	sessions := &stubSessions{owners: map[wire.Uint128]uint32{{Lo: 9}: 2}, watermark: 41}
	tc.cores[0].cfg.Sessions = sessions
	client := wire.Uint128{Lo: 7}
	nonce, err := tc.cores[2].ForwardRegister(client, 5)
	if err != nil {
		t.Fatal(err)
	}
	tc.drain(2)
	tc.deliver(100)
	got := tc.forwardsOf(2)
	if len(got) != 1 || got[0].Nonce != nonce || !got[0].Register || got[0].Outcome != uint8(wire.ForwardRegisterOk) {
		t.Fatalf("origin got %+v", got)
	}
	h, ok := tc.cores[0].Header(got[0].Epoch)
	if !ok || h.Operation != wire.OperationRegister || h.Client != client || h.UserID != 5 || got[0].Watermark != 41 {
		t.Fatalf("epoch %d names %+v (watermark %d), want the register of client 7", got[0].Epoch, h, got[0].Watermark)
	}
	// A client id bound to another user is refused before anything is proposed.
	op := tc.cores[0].Op()
	if _, err := tc.cores[1].ForwardRegister(wire.Uint128{Lo: 9}, 5); err != nil {
		t.Fatal(err)
	}
	tc.drain(1)
	tc.deliver(100)
	if got := tc.forwardsOf(1); len(got) != 1 || got[0].Outcome != uint8(wire.ForwardRegisterClientIDOwnedByAnotherUser) || got[0].Epoch != 0 || tc.cores[0].Op() != op {
		t.Fatalf("foreign client id: %+v, primary op %d (was %d)", got, tc.cores[0].Op(), op)
	}
}

func TestForwardOutcomes(t *testing.T) {
	tc := newTestCluster(t, 3)
	client := wire.Uint128{Lo: 7}
	if _, err := tc.cores[0].ForwardRegister(client, 1); !errors.Is(err, ErrIsPrimary) {
		t.Fatalf("primary forwarding: %v", err)
	}
	// Two forwards of one client: the second is InProgress while the first is in
	// the pipeline (its prepare never leaves the primary, so it stays there).
	tc.cut[[2]int{0, 1}] = true
	tc.cores[1].ForwardRegister(client, 1)
	tc.drain(1)
	tc.deliver(100)
	tc.cores[2].ForwardLogout(client, 3, 4)
	tc.drain(2)
	tc.deliver(100)
	if got := tc.forwardsOf(2); len(got) != 1 || got[0].Outcome != uint8(wire.ForwardLogoutInProgress) {
		t.Fatalf("second forward: %+v, want InProgress", got)
	}
	// The first gets no answer in time: its origin reports a timeout.
	for k := 0; k < ForwardTimeoutTicks; k++ {
		tc.cores[1].Tick()
		tc.drain(1)
	}
	if got := tc.forwardsOf(1); len(got) != 1 || !got[0].TimedOut || !got[0].Register {
		t.Fatalf("origin outcomes %+v, want one timeout", got)
	}
	tc.queue = nil

	// A view change at the primary cancels what it had not committed.
	tc2 := newTestCluster(t, 3)
	tc2.cut[[2]int{0, 1}] = true
	tc2.cut[[2]int{0, 2}] = true
	tc2.cores[2].ForwardRegister(client, 1)
	tc2.drain(2)
	tc2.deliver(100)
	delete(tc2.cut, [2]int{0, 2})
	tc2.cores[0].startViewChange(1)
	tc2.drain(0)
	tc2.deliver(100)
	if got := tc2.forwardsOf(2); len(got) != 1 || got[0].Outcome != uint8(wire.ForwardRegisterCanceled) {
		t.Fatalf("after the view change: %+v, want Canceled", got)
	}

	// A backup answers NotPrimary.
	tc3 := newTestCluster(t, 3)
	tc3.cores[1].ForwardLogout(client, 3, 4)
	m := tc3.cores[1].rd.Messages[0]
	tc3.cores[1].rd.Messages[0].To = 2
	tc3.drain(1)
	tc3.deliver(100)
	if got := tc3.forwardsOf(1); len(got) != 1 || got[0].Outcome != uint8(wire.ForwardLogoutNotPrimary) || got[0].Register {
		t.Fatalf("forward to a backup: %+v (sent %v)", got, m.Header.Command)
	}
}

func TestForwardRefusedOnPartitionPlane(t *testing.T) {
	st := newMemStorage(64)
	group, _ := wire.PartitionGroup(1, 1, 1)
	c, err := NewCore(CoreConfig{Config: Config{Cluster: wire.ClusterID("test"), ReplicaID: 1, ReplicaCount: 3, Group: group}, Timing: testTiming, JournalSlots: 64, Storage: st})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.ForwardRegister(wire.Uint128{Lo: 1}, 1); err == nil {
		t.Fatal("a partition group forwards a login")
	}
	var g wire.GenericHeader
	g.Cluster, g.Size, g.Command, g.Replica = wire.ClusterID("test"), wire.HeaderSize, wire.CommandForwardRegister, 2
	f := (*wire.ForwardRegisterHeader)(headerPointer(&g))
	f.Client, f.Nonce = wire.Uint128{Lo: 1}, wire.Uint128{Lo: 1}
	if err := c.Step(&g, nil); !errors.Is(err, ErrBadMessage) {
		t.Fatalf("ForwardRegister on a partition group: %v", err)
	}
}

// TestForwardAbandonedAtViewChange: a login forwarded to a primary that has gone
// silent is answered (timed out, so retried) as soon as the backup starts a view
// change, not at the forward's own deadline.
func TestForwardAbandonedAtViewChange(t *testing.T) {
	tc := newTestCluster(t, 3)
	tc.cores[0].cfg.Sessions = &stubSessions{owners: map[wire.Uint128]uint32{}}
	for _, peer := range []int{1, 2} {
		tc.cut[[2]int{0, peer}] = true
		tc.cut[[2]int{peer, 0}] = true
	}
	nonce, err := tc.cores[2].ForwardRegister(wire.Uint128{Lo: 7}, 5)
	if err != nil {
		t.Fatal(err)
	}
	tc.drain(2)
	for k := 0; k < 3*int(testTiming.HeartbeatTimeoutTicks) && tc.cores[2].View() == 0; k++ {
		tc.tick(1)
	}
	if tc.cores[2].View() == 0 {
		t.Fatal("the backup never suspected its silent primary")
	}
	got := tc.forwardsOf(2)
	if len(got) != 1 || got[0].Nonce != nonce || !got[0].TimedOut {
		t.Fatalf("at the view change the origin got %+v, want its forward answered as timed out", got)
	}
}

// A read barrier (a ForwardLogout of client 0) is answered at once with the
// primary's commit point and proposes nothing; a backup that applied up to it
// holds every op the primary committed before the barrier reached it.
func TestForwardReadBarrierAnswersTheCommitPoint(t *testing.T) {
	tc := newTestCluster(t, 3)
	client := wire.Uint128{Lo: 7}
	if _, err := tc.cores[1].ForwardRegister(client, 1); err != nil {
		t.Fatal(err)
	}
	tc.drain(1)
	tc.deliver(100)
	primary := tc.cores[0]
	op, commit := primary.Op(), primary.CommitMax()
	if commit == 0 {
		t.Fatal("nothing committed to read")
	}
	nonce, err := tc.cores[2].ForwardLogout(wire.Uint128{}, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	tc.drain(2)
	tc.deliver(100)
	got := tc.forwardsOf(2)
	if len(got) != 1 || got[0].Nonce != nonce || got[0].Register || !got[0].Client.IsZero() ||
		got[0].Outcome != uint8(wire.ForwardLogoutOk) || got[0].Commit != commit {
		t.Fatalf("barrier answered %+v, want Ok at commit %d", got, commit)
	}
	if primary.Op() != op {
		t.Fatalf("the barrier proposed something: op %d -> %d", op, primary.Op())
	}
	// Half a barrier is bad input, and a primary is told to read its own state.
	if _, err := tc.cores[2].ForwardLogout(wire.Uint128{}, 1, 0); err == nil {
		t.Fatal("a logout of client 0 with a session was sent")
	}
	if _, err := primary.ForwardReadBarrier(); !errors.Is(err, ErrIsPrimary) {
		t.Fatalf("a primary's barrier: %v", err)
	}
}
