package server

import (
	"testing"

	"github.com/iggy-shard/iggy-shard/metafiles"
	"github.com/iggy-shard/iggy-shard/segment"
	"github.com/iggy-shard/iggy-shard/vsr"
	"github.com/iggy-shard/iggy-shard/wire"
)

// TestReadBarrierWaitsForThePrimarysCommitPoint: a login refused at a backup is
// decided again only once the backup applied what its primary had committed when
// the barrier reached it. A frame of the primary already on its way (here a
// prepare sent before the commits) must not release the wait, as hearing from the
// primary once did: the backup then decided on a state without the user or token
// the client had just created, and refused it (TestClusterFollowerServesNewAccountsAtOnce,
// now and then).
func TestReadBarrierWaitsForThePrimarysCommitPoint(t *testing.T) {
	cfg := clusterConfigs(t, 3, testClusterSecret)[1]
	primary := newClusterPeer(t, &cfg, 0)
	var sent []vsr.Message
	m := clusterPlane(t, &cfg, metafiles.NewSimStorage(segment.NewSimDisk(1)), &sent)
	pumpPlane(t, m)
	for r := range 3 {
		body := createStreamBody(t, "barrier-"+string(rune('a'+r)))
		if _, err := primary.core.Propose(vsr.Proposal{Client: wire.Uint128{Lo: 7}, Request: uint64(r + 1), Operation: wire.OperationCreateStream}, body, 1_000_000+uint64(r)); err != nil {
			t.Fatal(err)
		}
		primary.drain()
	}
	prepares := primary.take(1, wire.CommandPrepare)
	stepPlane(t, m, prepares)
	// The backup's acknowledgements commit the three ops at the primary; its
	// commit point has not come back yet.
	for i := range sent {
		if err := primary.core.Step(&sent[i].Header, sent[i].Body); err != nil {
			t.Fatal(err)
		}
	}
	sent = sent[:0]
	primary.drain()
	primary.sent[1] = nil
	if primary.core.CommitMax() != 3 || m.Applied().Op != 0 {
		t.Fatalf("primary commit %d, backup applied %d: want 3 and 0", primary.core.CommitMax(), m.Applied().Op)
	}

	caughtUp, answered := false, false
	m.ReadBarrier(func(ok bool) { caughtUp, answered = ok, true })
	pumpPlane(t, m)
	// A frame of the primary that was on its way before: it says nothing of
	// what the primary committed since.
	stepPlane(t, m, prepares[2:])
	if answered {
		t.Fatalf("released (caught up %v) by a frame sent before the barrier, at applied op %d", caughtUp, m.Applied().Op)
	}
	// The barrier reaches the primary, which answers with its commit point; the
	// backup then waits for the commits.
	barrier := false
	for i := range sent {
		if sent[i].Header.Command == wire.CommandForwardLogout && sent[i].Header.ForwardLogout().Client.IsZero() {
			barrier = true
		}
	}
	if !barrier {
		t.Fatal("no read barrier sent to the primary")
	}
	exchange(t, m, primary, &sent)
	if answered {
		t.Fatalf("released before the commits were applied (applied op %d)", m.Applied().Op)
	}
	if !primary.core.Heartbeat() {
		t.Fatal("the primary sent no commit")
	}
	primary.drain()
	stepPlane(t, m, primary.take(1, wire.CommandCommit))
	if !answered || !caughtUp || m.Applied().Op != 3 {
		t.Fatalf("after the commits: answered %v, caught up %v, applied op %d", answered, caughtUp, m.Applied().Op)
	}
}
