package server

import (
	"testing"

	"github.com/iggy-shard/iggy-shard/metadata"
	"github.com/iggy-shard/iggy-shard/metaplane"
	"github.com/iggy-shard/iggy-shard/vsr"
	"github.com/iggy-shard/iggy-shard/wire"
)

// TestPrimarySendsPrepareBeforeItsJournalWrite: the primary's prepare leaves
// while its own journal write is out (vsr.Ready.SendableEarly), so the backup
// journals it meanwhile; it is sent once, and the write commits as before.
func TestPrimarySendsPrepareBeforeItsJournalWrite(t *testing.T) {
	p := newPrimaryPlane(t, 31)
	p.write(3) // a few ops first: the group is past its first Readies
	committed := false
	p.n.sent = p.n.sent[:0]
	files := p.m.Files
	files.Manual(true)
	p.m.Propose(vsr.Proposal{Operation: wire.OperationCreateStream, UserID: metadata.RootUserID}, createStreamBody(t, "early"), 1,
		func(_ *metaplane.Commit, err error) { committed = err == nil })
	if files.Queued() != 1 {
		t.Fatal("no journal write for the proposal")
	}
	op := p.m.Core().Op()
	prepares := func() int {
		n := 0
		for i := range p.n.sent {
			m := &p.n.sent[i]
			if m.Header.Command == wire.CommandPrepare && m.Header.Prepare().Op == op {
				n++
			}
		}
		return n
	}
	if prepares() != 1 {
		t.Fatalf("%d prepares of op %d sent before the primary's journal write", prepares(), op)
	}
	files.RunQueued()
	files.Manual(false)
	if prepares() != 1 {
		t.Fatalf("%d prepares of op %d sent once the write was durable, want the one sent before", prepares(), op)
	}
	p.settle()
	if !committed {
		t.Fatal("the write did not commit")
	}
}
