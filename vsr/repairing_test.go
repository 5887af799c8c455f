package vsr

import (
	"runtime"
	"testing"
	"weak"

	"github.com/iggy-shard/iggy-shard/wire"
)

// repairingBackup is replica 2 of three, told by replica 1's StartView of view 1
// the headers of ops commit..head of a chain whose bodies are 100 bytes each: it
// repairs the ops below, verifying them downward from commit, so each fetched op
// is a repair candidate until the chain reaches it.
type repairingBackup struct {
	t       *testing.T
	c       *Core
	storage *budgetStorage
	log     []wire.PrepareHeader
	bodies  [][]byte
}

const repairBodyBytes = 100

func newRepairingBackup(t *testing.T, head, commit uint64) *repairingBackup {
	b := &repairingBackup{t: t, storage: &budgetStorage{memStorage: newMemStorage(64)}}
	var parent wire.Uint128
	for op := uint64(1); op <= head; op++ {
		body := make([]byte, repairBodyBytes)
		body[0] = byte(op)
		var h wire.PrepareHeader
		h.Cluster, h.Command = wire.ClusterID("test"), wire.CommandPrepare
		h.Op, h.Parent, h.Group, h.Timestamp = op, parent, wire.MetadataGroup, op
		h.Request, h.Client, h.Operation = op, wire.Uint128{Lo: 1}, wire.OperationCreateStream
		h.Size = uint32(wire.HeaderSize + len(body))
		h.ChecksumBody = wire.BodyChecksum(body)
		h.SetIdentity()
		parent = h.Checksum
		b.log = append(b.log, h)
		b.bodies = append(b.bodies, body)
	}
	c, err := NewCore(CoreConfig{
		Config: Config{Cluster: wire.ClusterID("test"), ReplicaID: 2, ReplicaCount: 3, Group: wire.MetadataGroup},
		Timing: testTiming, JournalSlots: 64, Storage: b.storage,
	})
	if err != nil {
		t.Fatal(err)
	}
	b.c = c
	var sv wire.GenericHeader
	sv.Cluster, sv.View, sv.Command, sv.Replica = wire.ClusterID("test"), 1, wire.CommandStartView, 1
	m := sv.StartView()
	m.Op, m.Commit, m.Group = head, commit, wire.MetadataGroup
	var headers []byte
	for op := head; op >= commit; op-- {
		headers = append(headers, wire.HeaderBytes(&b.log[op-1])[:]...)
	}
	sv.SealBody(headers)
	b.step(&sv, headers)
	return b
}

func (b *repairingBackup) step(h *wire.GenericHeader, body []byte) {
	b.t.Helper()
	h.Size = uint32(wire.HeaderSize + len(body))
	if h.Command.FrameSealed() {
		wire.SealFrame(h.Bytes())
	}
	if err := b.c.Step(h, body); err != nil {
		b.t.Fatalf("%v: %v", h.Command, err)
	}
}

// drain does the core's Readies (writes to storage) and returns the repair
// requests they carried.
func (b *repairingBackup) drain() []wire.RequestPreparesHeader {
	var requests []wire.RequestPreparesHeader
	for b.c.HasReady() {
		rd := b.c.Ready()
		for i := range rd.Writes {
			b.storage.put(&rd.Writes[i].Header, rd.Writes[i].Body)
		}
		for i := range rd.Messages {
			if h := &rd.Messages[i].Header; h.Command == wire.CommandRequestPrepares {
				requests = append(requests, *h.RequestPrepares())
			}
		}
		b.c.Advance()
	}
	return requests
}

// repairPrepare is replica 1's answer for op.
func (b *repairingBackup) repairPrepare(op uint64) {
	b.t.Helper()
	var h wire.GenericHeader
	p := (*wire.PrepareHeader)(headerPointer(&h))
	*p = b.log[op-1]
	p.View, p.Command = 1, wire.CommandRepairPrepare
	h.Size = uint32(wire.HeaderSize + repairBodyBytes)
	if err := b.c.Step(&h, b.bodies[op-1]); err != nil {
		b.t.Fatalf("repair prepare %d: %v", op, err)
	}
}

// A Ready's writes are let go at Advance: the core keeps the slice for the next
// Ready, and its backing array held every body it ever carried until a later
// Ready overwrote the entry. A shard's partition groups each kept their last
// repair chunk's bodies that way: a backup that caught up 40 partitions by
// repair grew to 400-500 MB resident in the 3-node memory benchmark.
func TestReadyLetsGoOfTheBodiesItCarried(t *testing.T) {
	const head, commit = 30, 28
	b := newRepairingBackup(t, head, commit)
	rs := b.drain()
	if len(rs) != 1 {
		t.Fatalf("repair requests %+v, want one", rs)
	}
	for op := rs[0].FromOp; op <= rs[0].ToOp; op++ {
		b.repairPrepare(op)
	}
	var bodies []weak.Pointer[byte]
	for b.c.HasReady() {
		rd := b.c.Ready()
		for i := range rd.Writes {
			b.storage.put(&rd.Writes[i].Header, rd.Writes[i].Body)
			bodies = append(bodies, weak.Make(&rd.Writes[i].Body[0]))
		}
		b.c.Advance()
	}
	if len(bodies) != testTiming.RepairChunkMax {
		t.Fatalf("%d bodies written, want the chunk's %d", len(bodies), testTiming.RepairChunkMax)
	}
	runtime.GC()
	for i, w := range bodies {
		if w.Value() != nil {
			t.Fatalf("the body of write %d is still reachable after Advance", i)
		}
	}
	runtime.KeepAlive(b)
}
