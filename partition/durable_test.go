package partition

import (
	"errors"
	"testing"

	"github.com/iggy-shard/iggy-shard/segment"
	"github.com/iggy-shard/iggy-shard/wire"
)

func fsyncConfig() Config {
	cfg := smallConfig()
	cfg.EnforceFsync = true
	return cfg
}

// newJournaledStore is newSimStore with the journal file in a group of one replica.
func newJournaledStore(t testing.TB, seed uint64, cfg Config) (*Store, *simStorages) {
	t.Helper()
	st := newSimStorages(seed)
	s := NewReplicatedStore("local_data", st, Replication{JournalFile: JournalFileAlways})
	if err := s.Create(testKey, cfg, 1234); err != nil {
		t.Fatal(err)
	}
	return s, st
}

// An enforce_fsync partition journals each batch to partition.journal, fdatasynced,
// before it is applied: a crash after the journal write and before the log's own
// write leaves the batch in the journal, and opening the partition replays it.
func TestDurableJournalReplaysAfterCrash(t *testing.T) {
	replaysAfterCrash(t, 300, Replication{JournalFile: JournalFileAlways}, 0, func(seed uint64, s2 *Store, crashed *simStorages) {
		if size, _ := crashed.disks[s2.Dir(testKey)].SizeOf(journalFileName); size != 0 {
			t.Fatalf("seed %d: the journal holds %d bytes after its replay", seed, size)
		}
		// The group goes on from the replayed end.
		if base := mustSend(t, s2, testKey, makeBatch(t, 5, 1, 20), 3); base != 5 {
			t.Fatalf("seed %d: next batch at %d", seed, base)
		}
	})
}

// replaysAfterCrash runs, for 20 seeds from seedBase, an enforce_fsync store of
// writer's settings that applied offsets 0..2 and journaled 3..4, crashed between
// the journal write and the log's; reopened with the default settings in purge
// generation reopenGeneration, the store must serve offsets 0..4, and then
// after(seed, the reopened store, the crashed storages) checks more. At least one
// seed must crash in between.
func replaysAfterCrash(t *testing.T, seedBase uint64, writer Replication, reopenGeneration uint64, after func(seed uint64, s2 *Store, crashed *simStorages)) {
	t.Helper()
	tested := 0
	for seed := uint64(0); seed < 20; seed++ {
		cfg := fsyncConfig()
		st := newSimStorages(seedBase + seed)
		s := NewReplicatedStore("local_data", st, writer)
		if err := s.Create(testKey, cfg, 1234); err != nil {
			t.Fatal(err)
		}
		mustSend(t, s, testKey, makeBatch(t, 0, 3, 20), 1)
		rec := newSendRecorder()
		if err := s.Send(testKey, sendRequest(makeBatch(t, 3, 2, 20)), 2, rec, 1); err != nil {
			t.Fatal(err)
		}
		p := s.partitions[testKey]
		for i := 0; p.holding(); i++ {
			if i == 100 {
				t.Fatal("the journal write does not complete")
			}
			s.PollIO()
		}
		if p.log.DurableEnd() != 3 {
			continue // this order made the log's append durable too
		}
		tested++
		crashed := st.crash(seed)
		s2 := NewReplicatedStore("local_data", crashed, Replication{JournalFile: JournalFileAlways})
		if _, err := s2.Open(testKey, cfg, Incarnation{CreatedAtMicros: 1234, PurgeGeneration: reopenGeneration}); err != nil {
			t.Fatalf("seed %d: open after crash: %v", seed, err)
		}
		_, msgs := poll(t, s2, testKey, PollRequest{Strategy: wire.PollingStrategy{Kind: wire.PollingFirst}, Count: 100})
		if len(msgs) != 5 || msgs[4].seq != 4 {
			t.Fatalf("seed %d: after the crash the log serves %v, want offsets 0..4", seed, offsetsOf(msgs))
		}
		if after != nil {
			after(seed, s2, crashed)
		}
	}
	if tested == 0 {
		t.Fatal("no seed crashed between the journal write and the log's")
	}
}

// In a cluster, an enforce_fsync batch acknowledged to the client survives every
// replica crashing at that very moment: the quorum's backup acknowledged it once it
// was in its journal file, durable, though its log had not applied it yet.
func TestClusterAcknowledgedSurvivesEveryReplicaCrashing(t *testing.T) {
	cfg := fsyncConfig()
	c := newTestCluster(t, 40, 3, cfg)
	rec := newSendRecorder()
	c.send(makeBatch(t, 0, 4, 30), 100, rec, 1)
	for round := 0; ; round++ {
		if round == 10_000 {
			t.Fatal("the send is never acknowledged")
		}
		if _, ok := rec.acked[1]; ok {
			break
		}
		if err := rec.failed[1]; err != nil {
			t.Fatalf("send failed: %v", err)
		}
		if !c.deliverOne() {
			for _, s := range c.stores {
				s.PollIO()
			}
		}
	}
	backupLog := c.stores[1].partitions[testKey].log
	if backupLog.DurableEnd() != 0 {
		t.Fatalf("the backup's log made the batch durable (end %d) before the ack: the test proves nothing", backupLog.DurableEnd())
	}
	// Every replica loses power now. The batch is in the journal files of the
	// quorum: the replicas place it as a prepared op above their logs, and the
	// group that forms again commits it, here and on the replica that lacked it.
	for i := range c.stores {
		c.restart(i, uint64(i)+7)
	}
	if r := c.stores[1].partitions[testKey].group.recovered; r != nil {
		t.Fatalf("the backup kept the recovery of its journal file after startGroup")
	}
	c.elect()
	c.tick(int(partitionTiming.HeartbeatTimeoutTicks) + 1)
	for i, s := range c.stores {
		_, msgs := poll(t, s, testKey, PollRequest{Strategy: wire.PollingStrategy{Kind: wire.PollingFirst}, Count: 100})
		if len(msgs) != 4 {
			t.Fatalf("replica %d serves %v once the group formed again, want offsets 0..3", i, offsetsOf(msgs))
		}
	}
}

// A journal write that fails fails its sends (4006); a cut record voids whatever of
// them the file kept, so a crash and replay do not bring them back, and the next
// batch takes their offsets.
func TestDurableJournalWriteFailure(t *testing.T) {
	cfg := fsyncConfig()
	tested := 0
	for seed := uint64(0); seed < 20; seed++ {
		s, st := newJournaledStore(t, 500+seed, cfg)
		mustSend(t, s, testKey, makeBatch(t, 0, 2, 20), 1)
		disk := st.disks[s.Dir(testKey)]
		disk.FailNextSyncs(1) // the journal's fdatasync: its writes reached the file
		rec := newSendRecorder()
		if err := s.Send(testKey, sendRequest(makeBatch(t, 100, 3, 20)), 2, rec, 1); err != nil {
			t.Fatal(err)
		}
		s.WaitIdle()
		if rec.failed[1] != wire.ErrCannotSaveMessagesToSegment {
			t.Fatalf("seed %d: send after a failed journal sync: failed %v acked %v", seed, rec.failed, rec.acked)
		}
		// The next batch takes offset 2; crash once it is in the journal, before the
		// log has it.
		if err := s.Send(testKey, sendRequest(makeBatch(t, 2, 1, 20)), 3, rec, 2); err != nil {
			t.Fatal(err)
		}
		p := s.partitions[testKey]
		for i := 0; p.holding(); i++ {
			if i == 100 {
				t.Fatal("the journal write does not complete")
			}
			s.PollIO()
		}
		if p.log.DurableEnd() != 2 {
			continue
		}
		tested++
		crashed := st.crash(seed)
		s2 := NewReplicatedStore("local_data", crashed, Replication{JournalFile: JournalFileAlways})
		if _, err := s2.Open(testKey, cfg, Incarnation{CreatedAtMicros: 1234}); err != nil {
			t.Fatalf("seed %d: open after crash: %v", seed, err)
		}
		_, msgs := poll(t, s2, testKey, PollRequest{Strategy: wire.PollingStrategy{Kind: wire.PollingFirst}, Count: 100})
		if len(msgs) != 3 || msgs[2].seq != 2 {
			t.Fatalf("seed %d: after the crash the log serves %+v, want seqs 0, 1, 2", seed, msgs)
		}
	}
	if tested == 0 {
		t.Fatal("no seed crashed between the journal write and the log's")
	}
}

// The journal file is emptied once it is large and everything in it is durable in
// the log.
func TestDurableJournalCompacts(t *testing.T) {
	saved := journalCompactBytes
	journalCompactBytes = 4096
	defer func() { journalCompactBytes = saved }()
	cfg := fsyncConfig()
	cfg.SegmentSizeBytes = 1 << 20
	s, st := newJournaledStore(t, 600, cfg)
	disk := st.disks[s.Dir(testKey)]
	written := int64(0)
	for i := uint64(0); i < 40; i++ {
		batch := makeBatch(t, i*2, 2, 200)
		written += int64(wire.HeaderSize + len(batch))
		mustSend(t, s, testKey, batch, i+1)
		if size, _ := disk.SizeOf(journalFileName); size >= journalCompactBytes+int64(wire.HeaderSize+len(batch)) {
			t.Fatalf("after %d sends the journal holds %d bytes: not emptied past %d", i+1, size, journalCompactBytes)
		}
	}
	if written < 4*journalCompactBytes {
		t.Fatalf("only %d bytes journaled", written)
	}
	crashed := st.crash(1)
	s2 := NewReplicatedStore("local_data", crashed, Replication{JournalFile: JournalFileAlways})
	if _, err := s2.Open(testKey, cfg, Incarnation{CreatedAtMicros: 1234}); err != nil {
		t.Fatal(err)
	}
	_, msgs := poll(t, s2, testKey, PollRequest{Strategy: wire.PollingStrategy{Kind: wire.PollingFirst}, Count: 1000})
	if len(msgs) != 80 {
		t.Fatalf("after the crash %d messages, want 80", len(msgs))
	}
}

// A group of one replica keeps no journal file by default: its ack waits for the
// log's own fdatasync. A file an earlier run left is still replayed.
func TestDurableJournalPolicy(t *testing.T) {
	cfg := fsyncConfig()
	s, st := newSimStore(t, 700, cfg)
	mustSend(t, s, testKey, makeBatch(t, 0, 2, 20), 1)
	if _, ok := st.disks[s.Dir(testKey)].SizeOf(journalFileName); ok {
		t.Fatal("a single-replica group wrote a journal file under the default policy")
	}
	j, jst := newJournaledStore(t, 701, cfg)
	mustSend(t, j, testKey, makeBatch(t, 0, 2, 20), 1)
	if _, ok := jst.disks[j.Dir(testKey)].SizeOf(journalFileName); !ok {
		t.Fatal("JournalFileAlways wrote no journal file")
	}
}

// Sends that arrive while a journal write is out wait and are prepared together
// after it: one journal write and fdatasync for all of them (group commit), their
// offsets in arrival order.
func TestDurableJournalGroupCommit(t *testing.T) {
	s, _ := newJournaledStore(t, 800, fsyncConfig())
	rec := newSendRecorder()
	for i := uint64(0); i < 6; i++ {
		if err := s.Send(testKey, sendRequest(makeBatch(t, i*2, 2, 20)), i+1, rec, i); err != nil {
			t.Fatal(err)
		}
	}
	p := s.partitions[testKey]
	if p.proposing.queue.n != 5 {
		t.Fatalf("%d sends wait behind the first journal write, want 5", p.proposing.queue.n)
	}
	s.WaitIdle()
	for i := uint64(0); i < 6; i++ {
		if c, ok := rec.acked[i]; !ok || c.BaseOffset != i*2 {
			t.Fatalf("send %d: acked %v at %d (failed %v)", i, ok, c.BaseOffset, rec.failed[i])
		}
	}
	if p.durable.syncs != 2 {
		t.Fatalf("%d journal writes for 6 sends, want 2 (the first, then the 5 that waited)", p.durable.syncs)
	}
}

// An enforce_fsync group's prepare goes down the chain before the journal file
// write of the replica that sends it (vsr.Ready.SendableEarly): the primary's and
// each backup's fdatasync run at once, not one after the other. Its
// acknowledgements still wait for each replica's own write.
func TestClusterPrepareLeavesBeforeItsJournalWrite(t *testing.T) {
	c := newTestCluster(t, 5, 3, fsyncConfig())
	rec := newSendRecorder()
	c.sendAll(0, 2, rec, 1)
	prepares := func(from uint8) (n int) {
		for _, f := range c.queue {
			if f.from == from && f.header().Command == wire.CommandPrepare {
				n++
			}
		}
		return n
	}
	c.send(makeBatch(t, 6, 3, 40), 20_000, rec, 50)
	primary := c.stores[0].partitions[testKey]
	if !primary.holding() || prepares(0) == 0 {
		t.Fatalf("held %v, %d prepares out: the primary's prepare waits for its journal write", primary.holding(), prepares(0))
	}
	for prepares(1) == 0 {
		if !c.deliverOne() {
			t.Fatal("the prepare never went on from the first backup")
		}
	}
	if backup := c.stores[1].partitions[testKey]; !backup.holding() {
		t.Fatal("the first backup forwarded the prepare after its journal write, not before")
	}
	for _, f := range c.queue {
		if f.header().Command == wire.CommandPrepareOk {
			t.Fatal("a PrepareOk left before its replica's journal write")
		}
	}
	c.settle()
	if _, ok := rec.acked[50]; !ok {
		t.Fatalf("the send is not acknowledged (%v)", rec.failed[50])
	}
}

// An enforce_fsync partition of a cluster creates its journal file with its first
// write, not when it is created or opened: a partition never written holds no
// file at all (the server makes a partition's directory only for its first file),
// whatever its topic's options; a write then creates it.
func TestJournalFileMadeByTheFirstWrite(t *testing.T) {
	c := newTestCluster(t, 40, 3, fsyncConfig())
	files := func(i int) []string {
		names, _ := c.storages[i].disks[c.stores[i].Dir(testKey)].List("")
		return names
	}
	for i := range c.stores {
		if names := files(i); len(names) != 0 {
			t.Fatalf("replica %d: a partition created and never written holds %v", i, names)
		}
	}
	c.restart(1, 1)
	if names := files(1); len(names) != 0 {
		t.Fatalf("replica 1, opened again: holds %v", names)
	}
	rec := newSendRecorder()
	c.sendAll(0, 1, rec, 1)
	c.settle()
	for i := range c.stores {
		if size, ok := c.storages[i].disks[c.stores[i].Dir(testKey)].SizeOf(journalFileName); !ok || size == 0 {
			t.Fatalf("replica %d: after a write the journal file is %d bytes (exists %v)", i, size, ok)
		}
	}
}

// journalCreateFails is a provider whose storages fail the next creations of
// partition.journal.
type journalCreateFails struct {
	*SimStorages
	failures *int
}

func (p journalCreateFails) Open(dir string) (segment.Storage, error) {
	st, err := p.SimStorages.Open(dir)
	return journalCreateFailsStorage{st, p.failures}, err
}

type journalCreateFailsStorage struct {
	segment.Storage
	failures *int
}

func (s journalCreateFailsStorage) Open(name string, create bool, prealloc int64) (segment.File, int64, error) {
	if name == journalFileName && create && *s.failures > 0 {
		*s.failures--
		return 0, 0, errors.New("no space left")
	}
	return s.Storage.Open(name, create, prealloc)
}

// A journal file that cannot be created fails the write that needed it, as a
// failed write does: in a group of one the send fails (4006) and the partition
// goes on, the file tried again with the next write.
func TestJournalFileThatCannotBeCreated(t *testing.T) {
	failures := 1
	st := NewSimStorages(41)
	s := NewReplicatedStore("local_data", journalCreateFails{st, &failures}, Replication{JournalFile: JournalFileAlways})
	if err := s.Create(testKey, fsyncConfig(), 1); err != nil {
		t.Fatalf("the partition is not created: %v", err)
	}
	send := func(token uint64) error {
		rec := newSendRecorder()
		err := s.Send(testKey, sendRequest(makeBatch(t, 0, 2, 20)), token, rec, token)
		s.WaitIdle()
		if err == nil {
			if _, ok := rec.acked[token]; !ok {
				err = rec.failed[token]
			}
		}
		return err
	}
	if err := send(1); err != wire.ErrCannotSaveMessagesToSegment {
		t.Fatalf("the send whose journal file could not be made: %v, want 4006", err)
	}
	if err := send(2); err != nil {
		t.Fatalf("the next send: %v", err)
	}
	if size, ok := st.disks[s.Dir(testKey)].SizeOf(journalFileName); !ok || size == 0 {
		t.Fatalf("the journal file is %d bytes (exists %v)", size, ok)
	}
	_, msgs := poll(t, s, testKey, PollRequest{Strategy: wire.PollingStrategy{Kind: wire.PollingFirst}, Count: 10})
	if len(msgs) != 2 {
		t.Fatalf("the partition serves %d messages, want the second send's 2", len(msgs))
	}
}
