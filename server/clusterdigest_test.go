package server

import (
	"sync"
	"testing"
)

// The replicated state is the same on every replica: its metadata and its client
// table, whole (metaplane's Digest: the checksum of the snapshot of the applied
// state, which records no view). After each cluster test the servers still
// running are waited for until each has applied the op its primary committed, and
// their digests are compared (checkReplicatedState, registered by
// startTestServer); a test compares them at any point with sameMetadata.

// replicatedDigests waits until every server applied the same op, the one their
// primary committed, and returns it with each server's digest of its state.
func replicatedDigests(t *testing.T, servers []*Server) (uint64, []uint64) {
	t.Helper()
	digests := make([]uint64, len(servers))
	var op uint64
	waitUntil(t, "every node applies what its primary committed", func() bool {
		leader, ok := agreedLeader(servers)
		if !ok {
			return false
		}
		var commit uint64
		onMetaShard(t, servers[leaderIndex(servers, leader)], func(p *metaPlane) { commit = p.Core().CommitMax() })
		for i, s := range servers {
			var applied uint64
			onMetaShard(t, s, func(p *metaPlane) { applied, digests[i] = p.Applied().Op, p.Digest() })
			if applied != commit {
				return false
			}
		}
		op = commit
		return true
	})
	return op, digests
}

// leaderIndex is the index in servers of the one whose roster id is leader.
func leaderIndex(servers []*Server, leader uint8) int {
	for i, s := range servers {
		if s.cluster.self == leader {
			return i
		}
	}
	return 0
}

// sameMetadata fails the test unless every server holds the same replicated
// state, metadata and client table whole, and returns the op they hold it at.
func sameMetadata(t *testing.T, servers []*Server) uint64 {
	t.Helper()
	op, digests := replicatedDigests(t, servers)
	for i, d := range digests {
		if d != digests[0] {
			t.Fatalf("node %d's replicated state at op %d differs from node 0's (digest %x, node 0 %x)", i, op, d, digests[0])
		}
	}
	return op
}

// clusterTests are the clustered servers each test started, for the check at
// its end.
var clusterTests sync.Map // *testing.T -> *clusterCheck

type clusterCheck struct {
	servers []*Server
	done    bool
	skip    string
}

// checkReplicatedStateAtEnd registers s for the check of its test's end: once
// the test body is over, the servers still running must hold the same state once
// they caught up. A cleanup is registered with each server, after the one that
// stops it, so the first to run sees every server of the test still up.
func checkReplicatedStateAtEnd(t *testing.T, s *Server) {
	v, _ := clusterTests.LoadOrStore(t, &clusterCheck{})
	cc := v.(*clusterCheck)
	cc.servers = append(cc.servers, s)
	t.Cleanup(func() {
		if cc.done {
			return
		}
		cc.done = true
		clusterTests.Delete(t)
		if t.Failed() || cc.skip != "" {
			return
		}
		var running []*Server
		for _, s := range cc.servers {
			select {
			case <-s.rt.Done():
			default:
				running = append(running, s)
			}
		}
		if len(running) < 2 {
			return
		}
		sameMetadata(t, running)
	})
}

// skipReplicatedStateCheck leaves a test out of the check at its end, for why.
func skipReplicatedStateCheck(t *testing.T, why string) {
	if v, ok := clusterTests.Load(t); ok {
		v.(*clusterCheck).skip = why
	}
}
