package partition

import (
	"bytes"
	"errors"
	"testing"
	"unsafe"

	"github.com/iggy-shard/iggy-shard/segment"
	"github.com/iggy-shard/iggy-shard/vsr"
	"github.com/iggy-shard/iggy-shard/wire"
)

// testCluster is n stores, replica i of each partition's group on store i, their
// frames carried by an in-memory network: each frame is copied into a 16-byte
// aligned buffer and decoded with wire.DecodeReplicaHeader, as a replica
// connection would, before Step.
type testCluster struct {
	t        testing.TB
	stores   []*Store
	storages []*simStorages
	cfg      Config
	queue    []netFrame
	// intercept, when set, sees each frame before delivery and may change it; false
	// drops it.
	intercept func(f *netFrame) bool
	stepErrs  []error
	// leader is the replica send and sendAll propose at.
	leader int
	// openFilesMax is each store's Replication.OpenFilesMax (0: the default).
	openFilesMax int
	// lenders lend each store the frames it steps (StepLending), one lender a
	// store; a store without one (nil) copies them (Step). Every store but the
	// last has one, so that every cluster test runs both.
	lenders []*frameLender
}

type netFrame struct {
	from, to uint8
	buf      []byte // header then body, 16-byte aligned
}

func (f *netFrame) header() *wire.GenericHeader {
	h, err := wire.ViewHeader[wire.GenericHeader](f.buf)
	if err != nil {
		panic(err)
	}
	return h
}

type clusterOutbox struct {
	c    *testCluster
	from uint8
}

func (o clusterOutbox) SendReplica(_ Key, m *vsr.Message) {
	size := wire.HeaderSize + len(m.Body)
	raw := make([]byte, size+wire.HeaderAlignment)
	at := 0
	for (uintptrOf(raw[at:]))%wire.HeaderAlignment != 0 {
		at++
	}
	buf := raw[at : at+size]
	m.Header.Put(buf)
	copy(buf[wire.HeaderSize:], m.Body)
	o.c.queue = append(o.c.queue, netFrame{from: o.from, to: m.To, buf: buf})
}

var testCluster3 = wire.Uint128{Lo: 0xC1}

func newTestCluster(t testing.TB, seed uint64, n int, cfg Config) *testCluster {
	return newTestClusterOfFiles(t, seed, n, cfg, 0)
}

// newTestClusterOfFiles is newTestCluster with stores that keep at most
// openFilesMax files open.
func newTestClusterOfFiles(t testing.TB, seed uint64, n int, cfg Config, openFilesMax int) *testCluster {
	t.Helper()
	c := &testCluster{t: t, cfg: cfg, openFilesMax: openFilesMax}
	for i := 0; i < n; i++ {
		st := newSimStorages(seed + uint64(i)*1000)
		s := NewReplicatedStore("local_data", st, Replication{
			Cluster: testCluster3, ReplicaID: uint8(i), ReplicaCount: uint8(n), Outbox: clusterOutbox{c: c, from: uint8(i)},
			OpenFilesMax: openFilesMax,
		})
		if err := s.Create(testKey, cfg, 1); err != nil {
			t.Fatal(err)
		}
		c.stores = append(c.stores, s)
		c.storages = append(c.storages, st)
		var l *frameLender
		if i < n-1 {
			l = newFrameLender()
		}
		c.lenders = append(c.lenders, l)
	}
	return c
}

// deliverOne delivers the oldest frame; false when none is queued.
func (c *testCluster) deliverOne() bool {
	if len(c.queue) == 0 {
		return false
	}
	f := c.queue[0]
	c.queue = c.queue[1:]
	if c.intercept != nil && !c.intercept(&f) {
		return true
	}
	h, err := wire.DecodeReplicaHeader(f.buf, 64<<20)
	if err != nil {
		c.t.Fatalf("frame %d -> %d does not decode: %v", f.from, f.to, err)
	}
	s := c.stores[f.to]
	s.NoteLiveness(f.from)
	if l := c.lenders[f.to]; l != nil {
		l.frame = f.buf
		if err := s.StepLending(testKey, h, f.buf[wire.HeaderSize:], l); err != nil {
			c.stepErrs = append(c.stepErrs, err)
		}
		lent := l.frame == nil
		l.frame = nil
		if lent {
			return true // the lender poisons it when it comes back
		}
	} else if err := s.Step(testKey, h, f.buf[wire.HeaderSize:]); err != nil {
		c.stepErrs = append(c.stepErrs, err)
	}
	// The frame is released once Step returns (the server reuses its buffer): the
	// store keeps nothing that points into it.
	for i := range f.buf {
		f.buf[i] = 0xA5
	}
	return true
}

// settle delivers frames and runs storage completions until both are quiet.
func (c *testCluster) settle() {
	c.t.Helper()
	for round := 0; ; round++ {
		if round == 100_000 {
			c.t.Fatal("the cluster does not settle")
		}
		moved := c.deliverOne()
		for _, s := range c.stores {
			if s.PollIO() > 0 {
				moved = true
			}
		}
		if !moved {
			return
		}
	}
}

// tick runs n shard ticks on every store, settling after each.
func (c *testCluster) tick(n int) {
	for i := 0; i < n; i++ {
		for _, s := range c.stores {
			s.Tick()
		}
		c.settle()
	}
}

func (c *testCluster) send(batch []byte, nowMicros uint64, rec *sendRecorder, token uint64) {
	c.t.Helper()
	if err := c.stores[c.leader].Send(testKey, sendRequest(batch), nowMicros, rec, token); err != nil {
		c.t.Fatalf("send: %v", err)
	}
}

// logBytes is replica i's log: its segments' .log files, in order, back to back.
func (c *testCluster) logBytes(i int) []byte {
	disk := c.storages[i].disks[c.stores[i].Dir(testKey)]
	names, _ := disk.List("")
	var all []byte
	for _, name := range names {
		if _, ok := segmentLogBase(name); ok {
			all = append(all, disk.ReadFile(name)...)
		}
	}
	return all
}

// Every replica of a partition's group holds the same batch bytes, as stamped by
// the primary at prepare: each backup checks the stamp against its own position and
// appends what it received.
func TestClusterReplicatesTheStampedBatch(t *testing.T) {
	cfg := Config{PartitionsCount: 1}
	c := newTestCluster(t, 1, 3, cfg)
	rec := newSendRecorder()
	for i := uint64(0); i < 5; i++ {
		c.send(makeBatch(t, i*4, 4, 50), 1000+i, rec, i)
		c.settle()
	}
	for i := uint64(0); i < 5; i++ {
		if got, ok := rec.acked[i]; !ok || got.BaseOffset != i*4 {
			t.Fatalf("send %d: acked %v %+v, failed %v", i, ok, got, rec.failed[i])
		}
	}
	// The backups learn the last commit from the primary's Commit heartbeat.
	c.tick(int(partitionTiming.CommitBroadcastIntervalTicks) + 1)
	for _, s := range c.stores {
		s.WaitIdle()
	}
	primary := c.logBytes(0)
	if len(primary) == 0 {
		t.Fatal("the primary's log is empty")
	}
	for i := 1; i < 3; i++ {
		if !bytes.Equal(c.logBytes(i), primary) {
			t.Fatalf("replica %d's log (%d bytes) differs from the primary's (%d bytes)", i, len(c.logBytes(i)), len(primary))
		}
		_, msgs := poll(t, c.stores[i], testKey, PollRequest{Strategy: wire.PollingStrategy{Kind: wire.PollingFirst}, Count: 100})
		if len(msgs) != 20 || msgs[19].seq != 19 {
			t.Fatalf("replica %d serves %v", i, offsetsOf(msgs))
		}
	}
	if len(c.stepErrs) > 0 {
		t.Fatalf("frames refused: %v", c.stepErrs)
	}
}

// stepFrame decodes a frame's bytes (copied to an aligned buffer) and steps it.
func stepFrame(t *testing.T, s *Store, f []byte) error {
	t.Helper()
	raw := make([]byte, len(f)+wire.HeaderAlignment)
	at := 0
	for uintptrOf(raw[at:])%wire.HeaderAlignment != 0 {
		at++
	}
	buf := raw[at : at+len(f)]
	copy(buf, f)
	h, err := wire.DecodeReplicaHeader(buf, 64<<20)
	if err != nil {
		t.Fatalf("frame does not decode: %v", err)
	}
	return s.Step(testKey, h, buf[wire.HeaderSize:])
}

// A prepare binds its batch through request_checksum = batch_checksum, which the
// identity covers: a different valid batch of the same size, stamped the same,
// swapped under the header, is refused at ingress, and the original is taken.
func TestClusterRefusesABodySwappedUnderItsHeader(t *testing.T) {
	c := newTestCluster(t, 2, 3, Config{PartitionsCount: 1})
	var captured *netFrame
	c.intercept = func(f *netFrame) bool {
		if captured == nil && f.to == 1 && f.header().Command == wire.CommandPrepare {
			cp := *f
			cp.buf = append([]byte(nil), f.buf...)
			captured = &cp
			return false
		}
		return true
	}
	rec := newSendRecorder()
	c.send(makeBatch(t, 0, 3, 40), 5000, rec, 1)
	c.settle()
	if captured == nil {
		t.Fatal("no prepare went to replica 1")
	}
	original := captured.buf
	body := original[wire.HeaderSize:]
	stamped, _ := wire.ViewBatchHeader(body)

	swapped := makeBatch(t, 100, 3, 40) // other payloads, same sizes
	if len(swapped) != len(body) {
		t.Fatalf("swapped batch %d bytes, want %d", len(swapped), len(body))
	}
	wire.StampBatch(swapped, stamped.PartitionID(), stamped.BaseOffset(), stamped.BaseTimestamp())
	if err := wire.CheckStoredBatch(swapped); err != nil {
		t.Fatalf("the swapped batch is not valid on its own: %v", err)
	}
	forged := append(append([]byte(nil), original[:wire.HeaderSize]...), swapped...)
	backup := c.stores[1]
	err := stepFrame(t, backup, forged)
	if !errors.Is(err, ErrBatchBinding) {
		t.Fatalf("swapped body: %v, want ErrBatchBinding", err)
	}
	if op := backup.partitions[testKey].group.core.Op(); op != 0 {
		t.Fatalf("the backup journaled op %d from the forged frame", op)
	}
	// A byte flipped in a payload breaks its frame checksum: refused too.
	flipped := append([]byte(nil), original...)
	flipped[len(flipped)-1] ^= 1
	if err := stepFrame(t, backup, flipped); !errors.Is(err, ErrBatchBinding) {
		t.Fatalf("flipped payload byte: %v, want ErrBatchBinding", err)
	}
	if n := backup.IngressDrops()[IngressBinding]; n != 2 {
		t.Fatalf("%d frames counted as refused for their binding, want 2", n)
	}
	if err := stepFrame(t, backup, original); err != nil {
		t.Fatalf("the original frame: %v", err)
	}
	if op := backup.partitions[testKey].group.core.Op(); op != 1 {
		t.Fatalf("the backup is at op %d after the original, want 1", op)
	}
}

// A backup re-derives the stamp from its own position and refuses a prepare
// stamped elsewhere, even one whose header binds it correctly.
func TestClusterBackupRefusesAStampNotItsOwn(t *testing.T) {
	c := newTestCluster(t, 3, 3, Config{PartitionsCount: 1})
	var captured *netFrame
	c.intercept = func(f *netFrame) bool {
		if captured == nil && f.to == 1 && f.header().Command == wire.CommandPrepare {
			cp := *f
			cp.buf = append([]byte(nil), f.buf...)
			captured = &cp
			return false
		}
		return true
	}
	c.send(makeBatch(t, 0, 2, 40), 7000, newSendRecorder(), 1)
	c.settle()
	if captured == nil {
		t.Fatal("no prepare went to replica 1")
	}
	forged := append([]byte(nil), captured.buf...)
	body := forged[wire.HeaderSize:]
	stamped, _ := wire.ViewBatchHeader(body)
	wire.StampBatch(body, stamped.PartitionID(), stamped.BaseOffset()+10, stamped.BaseTimestamp())
	restamped, _ := wire.ViewBatchHeader(body)
	var h wire.PrepareHeader
	copy(wire.HeaderBytes(&h)[:], forged)
	h.RequestChecksum = wire.Uint128{Lo: restamped.BatchChecksum()}
	h.SetIdentity()
	wire.PutHeader(forged, &h)
	if err := stepFrame(t, c.stores[1], forged); !errors.Is(err, ErrStampMismatch) {
		t.Fatalf("a batch stamped at offset 10: %v, want ErrStampMismatch", err)
	}
	if n := c.stores[1].IngressDrops()[IngressStamp]; n != 1 {
		t.Fatalf("%d frames counted as refused for their stamp, want 1", n)
	}
	if err := stepFrame(t, c.stores[1], captured.buf); err != nil {
		t.Fatalf("the original frame: %v", err)
	}
}

// A backup whose log holds a batch the group never prepared (something wrote to it
// behind the group's back) cannot apply the primary's next batch: it takes the
// primary's state instead of serving a different batch under the same offsets.
func TestClusterBackupWithADivergedLogTakesThePrimarysState(t *testing.T) {
	c := newTestCluster(t, 4, 3, Config{PartitionsCount: 1})
	rec := newSendRecorder()
	// The primary's Commit, sent as soon as it commits, is lost on the way to
	// replica 1: the op stays prepared there, not applied.
	c.intercept = func(f *netFrame) bool { return f.to != 1 || f.header().Command != wire.CommandCommit }
	c.send(makeBatch(t, 0, 2, 40), 9000, rec, 1)
	c.settle()
	c.intercept = nil
	if _, ok := rec.acked[1]; !ok {
		t.Fatalf("send not acknowledged: %v", rec.failed)
	}
	backup := c.stores[1].partitions[testKey]
	if backup.group.core.Op() != 1 || backup.journal.len() != 1 {
		t.Fatalf("backup at op %d with %d journaled, want op 1 prepared and not applied", backup.group.core.Op(), backup.journal.len())
	}
	foreign := makeBatch(t, 50, 1, 40)
	wire.StampBatch(foreign, uint64(testKey.PartitionID), 0, 1)
	if err := backup.log.Append(foreign); err != nil {
		t.Fatal(err)
	}
	c.stores[1].WaitIdle()
	c.tick(int(partitionTiming.CommitBroadcastIntervalTicks) + 1) // the Commit heartbeat
	if err := c.stores[1].Err(testKey); err != nil {
		t.Fatalf("backup error %v", err)
	}
	if backup.transfer.installs != 1 {
		t.Fatalf("backup installed %d states, want 1", backup.transfer.installs)
	}
	if !bytes.Equal(c.logBytes(1), c.logBytes(0)) {
		t.Fatal("the backup's log differs from the primary's after the transfer")
	}
	c.send(makeBatch(t, 2, 3, 40), 9100, rec, 2)
	c.settle()
	c.tick(int(partitionTiming.CommitBroadcastIntervalTicks) + 1)
	for i := range c.stores {
		if !bytes.Equal(c.logBytes(i), c.logBytes(0)) {
			t.Fatalf("replica %d's log differs from the primary's after the next send", i)
		}
	}
}

func uintptrOf(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }

// A Quorum consumer-offset store is a prepare of the partition's group, applied at
// commit on every replica.
func TestClusterConsumerOffsetIsReplicated(t *testing.T) {
	c := newTestCluster(t, 5, 3, Config{PartitionsCount: 1})
	rec := newSendRecorder()
	c.send(makeBatch(t, 0, 5, 40), 100, rec, 1)
	c.settle()
	alice := Consumer{Kind: wire.ConsumerSingle, ID: 42}
	// The call cannot wait for the peers' acks (they travel outside it): prepared,
	// it answers 57 (outcome unknown; 58 would say it was not admitted), and the op
	// applies once committed.
	if err := c.stores[0].StoreConsumerOffset(testKey, alice, 3, wire.AckQuorum); err != wire.ErrTransientNotCommitted {
		t.Fatalf("store offset in a cluster: %v", err)
	}
	c.settle()
	c.tick(int(partitionTiming.CommitBroadcastIntervalTicks) + 1)
	for i, s := range c.stores {
		o, ok, err := s.ConsumerOffset(testKey, alice)
		if err != nil || !ok || o.StoredOffset != 3 {
			t.Fatalf("replica %d: offset %+v %v %v, want 3", i, o, ok, err)
		}
	}
	if len(c.stepErrs) > 0 {
		t.Fatalf("frames refused: %v", c.stepErrs)
	}
}

// On a single node a Quorum offset write is an op of the partition's group,
// committed and applied within the call; NoAck writes locally, as the reference does.
func TestConsumerOffsetOpsOnTheGroup(t *testing.T) {
	s, _ := newSimStore(t, 6, smallConfig())
	mustSend(t, s, testKey, makeBatch(t, 0, 5, 10), 1)
	p := s.partitions[testKey]
	alice := Consumer{Kind: wire.ConsumerSingle, ID: 1}
	if err := s.StoreConsumerOffset(testKey, alice, 2, wire.AckQuorum); err != nil {
		t.Fatal(err)
	}
	if op := p.group.core.Op(); op != 2 {
		t.Fatalf("group at op %d after a send and a Quorum offset store, want 2", op)
	}
	if h, _ := p.group.core.Header(2); h.Operation != wire.OperationStoreConsumerOffset || h.RequestChecksum == (wire.Uint128{}) {
		t.Fatalf("op 2 is %v with request_checksum %v", h.Operation, h.RequestChecksum)
	}
	if o, ok, _ := s.ConsumerOffset(testKey, alice); !ok || o.StoredOffset != 2 {
		t.Fatalf("offset %+v %v", o, ok)
	}
	if err := s.StoreConsumerOffset(testKey, alice, 4, wire.AckNoAck); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteConsumerOffset(testKey, alice, wire.AckQuorum); err != nil {
		t.Fatal(err)
	}
	if op := p.group.core.Op(); op != 3 {
		t.Fatalf("group at op %d, want 3 (the NoAck store is local)", op)
	}
	if _, ok, _ := s.ConsumerOffset(testKey, alice); ok {
		t.Fatal("the offset survived its delete")
	}
	if err := s.DeleteConsumerOffset(testKey, alice, wire.AckQuorum); err != wire.ErrConsumerOffsetNotFound {
		t.Fatalf("deleting a missing offset: %v", err)
	}
	if err := s.StoreConsumerOffset(testKey, alice, 99, wire.AckQuorum); err != wire.ErrInvalidOffset {
		t.Fatalf("an offset past the end: %v", err)
	}
	if op := p.group.core.Op(); op != 3 {
		t.Fatalf("refused offset ops reached the group (op %d)", op)
	}
}

// When the primary's node falls silent, the backups' heartbeat timers (driven by
// Store.Tick) elect a new primary, which stamps from its own position: the batches
// the old primary got committed stay, the new ones follow them.
func TestClusterViewChangeContinuesTheLog(t *testing.T) {
	c := newTestCluster(t, 7, 3, Config{PartitionsCount: 1})
	rec := newSendRecorder()
	for i := uint64(0); i < 3; i++ {
		c.send(makeBatch(t, i*3, 3, 30), 100+i, rec, i)
		c.settle()
	}
	c.tick(int(partitionTiming.CommitBroadcastIntervalTicks) + 1)
	// Node 0 goes dark.
	c.intercept = func(f *netFrame) bool { return f.from != 0 && f.to != 0 }
	survivors := c.stores[1:]
	newPrimary := c.stores[1].partitions[testKey]
	for tick := 0; !newPrimary.group.core.IsPrimary(); tick++ {
		if tick == 5000 {
			t.Fatalf("no new primary after %d ticks (replica 1 %v view %d)", tick, newPrimary.group.core.Status(), newPrimary.group.core.View())
		}
		for _, s := range survivors {
			s.Tick()
		}
		c.settle()
	}
	t.Logf("replica 1 leads view %d at shard tick %d", newPrimary.group.core.View(), c.stores[1].timers.Now())
	if err := c.stores[1].Send(testKey, sendRequest(makeBatch(t, 9, 2, 30)), 200, rec, 10); err != nil {
		t.Fatalf("send to the new primary: %v", err)
	}
	for tick := 0; ; tick++ {
		if _, ok := rec.acked[10]; ok {
			break
		}
		if err := rec.failed[10]; err != nil || tick == 1000 {
			t.Fatalf("send to the new primary: failed %v after %d ticks", err, tick)
		}
		for _, s := range survivors {
			s.Tick()
		}
		c.settle()
	}
	if got := rec.acked[10].BaseOffset; got != 9 {
		t.Fatalf("the new primary stamped base_offset %d, want 9", got)
	}
	c.tick(int(partitionTiming.CommitBroadcastIntervalTicks) + 1)
	for _, s := range survivors {
		s.WaitIdle()
	}
	if !bytes.Equal(c.logBytes(1), c.logBytes(2)) {
		t.Fatal("the survivors' logs differ")
	}
	_, msgs := poll(t, c.stores[2], testKey, PollRequest{Strategy: wire.PollingStrategy{Kind: wire.PollingFirst}, Count: 100})
	if len(msgs) != 11 || msgs[10].seq != 10 {
		t.Fatalf("replica 2 serves %v", offsetsOf(msgs))
	}
}

// A single node's groups keep no timer, so its shard never wakes to tick them; a
// backup's heartbeat timer makes the store due.
func TestStoreDueOnlyWithDeadlines(t *testing.T) {
	s := NewStore("local_data", nullStorages{})
	for i := uint32(0); i < 500; i++ {
		if err := s.Create(Key{StreamID: 1, TopicID: 1, PartitionID: i}, noSaveConfig(), 1); err != nil {
			t.Fatal(err)
		}
	}
	s.PollIO() // the new directories made durable, as the shard's loop does
	if _, due := s.TicksUntilDue(); due {
		t.Fatal("groups of one replica made the store due on a tick")
	}
	backup := NewReplicatedStore("local_data", nullStorages{}, Replication{Cluster: testCluster3, ReplicaID: 1, ReplicaCount: 3})
	if err := backup.Create(testKey, noSaveConfig(), 1); err != nil {
		t.Fatal(err)
	}
	backup.PollIO()
	if in, due := backup.TicksUntilDue(); !due || in != partitionTiming.HeartbeatTimeoutTicks {
		t.Fatalf("a backup's heartbeat timeout: due %v in %d ticks, want in %d", due, in, partitionTiming.HeartbeatTimeoutTicks)
	}
	if err := backup.Delete(testKey); err != nil {
		t.Fatal(err)
	}
	if _, due := backup.TicksUntilDue(); due {
		t.Fatal("a deleted partition's group still makes the store due")
	}
}

// Closing a backup that holds prepared ops not committed yet does not wait for a
// commit only its peers can bring.
func TestClusterCloseWithUncommittedOps(t *testing.T) {
	c := newTestCluster(t, 8, 3, Config{PartitionsCount: 1})
	c.intercept = func(f *netFrame) bool { return f.to != 0 } // no PrepareOk reaches the primary
	c.send(makeBatch(t, 0, 2, 40), 100, newSendRecorder(), 1)
	c.settle()
	backup := c.stores[1].partitions[testKey]
	if backup.journal.len() != 1 || backup.committedOp != 0 {
		t.Fatalf("backup journal %d ops, committed %d: want one prepared, none committed", backup.journal.len(), backup.committedOp)
	}
	polls := 0
	backup.storage = pollCounter{Storage: backup.storage, polls: &polls}
	if err := c.stores[1].Close(); err != nil {
		t.Fatal(err)
	}
	if polls > 100 {
		t.Fatalf("closing polled the storage %d times waiting for a commit", polls)
	}
}

type pollCounter struct {
	segment.Storage
	polls *int
}

func (p pollCounter) Poll(wait bool) int {
	*p.polls++
	return p.Storage.Poll(wait)
}

// FuzzStep: a backup takes any replica-plane frame for a partition's group without
// panicking; bad ones are errors. The seeds are the frames a primary sends.
func FuzzStep(f *testing.F) {
	seedCluster := newTestCluster(f, 9, 3, Config{PartitionsCount: 1})
	var seeds [][]byte
	seedCluster.intercept = func(fr *netFrame) bool {
		seeds = append(seeds, append([]byte(nil), fr.buf...))
		return true
	}
	seedCluster.send(makeBatch(f, 0, 3, 40), 100, newSendRecorder(), 1)
	seedCluster.settle()
	seedCluster.tick(int(partitionTiming.CommitBroadcastIntervalTicks) + 1)
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		if len(frame) < wire.HeaderSize {
			return
		}
		c := newTestCluster(t, 10, 3, Config{PartitionsCount: 1})
		raw := make([]byte, len(frame)+wire.HeaderAlignment)
		at := 0
		for uintptrOf(raw[at:])%wire.HeaderAlignment != 0 {
			at++
		}
		buf := raw[at : at+len(frame)]
		copy(buf, frame)
		h, err := wire.DecodeReplicaHeader(buf, 64<<20)
		if err != nil || int(h.Size) != len(buf) {
			return
		}
		_ = c.stores[1].Step(testKey, h, buf[wire.HeaderSize:])
		c.settle()
	})
}

// IsPrimary names the one replica of a group that proposes its ops, and follows a
// view change; a backup's offset op is refused with 58 there.
func TestIsPrimaryFollowsTheGroup(t *testing.T) {
	single, _ := newSimStore(t, 1, Config{PartitionsCount: 1})
	if !single.IsPrimary(testKey) || single.IsPrimary(Key{StreamID: 9}) {
		t.Fatal("a group of one replica is its own primary; a partition not owned has none here")
	}
	c := newTestCluster(t, 7, 3, Config{PartitionsCount: 1})
	c.sendAll(0, 2, newSendRecorder(), 1)
	alice := Consumer{Kind: wire.ConsumerSingle, ID: 1}
	for i, s := range c.stores {
		if s.IsPrimary(testKey) != (i == 0) {
			t.Fatalf("replica %d: IsPrimary %v in view 0", i, s.IsPrimary(testKey))
		}
		if i > 0 {
			if _, err := s.ReplicateConsumerOffset(testKey, alice, 1, false, nil, 0); err != wire.ErrTransientNotAccepted {
				t.Fatalf("replica %d, a backup, took an offset op: %v", i, err)
			}
		}
	}
	c.intercept = func(f *netFrame) bool { return f.from != 0 && f.to != 0 }
	for tick := 0; !c.stores[1].IsPrimary(testKey); tick++ {
		if tick == 5000 {
			t.Fatal("replica 1 never leads")
		}
		c.stores[1].Tick()
		c.stores[2].Tick()
		c.settle()
	}
	if c.stores[2].IsPrimary(testKey) {
		t.Fatal("two primaries")
	}
}

// A backup applies an op as soon as its primary commits it, not at the primary's
// next commit broadcast (up to 500 ms later, holding the batch meanwhile): the
// primary sends its commit point once its pipeline drains (vsr.CoreConfig.
// CommitEagerly), one Commit per backup per burst, so that a consumer reading
// from a backup sees an acknowledged message about a round trip after it was
// acknowledged. Under a stream, a prepare carries the commit point and no Commit
// is added.
func TestClusterBackupsApplyAnOpOnceTheirPrimaryCommitsIt(t *testing.T) {
	c := newTestCluster(t, 9, 3, Config{PartitionsCount: 1})
	rec := newSendRecorder()
	commits := 0
	c.intercept = func(f *netFrame) bool {
		if f.header().Command == wire.CommandCommit {
			commits++
		}
		return true
	}
	const sends = 20
	for i := range sends {
		c.send(makeBatch(t, uint64(i*3), 3, 40), uint64(100+i), rec, uint64(i))
		c.settle() // frames and I/O only: no tick, no broadcast timer
		if _, ok := rec.acked[uint64(i)]; !ok {
			t.Fatalf("send %d not acknowledged", i)
		}
		for r, s := range c.stores {
			if got := s.SimApplied(testKey); got != uint64(i+1) {
				t.Fatalf("send %d: replica %d applied op %d, want %d", i, r, got, i+1)
			}
		}
	}
	if commits != 2*sends {
		t.Fatalf("%d Commits for %d sends one at a time: want one per backup each", commits, sends)
	}
	// A burst: the pipeline drains once, one Commit per backup.
	commits = 0
	for i := range 8 {
		c.send(makeBatch(t, uint64(sends*3+i*3), 3, 40), uint64(200+i), rec, uint64(100+i))
	}
	c.settle()
	if len(rec.acked) != sends+8 {
		t.Fatalf("%d sends acknowledged", len(rec.acked))
	}
	if commits != 2 {
		t.Fatalf("%d Commits for a burst of 8 sends: want one per backup", commits)
	}
}
