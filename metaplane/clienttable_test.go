package metaplane

import (
	"testing"

	"github.com/iggy-shard/iggy-shard/metadata"
	"github.com/iggy-shard/iggy-shard/vsr"
	"github.com/iggy-shard/iggy-shard/wire"
)

// TestClientTableCrossedAtTheDefault: a single node's client table at the
// production size (vsr.ClientsTableMaxDefault, [metadata] clients_table_max's
// default) filled half again past full: every Register past it evicts exactly
// one session, the one whose latest commit is oldest, and the commit names it
// (Commit.Ended, what shard 0 forgets its callers' sessions by); an evicted
// client's write is refused for want of a session, and the table never grows
// past its size.
func TestClientTableCrossedAtTheDefault(t *testing.T) {
	const size = vsr.ClientsTableMaxDefault
	h := &memHost{answers: map[uint64]Answer{}}
	rec := &Recovered{Snapshot: &Snapshot{State: metadata.NewState("iggy", "x", 1), Table: vsr.NewClientTable(size)}}
	p, err := Open(Config{ServerVersion: "test", CheckpointIntervalOps: CheckpointIntervalOpsMax(JournalSlotsMin)}, rec, h)
	if err != nil {
		t.Fatal(err)
	}
	h.p = p
	if err := p.Replay(); err != nil {
		t.Fatal(err)
	}
	client := func(i int) wire.Uint128 { return wire.Uint128{Lo: uint64(i) + 1} }
	const registers = size + size/2
	for i := range registers {
		commits := len(h.commits)
		p.Register(uint64(i+1), &wire.RequestHeader{Client: client(i)}, 0, uint64(i+2))
		if a := h.answers[uint64(i+1)]; a.Epoch == 0 {
			t.Fatalf("register %d: %+v", i, a)
		}
		if len(h.commits) != commits+1 {
			t.Fatalf("register %d committed %d ops", i, len(h.commits)-commits)
		}
		ended := h.commits[len(h.commits)-1].Ended
		switch {
		case i < size && len(ended) != 0:
			t.Fatalf("register %d into a table with room ended %v", i, ended)
		case i >= size && (len(ended) != 1 || ended[0] != client(i-size)):
			t.Fatalf("register %d into a full table ended %v, want the oldest, %v", i, ended, client(i-size))
		}
		if n := p.Table().Len(); n != min(i+1, size) {
			t.Fatalf("after register %d the table holds %d", i, n)
		}
		h.commits = h.commits[:0]
	}
	if p.SnapshotsTaken() == 0 {
		t.Fatal("no checkpoint over the run")
	}
	// An evicted client's write: no session.
	body, _ := wire.AppendName(nil, []byte("evicted"))
	p.Write(registers+1, Request{Header: &wire.RequestHeader{Client: client(0), Session: 1, Request: 1, Operation: wire.OperationCreateStream,
		RequestChecksum: wire.RequestChecksum(body)}, Body: body, NowMicros: registers + 3})
	if a := h.answers[registers+1]; a.Evict != wire.EvictionNoSession {
		t.Fatalf("an evicted client's write: %+v, want no session", a)
	}
}
