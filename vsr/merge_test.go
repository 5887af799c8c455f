package vsr

import (
	"testing"

	"github.com/iggy-shard/iggy-shard/wire"
)

// chain makes prepares for ops from..to chained to parent; tag makes two chains
// differ from the op where they fork.
func chain(parent wire.Uint128, from, to uint64, tag byte) []wire.PrepareHeader {
	var hs []wire.PrepareHeader
	for op := from; op <= to; op++ {
		var h wire.PrepareHeader
		h.Cluster = wire.ClusterID("test")
		h.Command = wire.CommandPrepare
		h.Op, h.Parent, h.Group, h.Timestamp = op, parent, wire.MetadataGroup, op
		h.Request, h.Client = uint64(tag), wire.Uint128{Lo: 1}
		h.Operation = wire.OperationCreateStream
		h.ChecksumBody = wire.BodyChecksum(nil)
		h.SetIdentity()
		parent = h.Checksum
		hs = append(hs, h)
	}
	return hs
}

// vote is a DoViewChange as replica would send it: headers of ops (highest first),
// blanks where absent; a nack for each blank above commit; present where withBody.
func vote(logView uint32, commit uint64, log map[uint64]wire.PrepareHeader, head uint64, withBody func(op uint64) bool) *doViewChange {
	d := &doViewChange{logView: logView, op: head, commit: min(commit, head)}
	for op := head; op >= max(d.commit, 1) && op > 0; op-- {
		i := int(head - op)
		h, ok := log[op]
		if !ok {
			var blank wire.PrepareHeader
			blank.Op, blank.Command = op, wire.CommandPrepare
			d.headers = append(d.headers, blank)
			if op > d.commit {
				setBit(&d.nack, i)
			}
			continue
		}
		d.headers = append(d.headers, h)
		if withBody(op) {
			setBit(&d.present, i)
		}
	}
	return d
}

func logOf(parts ...[]wire.PrepareHeader) map[uint64]wire.PrepareHeader {
	m := map[uint64]wire.PrepareHeader{}
	for _, p := range parts {
		for _, h := range p {
			m[h.Op] = h
		}
	}
	return m
}

func all(uint64) bool  { return true }
func none(uint64) bool { return false }

// TestMergeCanonicalLog drives the new primary's merge of DoViewChange votes (view
// 4 of 3 replicas, so replica 1 leads it; quorum of votes 2, nack quorum 2).
func TestMergeCanonicalLog(t *testing.T) {
	base := chain(wire.Uint128{}, 1, 3, 'a')
	top := base[2].Checksum
	forkA := chain(top, 4, 5, 'a') // the log of log view 2
	forkB := chain(top, 4, 4, 'b') // the log of log view 3
	for _, tc := range []struct {
		name string
		// own is replica 1's log (all bodies journaled), with its log view.
		own        map[uint64]wire.PrepareHeader
		ownLogView uint32
		ownCommit  uint64
		votes      map[uint8]*doViewChange
		mutation   Mutation
		// Expected: merged, the head and its identity; or still waiting.
		merged   bool
		head     uint64
		headHash wire.Uint128
	}{
		{
			name: "the higher log view wins over the longer log",
			own:  logOf(base, forkA), ownLogView: 2, ownCommit: 3,
			votes:  map[uint8]*doViewChange{2: vote(3, 3, logOf(base, forkB), 4, all)},
			merged: true, head: 4, headHash: forkB[0].Checksum,
		},
		{
			name: "an op one voter holds is kept: it may have committed with the old primary",
			own:  logOf(base, forkA), ownLogView: 3, ownCommit: 3,
			votes:  map[uint8]*doViewChange{2: vote(3, 3, logOf(base), 3, all)},
			merged: true, head: 5, headHash: forkA[1].Checksum,
		},
		{
			name: "the same op is truncated when the nack quorum is broken on purpose",
			own:  logOf(base, forkA), ownLogView: 3, ownCommit: 3,
			votes:    map[uint8]*doViewChange{2: vote(3, 3, logOf(base), 3, all)},
			mutation: MutationTruncatePastNackQuorum,
			merged:   true, head: 3, headHash: top,
		},
		{
			name: "a header nobody can serve waits for more votes below the nack quorum",
			own:  logOf(base), ownLogView: 3, ownCommit: 3,
			votes:  map[uint8]*doViewChange{2: vote(3, 3, logOf(base, forkA), 5, func(op uint64) bool { return op <= 3 })},
			merged: false,
		},
		{
			name: "with the third vote the nack quorum truncates what nobody can serve",
			own:  logOf(base), ownLogView: 3, ownCommit: 3,
			votes: map[uint8]*doViewChange{
				2: vote(3, 3, logOf(base, forkA), 5, func(op uint64) bool { return op <= 3 }),
				0: vote(3, 3, logOf(base), 3, all),
			},
			merged: true, head: 3, headHash: top,
		},
		{
			name: "a committed op is never truncated: the commit point bounds the nacks",
			own:  logOf(base), ownLogView: 2, ownCommit: 2,
			votes: map[uint8]*doViewChange{
				2: vote(3, 3, logOf(base), 3, all),
				0: vote(1, 1, logOf(base[:1]), 1, all),
			},
			merged: true, head: 3, headHash: top,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := newMemStorage(64)
			c, err := NewCore(CoreConfig{
				Config: Config{Cluster: wire.ClusterID("test"), ReplicaID: 1, ReplicaCount: 3, Group: wire.MetadataGroup},
				Timing: testTiming, JournalSlots: 64, Storage: st, Mutation: tc.mutation,
			})
			if err != nil {
				t.Fatal(err)
			}
			for _, h := range tc.own {
				c.log.slots[h.Op%64] = slot{header: h, trusted: true, body: bodyDurable}
				st.put(&h, nil)
				c.op = max(c.op, h.Op)
			}
			c.logView, c.commitMax = tc.ownLogView, tc.ownCommit
			c.startViewChange(4)
			c.vc.dvcs[1] = c.ownDoViewChange()
			for replica, d := range tc.votes {
				c.vc.dvcs[replica] = d
			}
			c.checkDoViewChangeQuorum()
			merged := c.vc.mergeDone || (c.status == StatusNormal && c.logView == 4)
			if merged != tc.merged {
				t.Fatalf("merged %v, want %v (op %d, status %v)", merged, tc.merged, c.op, c.status)
			}
			if !tc.merged {
				return
			}
			h, ok := c.Header(c.op)
			if c.op != tc.head || !ok || h.Checksum != tc.headHash {
				t.Fatalf("merged head %d %v, want %d %v", c.op, h.Checksum, tc.head, tc.headHash)
			}
		})
	}
}
