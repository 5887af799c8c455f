package partition

import (
	"bytes"
	"slices"
	"testing"

	"github.com/iggy-shard/iggy-shard/segment"
	"github.com/iggy-shard/iggy-shard/wire"
)

// reapingStorages hands out storages that complete requests as the shard's disk
// ring does (shard.DiskStorage): a Poll reaps everything that completed into one
// batch and then runs the batch's Done hooks, so a hook that polls again (a wait
// nested in a completion) finds nothing of the batch left to reap. Within a batch
// the group's own files (partition.state, partition.journal) come first and the
// log's requests after them: one order of many a ring may post.
type reapingStorages struct {
	sim   *SimStorages
	disks map[string]*reapingDisk
}

func newReapingStorages(sim *SimStorages) *reapingStorages {
	return &reapingStorages{sim: sim, disks: make(map[string]*reapingDisk)}
}

func (r *reapingStorages) Open(dir string) (segment.Storage, error) {
	inner, err := r.sim.Open(dir)
	if err != nil {
		return nil, err
	}
	d := &reapingDisk{inner: inner, names: make(map[segment.File]string), hooks: make(map[*segment.Request]func(*segment.Request))}
	r.disks[dir] = d
	return d, nil
}

func (r *reapingStorages) Remove(dir string) error {
	delete(r.disks, dir)
	return r.sim.Remove(dir)
}

type reapingDisk struct {
	inner segment.Storage
	names map[segment.File]string
	hooks map[*segment.Request]func(*segment.Request)
	// reaped: completed, Done not run yet.
	reaped []*segment.Request
	// batches counts the Polls that ran hooks of the group's files and of the log
	// together, group files first.
	mixedBatches int
}

func (d *reapingDisk) Open(name string, create bool, preallocateBytes int64) (segment.File, int64, error) {
	f, size, err := d.inner.Open(name, create, preallocateBytes)
	if err == nil {
		d.names[f] = name
	}
	return f, size, err
}

func (d *reapingDisk) Close(f segment.File) error {
	delete(d.names, f)
	return d.inner.Close(f)
}

func (d *reapingDisk) List(dir string) ([]string, error) { return d.inner.List(dir) }

func (d *reapingDisk) Submit(r *segment.Request) {
	d.hooks[r] = r.Done
	r.Done = d.reap
	d.inner.Submit(r)
}

func (d *reapingDisk) reap(r *segment.Request) {
	r.Done = d.hooks[r]
	delete(d.hooks, r)
	d.reaped = append(d.reaped, r)
}

func (d *reapingDisk) groupFile(r *segment.Request) bool {
	name := d.names[r.File]
	return r.Op != segment.OpRemove && (name == groupStateFileName || name == journalFileName)
}

func (d *reapingDisk) Poll(bool) int {
	for d.inner.Poll(false) > 0 {
	}
	batch := d.reaped
	d.reaped = nil
	slices.SortStableFunc(batch, func(a, b *segment.Request) int {
		switch ga, gb := d.groupFile(a), d.groupFile(b); {
		case ga && !gb:
			return -1
		case gb && !ga:
			return 1
		}
		return 0
	})
	if len(batch) > 1 && d.groupFile(batch[0]) && !d.groupFile(batch[len(batch)-1]) {
		d.mixedBatches++
	}
	for _, r := range batch {
		r.Done(r)
	}
	return len(batch)
}

// A backup installs a transferred state while its log has a request in flight (a
// consumer's poll), and the storage completes the group's journal write and that
// request in one batch, the journal's first. The held Ready the journal write
// finishes feeds the frames queued meanwhile, the state's last chunk among them:
// the install it brings closes the log and waits for the log's requests, and must
// not run inside the journal's completion, where the poll's read is reaped but its
// hook not run yet, out of every poll's reach ("segment: storage has no request in
// flight but the log waits for one", seen under internal/clustertest's catch-up).
// The stores run on reapingStorages; the backup, cut off while the primary went
// more ops ahead than it retains, installs the primary's state and ends with its
// log.
func TestClusterInstallIsNotNestedInAStorageCompletion(t *testing.T) {
	c := newTestCluster(t, 5, 3, fsyncConfig())
	reaping := make([]*reapingStorages, len(c.stores))
	for i := range c.stores {
		reaping[i] = newReapingStorages(c.storages[i])
		s := NewReplicatedStore("local_data", reaping[i], Replication{
			Cluster: testCluster3, ReplicaID: uint8(i), ReplicaCount: 3, Outbox: clusterOutbox{c: c, from: uint8(i)},
		})
		if err := s.Create(testKey, c.cfg, 1); err != nil {
			t.Fatal(err)
		}
		c.stores[i] = s
	}
	rec := newSendRecorder()
	next := c.sendAll(0, 5, rec, 1)
	c.tick(int(partitionTiming.CommitBroadcastIntervalTicks) + 1)
	const down = 2
	c.intercept = func(f *netFrame) bool { return int(f.to) != down && int(f.from) != down }
	next = c.sendAll(next, headerWindow+20, rec, 100)
	c.intercept = nil
	backup := c.stores[down]
	b := backup.partitions[testKey]
	var res PollResult
	var polls pollRecorder
	polling := false
	// One loop turn of the cluster per step: the primary takes a send, the
	// frames queued are delivered, the storages polled. The state's frames
	// held back reach the backup only while it holds a Ready for its durable
	// writes: it queues them and steps them once that Ready is done.
	for step := 0; b.transfer.installs == 0; step++ {
		if step == 5_000 {
			t.Fatalf("the backup never installed a state (transferring %v)", b.group.core.Transferring())
		}
		if !polling || polls.calls > 0 {
			polls = pollRecorder{}
			if err := backup.Poll(testKey, PollRequest{Strategy: wire.PollingStrategy{Kind: wire.PollingFirst}, Count: 10}, &res, &polls, 1); err != nil {
				t.Fatal(err)
			}
			polling = true
		}
		var later []netFrame
		for range len(c.queue) {
			f := c.queue[0]
			if int(f.to) == down && !b.holding() && f.header().Command == wire.CommandStateChunk {
				later = append(later, f)
				c.queue = c.queue[1:]
				continue
			}
			c.deliverOne()
		}
		if err := c.stores[c.leader].Send(testKey, sendRequest(makeBatch(t, next, 3, 40)), 60_000+next, rec, 1000+uint64(step)); err == nil {
			next += 3
		}
		if b.holding() {
			c.queue = append(later, c.queue...)
			for range len(later) {
				c.deliverOne()
			}
		} else {
			c.queue = append(c.queue, later...)
		}
		for _, s := range c.stores {
			s.Tick()
			s.PollIO()
		}
	}
	if reaping[down].disks[backup.Dir(testKey)].mixedBatches == 0 {
		t.Fatalf("no batch completed group file writes and log requests together")
	}
	c.settle()
	c.tick(int(partitionTiming.HeartbeatTimeoutTicks) + 1)
	for i := range c.stores {
		if err := c.stores[i].Err(testKey); err != nil {
			t.Fatalf("replica %d: %v", i, err)
		}
		if !bytes.Equal(c.logBytes(i), c.logBytes(0)) {
			t.Fatalf("replica %d's log (%d bytes) differs from the primary's (%d bytes)", i, len(c.logBytes(i)), len(c.logBytes(0)))
		}
	}
	_, msgs := poll(t, backup, testKey, PollRequest{Strategy: wire.PollingStrategy{Kind: wire.PollingFirst}, Count: 100_000})
	if len(msgs) != int(next) {
		t.Fatalf("the backup serves %d messages, want %d", len(msgs), next)
	}
}
