package partition

import (
	"runtime"
	"testing"

	"github.com/iggy-shard/iggy-shard/vsr"
	"github.com/iggy-shard/iggy-shard/wire"
)

// A backup whose journal file write fails stops serving its partition (its
// acknowledgement must not go out: the write is not durable) and takes no input
// until Recover; the group commits without it meanwhile, and once recovered the
// replica catches up. Its group stays on the shard's timers all along.
func TestClusterBackupJournalWriteFailure(t *testing.T) {
	c := newTestCluster(t, 7, 3, fsyncConfig())
	rec := newSendRecorder()
	c.send(makeBatch(t, 0, 2, 20), 1000, rec, 1)
	c.settle()
	c.storages[1].disks[c.stores[1].Dir(testKey)].FailNextSyncs(1)
	c.send(makeBatch(t, 2, 2, 20), 2000, rec, 2)
	c.settle()
	if c.stores[1].Err(testKey) == nil {
		t.Fatal("the backup whose journal sync failed still serves its partition")
	}
	c.tick(int(partitionTiming.HeartbeatTimeoutTicks + 2*partitionTiming.CommitBroadcastIntervalTicks))
	c.send(makeBatch(t, 4, 2, 20), 3000, rec, 3)
	c.settle()
	for token := uint64(1); token <= 3; token++ {
		if got, ok := rec.acked[token]; !ok || got.BaseOffset != 2*(token-1) {
			t.Fatalf("send %d: acked %v at %d, failed %v", token, ok, got.BaseOffset, rec.failed[token])
		}
	}
	if _, err := c.stores[1].Recover(testKey); err != nil {
		t.Fatal(err)
	}
	c.tick(int(partitionTiming.HeartbeatTimeoutTicks + 2*partitionTiming.CommitBroadcastIntervalTicks))
	c.stores[1].WaitIdle()
	_, msgs := poll(t, c.stores[1], testKey, PollRequest{Strategy: wire.PollingStrategy{Kind: wire.PollingFirst}, Count: 100})
	if len(msgs) != 6 {
		t.Fatalf("the recovered backup serves %v, want offsets 0..5", offsetsOf(msgs))
	}
}

// Frames that come while a group's Ready waits for its journal write are held by
// its Driver, their copies counted against the body budget, and fed after the
// Ready; past the Driver's bound they are dropped and counted
// (vsr.DropFramesQueueFull) in the store's Drops, which keeps the counts of a group
// restarted (a purge) and copies them out without allocating. The old loop dropped
// them without a trace.
func TestClusterFramesHeldPastTheBoundAreCounted(t *testing.T) {
	c := newTestCluster(t, 9, 3, fsyncConfig())
	rec := newSendRecorder()
	c.sendAll(0, 1, rec, 1)
	var prepare []byte
	c.intercept = func(f *netFrame) bool {
		if f.to == 1 && f.header().Command == wire.CommandPrepare {
			prepare = append([]byte(nil), f.buf...)
		}
		return true
	}
	c.send(makeBatch(t, 3, 3, 40), 20_000, rec, 2)
	backup := c.stores[1]
	for !backup.partitions[testKey].holding() {
		if !c.deliverOne() {
			t.Fatal("the backup never wrote its journal")
		}
	}
	c.intercept = nil
	before := backup.bodies.inUseBytes
	const extra = 6
	for i := 0; i < vsr.FramesQueuedMaxDefault+extra; i++ {
		if err := stepFrame(t, backup, prepare); err != nil {
			t.Fatalf("frame %d held: %v", i, err)
		}
	}
	body := int64(len(prepare) - wire.HeaderSize)
	if held := backup.bodies.inUseBytes - before; held != vsr.FramesQueuedMaxDefault*body {
		t.Fatalf("%d bytes of held frames counted, want %d", held, vsr.FramesQueuedMaxDefault*body)
	}
	drops := backup.Drops()
	if drops[vsr.DropFramesQueueFull] != extra {
		t.Fatalf("drops %v: want %d frames past the bound", drops, extra)
	}
	c.checkBodiesGiven()
	if _, ok := rec.acked[2]; !ok {
		t.Fatalf("send 2 not acknowledged (%v)", rec.failed[2])
	}
	if err := backup.Purge(testKey, 1); err != nil {
		t.Fatal(err)
	}
	if got := backup.Drops(); got[vsr.DropFramesQueueFull] != extra || got.Total() < drops.Total() {
		t.Fatalf("after a purge the store counts %v, before %v", got, drops)
	}
	if allocs := testing.AllocsPerRun(10, func() { _ = backup.Drops() }); allocs != 0 {
		t.Fatalf("Drops allocates %v times", allocs)
	}
}

type offsetRecorder struct {
	done map[uint64]error
}

func (r *offsetRecorder) OffsetDone(token uint64, err error) { r.done[token] = err }

// A replicated consumer offset store that comes while the group's Ready waits for
// its journal write is held and proposed after it, like a send, and answered once
// applied; the old loop refused it (58) for the client to ask again.
func TestClusterOffsetStoreWaitsForTheReadyOut(t *testing.T) {
	c := newTestCluster(t, 11, 3, fsyncConfig())
	rec := newSendRecorder()
	c.sendAll(0, 2, rec, 1)
	c.send(makeBatch(t, 6, 3, 40), 20_000, rec, 5)
	primary := c.stores[0]
	if !primary.partitions[testKey].holding() {
		t.Fatal("the primary's journal write is not out")
	}
	offsets := &offsetRecorder{done: map[uint64]error{}}
	consumer := Consumer{Kind: wire.ConsumerSingle, ID: 7}
	deferred, err := primary.ReplicateConsumerOffset(testKey, consumer, 4, false, offsets, 1)
	if err != nil || !deferred {
		t.Fatalf("offset store while the Ready is out: deferred %v, %v", deferred, err)
	}
	c.settle()
	if err, ok := offsets.done[1]; !ok || err != nil {
		t.Fatalf("offset store answered %v %v", ok, err)
	}
	c.tick(int(partitionTiming.CommitBroadcastIntervalTicks) + 1) // the backups learn the commit
	for i, s := range c.stores {
		if got, ok, _ := s.ConsumerOffset(testKey, consumer); !ok || got.StoredOffset != 4 {
			t.Fatalf("replica %d holds offset %d %v, want 4", i, got.StoredOffset, ok)
		}
	}
}

// A group's Driver keeps few of the buffers it copied held frames into: a backup
// that took a burst of frames while its journal write was out does not hold their
// memory once it is idle (the Driver's default would keep up to 64 buffers of 64
// KiB, for every partition that ever took such a burst). The live heap after the
// burst is compared with that of the same run without it.
func TestClusterHeldFrameBuffersAreLetGo(t *testing.T) {
	quiet := heapAfterHeldFrames(t, 0)
	burst := heapAfterHeldFrames(t, vsr.FramesQueuedMaxDefault)
	kept := burst.grown - quiet.grown
	t.Logf("%d bytes live after the burst, against the same run without it", kept)
	if kept > int64(burst.frameBytes)*vsr.FramesQueuedMaxDefault/8 {
		t.Fatalf("%d bytes live after %d frames of %d bytes were held and fed", kept, vsr.FramesQueuedMaxDefault, burst.frameBytes)
	}
}

type heldFramesHeap struct {
	grown      int64
	frameBytes int
}

// heapAfterHeldFrames steps a backup frames copies of a prepare while its journal
// write is out, settles, and returns how much the live heap grew meanwhile.
func heapAfterHeldFrames(t *testing.T, frames int) heldFramesHeap {
	c := newTestCluster(t, 13, 3, fsyncConfig())
	rec := newSendRecorder()
	c.sendAll(0, 1, rec, 1)
	var prepare []byte
	c.intercept = func(f *netFrame) bool {
		if f.to == 1 && f.header().Command == wire.CommandPrepare {
			prepare = append([]byte(nil), f.buf...)
		}
		return true
	}
	c.send(makeBatch(t, 3, 40, 1000), 20_000, rec, 2)
	backup := c.stores[1]
	for !backup.partitions[testKey].holding() {
		if !c.deliverOne() {
			t.Fatal("the backup never wrote its journal")
		}
	}
	c.intercept = nil
	if body := len(prepare) - wire.HeaderSize; body < 32<<10 || body > 64<<10 {
		t.Fatalf("a prepare of %d bytes: the test wants one the Driver would keep", body)
	}
	before := liveHeapBytes()
	for i := 0; i < frames; i++ {
		if err := stepFrame(t, backup, prepare); err != nil {
			t.Fatal(err)
		}
	}
	c.checkBodiesGiven()
	c.queue = nil // the frames delivered, which its backing array still holds
	grown := liveHeapBytes() - before
	runtime.KeepAlive(c)
	return heldFramesHeap{grown: grown, frameBytes: len(prepare)}
}

// A deferred offset store the primary prepared, whose group stops before it commits
// (here the store closes while no PrepareOk has reached the primary), is answered
// 57 TransientNotCommitted: its prepare is in the backups' journals and a new view
// may commit it, so its outcome is unknown. 58 would say it was never admitted.
func TestClusterPreparedOffsetStoreOfUnknownFateIsAnswered57(t *testing.T) {
	c := newTestCluster(t, 11, 3, fsyncConfig())
	rec := newSendRecorder()
	c.sendAll(0, 2, rec, 1)
	c.send(makeBatch(t, 6, 3, 40), 20_000, rec, 5)
	primary := c.stores[0]
	if !primary.partitions[testKey].holding() {
		t.Fatal("the primary's journal write is not out")
	}
	offsets := &offsetRecorder{done: map[uint64]error{}}
	consumer := Consumer{Kind: wire.ConsumerSingle, ID: 7}
	deferred, err := primary.ReplicateConsumerOffset(testKey, consumer, 4, false, offsets, 1)
	if err != nil || !deferred {
		t.Fatalf("offset store while the Ready is out: deferred %v, %v", deferred, err)
	}
	c.intercept = func(f *netFrame) bool { return f.to != 0 } // no PrepareOk reaches the primary
	c.settle()
	p := primary.partitions[testKey]
	prepared := false
	for op := p.journal.firstOp; op <= p.journal.lastOp(); op++ {
		if e := p.journal.at(op); e != nil && e.present && e.offsetDone != nil {
			prepared = true
		}
	}
	if !prepared {
		t.Fatal("the offset store was not prepared on the primary")
	}
	if err, ok := offsets.done[1]; ok {
		t.Fatalf("offset store answered %v before its group stopped", err)
	}
	if err := primary.Close(); err != nil {
		t.Fatal(err)
	}
	if err, ok := offsets.done[1]; !ok || err != wire.ErrTransientNotCommitted {
		t.Fatalf("offset store answered %v %v, want 57 %v", ok, err, wire.ErrTransientNotCommitted)
	}
}
