package sim

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/iggy-shard/iggy-shard/partition"
	"github.com/iggy-shard/iggy-shard/vsr"
	"github.com/iggy-shard/iggy-shard/wire"
)

// partitionKey is the partition of partition group index g (cluster.groups).
func partitionKey(g int) partition.Key {
	return partition.Key{StreamID: 1, TopicID: 1, PartitionID: uint32(g - 1)}
}

// storeNode is what a node runs of the real partition plane.
type storeNode struct {
	store *partition.Store
	disks *partition.SimStorages
	// sends are the sends the store admitted and has not completed, by token: the
	// buffer is the one the store stamps in place.
	sends map[uint64]*storeSend
	// offsets are the replicated offset stores the store proposed and has not
	// answered, by token (partition.Store.ReplicateConsumerOffset).
	offsets map[uint64]*offsetStore
	// observed is what the checkers last saw of each partition group's core here,
	// by group index (0 unused), for this incarnation of the store.
	observed []observedCore
	// lives is each partition's life here, by group index: the purge generation
	// of its topic its contents are of, which its durable record names (purge.go).
	lives []uint64
}

type storeSend struct {
	client  int
	group   int
	life    uint64
	request uint64
	batch   []byte
}

type offsetStore struct {
	client  int
	group   int
	request uint64
}

// OffsetDone implements partition.OffsetCompletion: the client of a replicated
// offset store is answered once the store applied it (58: it retries).
func (sc storeCompletion) OffsetDone(token uint64, err error) {
	c, nd := sc.c, sc.nd
	o := nd.part.offsets[token]
	if o == nil {
		c.fail("replica %d: the store completed offset token %d it does not hold", nd.id, token)
		return
	}
	delete(nd.part.offsets, token)
	c.answerOffsetStore(nd, o, err)
}

// answerOffsetStore answers a client's offset store as the server does.
func (c *cluster) answerOffsetStore(nd *node, o *offsetStore, err error) {
	switch err {
	case nil:
		c.result.Partitions.OffsetStores++
		c.sendClient(nd.id, c.opts.Replicas+o.client, packet{reply: &clientReply{client: o.client, group: o.group, request: o.request}})
	case wire.ErrInvalidOffset:
		// Above the partition's current offset: refused before consensus.
		c.sendClient(nd.id, c.opts.Replicas+o.client, packet{reply: &clientReply{client: o.client, group: o.group, request: o.request, refused: true}})
	case wire.ErrTransientNotAccepted, wire.ErrTransientNotCommitted:
		// The client retries.
	default:
		if !c.diverged(nd, &clientRequest{client: o.client, group: o.group, request: o.request}, err) {
			c.fail("replica %d group %d: the store refused an offset store: %v (%v)", nd.id, o.group, err, nd.part.store.Err(partitionKey(o.group)))
		}
	}
}

type observedCore struct {
	view      uint32
	commitMin uint64
}

// storeOutbox carries a store's replica-plane frames over the simulated network.
type storeOutbox struct {
	c  *cluster
	nd *node
}

func (o storeOutbox) SendReplica(_ partition.Key, m *vsr.Message) { o.c.sendFrame(o.nd.id, m) }

// storeCompletion is the send completion of a node's store.
type storeCompletion struct {
	c  *cluster
	nd *node
}

func (sc storeCompletion) SendDone(token uint64, conf wire.SendConfirmation, err error) {
	c, nd := sc.c, sc.nd
	s := nd.part.sends[token]
	if s == nil {
		c.fail("replica %d: the store completed send token %d it does not hold", nd.id, token)
		return
	}
	delete(nd.part.sends, token)
	if err != nil {
		c.result.Partitions.SendsFailed++
		return // the client retries
	}
	bh, _ := wire.ViewBatchHeader(s.batch)
	if conf.BaseOffset != bh.BaseOffset() || conf.PartitionID != partitionKey(s.group).PartitionID {
		c.fail("replica %d group %d: send acknowledged at base offset %d partition %d, the batch is stamped %d", nd.id, s.group, conf.BaseOffset, conf.PartitionID, bh.BaseOffset())
		return
	}
	c.trace("r%d g%d acks send %d of client %d at offset %d", nd.id, s.group, s.request, s.client, conf.BaseOffset)
	r := clientReply{client: s.client, group: s.group, life: s.life, request: s.request, baseOffset: conf.BaseOffset, frame: slices.Clone(s.batch)}
	if c.opts.broken == brokenStoreAckFlipsBit {
		r.frame[len(r.frame)-1] ^= 1
	}
	c.sendClient(nd.id, c.opts.Replicas+s.client, packet{reply: &r})
}

func (c *cluster) storeUp(nd *node) bool { return nd.part.store != nil }

// partitionConfig is every simulated partition's: small segments, so that logs roll
// over, and fsync enforced on half the seeds (the journal file, acknowledgement once
// durable).
func (c *cluster) partitionConfig() partition.Config {
	return partition.Config{
		SegmentSizeBytes: 8 << 10,
		EnforceFsync:     c.opts.Seed>>8%2 == 1,
		PartitionsCount:  uint32(c.opts.PartitionGroups),
		// Save often without fsync enforced, so that writes are not all in the
		// page cache for ever.
		MessagesRequiredToSave: 16,
	}
}

// openStore starts a node's partition plane: a fresh store, or after a crash one
// reopened from the crashed disks.
func (c *cluster) openStore(nd *node, restart bool) {
	if nd.part.disks == nil {
		nd.part.disks = partition.NewSimStorages(c.opts.Seed ^ uint64(nd.id+1)*0xA24BAED4963EE407)
	}
	if restart && nd.untaggedGroups {
		// The node's second roll: it comes back sending tagged ids, over logs and
		// journals of untagged prepares.
		nd.untaggedGroups = false
		c.trace("r%d partition groups send tagged ids from now on", nd.id)
	}
	s := partition.NewReplicatedStore("local_data", nd.part.disks, partition.Replication{
		Cluster:        wire.ClusterID(clusterName),
		ReplicaID:      uint8(nd.id),
		ReplicaCount:   uint8(c.opts.Replicas),
		Timing:         Timing,
		Outbox:         storeOutbox{c: c, nd: nd},
		UntaggedGroups: nd.untaggedGroups,
		// Random per boot in the server; here of the seed, the node and its boot.
		NonceSeed: (c.opts.Seed ^ uint64(nd.id+1)<<48 ^ nd.incarnationCount<<32) * 0x9E3779B97F4A7C15,
	})
	cfg := c.partitionConfig()
	if restart && c.opts.Replicas == 1 {
		// A group of one numbers its ops afresh after a restart (nothing outside
		// it sees them; partition/doc.go, "The partition group"): its history of
		// committed ops starts over with it.
		for g := 1; g < len(c.groups); g++ {
			clear(c.groups[g].committed)
			clear(c.groups[g].laterLives)
			clear(c.groups[g].committedRequest)
		}
	}
	if nd.part.lives == nil {
		nd.part.lives = make([]uint64, len(c.groups))
	}
	for g := 1; g < len(c.groups); g++ {
		var err error
		if restart {
			// In the life its record names (partitionhost's openedLife): a purge
			// above the node's metadata checkpoint may have been carried out.
			_, err = s.Open(partitionKey(g), cfg, partition.Incarnation{CreatedAtMicros: stateCreatedAtMicros, PurgeGeneration: nd.part.lives[g]})
		} else {
			err = s.Create(partitionKey(g), cfg, stateCreatedAtMicros)
		}
		if err != nil {
			c.fail("replica %d: partition %v does not open: %v", nd.id, partitionKey(g), err)
			return
		}
	}
	nd.part.store = s
	nd.part.sends = make(map[uint64]*storeSend)
	nd.part.offsets = make(map[uint64]*offsetStore)
	nd.part.observed = make([]observedCore, len(c.groups))
}

// storesCrash reports whether a crash takes the real partition stores down with
// the node. Without fsync enforced a partition acknowledges a send once written, not
// durable, and a backup's PrepareOk promises memory only (as the reference's:
// iggy.apache.org/docs/server/storage-engine): a power loss may then lose what was
// acknowledged, by contract, which the checks would take for a violation. So the
// stores crash with their node when the topic enforces fsync (acknowledged means
// durable on a quorum: no crash may lose it), and otherwise only the metadata plane
// does.
func (c *cluster) storesCrash() bool { return c.partitionConfig().EnforceFsync }

// crashStore loses the node's partition plane with power: the store is dropped
// without a close, its disks keep what a power loss keeps.
func (c *cluster) crashStore(nd *node) {
	nd.part.disks = nd.part.disks.Crash(c.rngFail.Uint64())
	c.addStoreDrops(nd.part.store) // the incarnation that crashed
	nd.part.store = nil
	nd.part.sends = nil
	nd.part.offsets = nil
}

// addStoreDrops adds what a store dropped to the run's counts (nil: none).
func (c *cluster) addStoreDrops(s *partition.Store) {
	if s == nil {
		return
	}
	d, in := s.Drops(), s.IngressDrops()
	for r := range d {
		c.result.Partitions.Drops[r] += d[r]
	}
	for r := range in {
		c.result.Partitions.IngressDrops[r] += in[r]
	}
	c.result.Partitions.StatesInstalled += int(s.StatesInstalled())
}

// storeCore is the core of partition group g on nd's store (nil when it runs none).
func (c *cluster) storeCore(nd *node, g int) *vsr.Core {
	if nd.part.store == nil {
		return nil
	}
	return nd.part.store.SimCore(partitionKey(g))
}

// groupCore is the core of group g on nd, whichever plane runs it.
func (c *cluster) groupCore(nd *node, g int) *vsr.Core {
	if g != metadataGroupIndex {
		return c.storeCore(nd, g)
	}
	if nd.meta.plane == nil {
		return nil
	}
	return nd.meta.plane.Core()
}

// onStoreRequest serves a client's partition request at nd's store, as the server's
// owner shard does: a send through Store.Send, an offset store through
// Store.StoreConsumerOffset (AckQuorum), both on whatever replica the client reached
// (the store answers 58 unless it leads the group; the client retries elsewhere).
func (c *cluster) onStoreRequest(nd *node, r *clientRequest) {
	s := nd.part.store
	if s == nil {
		return
	}
	k := partitionKey(r.group)
	switch r.operation {
	case wire.OperationSendMessages:
		// The request buffer is the server's own: the store stamps it in place and
		// keeps it until SendDone, and every retry carries the client's bytes again.
		batch := alignedFrame(len(r.body))
		copy(batch, r.body)
		c.storeToken++
		token := c.storeToken
		nd.part.sends[token] = &storeSend{client: r.client, group: r.group, life: nd.part.lives[r.group], request: r.request, batch: batch}
		h, _ := wire.ViewBatchHeader(batch)
		req := wire.SendMessages{StreamID: wire.NumericIdentifier(k.StreamID), TopicID: wire.NumericIdentifier(k.TopicID),
			Partitioning: wire.Partitioning{Kind: wire.PartitioningPartitionID, PartitionID: k.PartitionID}, MessagesCount: h.MessageCount(), Batch: batch}
		err := s.Send(k, &req, c.now*1000, storeCompletion{c: c, nd: nd}, token)
		if err == nil {
			c.admitted[admittedBatch{group: r.group, life: nd.part.lives[r.group], frames: batchFrames(batch)}] = true
		}
		if err == nil && c.opts.broken == brokenStoreAckAtPrepare {
			c.sendClient(nd.id, c.opts.Replicas+r.client, packet{reply: &clientReply{client: r.client, group: r.group, request: r.request,
				baseOffset: h.BaseOffset(), frame: slices.Clone(batch)}})
		}
		if err != nil {
			delete(nd.part.sends, token)
			switch {
			case err == wire.ErrTransientNotAccepted:
			case c.diverged(nd, r, err):
			default:
				c.fail("replica %d group %d: the store refused a valid send: %v (%v)", nd.id, r.group, err, s.Err(k))
			}
		}
	case wire.OperationStoreConsumerOffset:
		consumer, offset := binary.LittleEndian.Uint32(r.body), binary.LittleEndian.Uint64(r.body[4:])
		core := s.SimCore(k)
		before := core.Op()
		c.storeToken++
		token := c.storeToken
		o := &offsetStore{client: r.client, group: r.group, request: r.request}
		nd.part.offsets[token] = o
		deferred, err := s.ReplicateConsumerOffset(k, partition.Consumer{Kind: wire.ConsumerSingle, ID: consumer}, offset, false, storeCompletion{c: c, nd: nd}, token)
		c.trace("r%d g%d offset store of client %d request %d: consumer %d offset %d: deferred %v %v (op %d -> %d)", nd.id, r.group, r.client, r.request, consumer, offset, deferred, err, before, core.Op())
		if !deferred {
			delete(nd.part.offsets, token)
			c.answerOffsetStore(nd, o, err)
		}
	default:
		c.fail("replica %d: a partition request of operation %v", nd.id, r.operation)
	}
	c.observeStore(nd)
}

// diverged handles a request the store refused because its partition is broken, and
// reports whether it was that. Without catch-up (Options.CatchUp) a replica that
// missed an op its peers applied holds batches above a hole in its journal; once it
// leads, its first send finds its log's end below them, takes it for a log that
// moved back (a storage failure), and the partition refuses every request (4010,
// 10006) until Recover. The client is answered with that status, as the server
// answers it.
func (c *cluster) diverged(nd *node, r *clientRequest, err error) bool {
	if c.opts.CatchUp || (err != wire.ErrCannotAppendMessage && err != wire.ErrCannotWriteToFile) || !errors.Is(nd.part.store.Err(partitionKey(r.group)), partition.ErrStampMismatch) {
		return false
	}
	c.result.Partitions.DivergedRefusals++
	c.trace("r%d g%d refuses request %d of client %d: %v", nd.id, r.group, r.request, r.client, nd.part.store.Err(partitionKey(r.group)))
	c.sendClient(nd.id, c.opts.Replicas+r.client, packet{reply: &clientReply{client: r.client, group: r.group, request: r.request, refused: true}})
	return true
}

// observeStore checks nd's partition groups after the store did anything: every op
// its cores committed since the last look is the op the cluster committed at that
// number (agreement), and views and commit points only go forward.
func (c *cluster) observeStore(nd *node) {
	s := nd.part.store
	if s == nil {
		return
	}
	for g := 1; g < len(c.groups); g++ {
		core := s.SimCore(partitionKey(g))
		ob := &nd.part.observed[g]
		if core.View() < ob.view {
			c.fail("replica %d group %d view went back from %d to %d", nd.id, g, ob.view, core.View())
			return
		}
		if core.CommitMin() < ob.commitMin {
			c.fail("replica %d group %d commit_min went back from %d to %d", nd.id, g, ob.commitMin, core.CommitMin())
			return
		}
		for op := ob.commitMin + 1; op <= core.CommitMin(); op++ {
			h, ok := core.Header(op)
			if !ok {
				c.result.Partitions.CommitsUnobserved++
				continue // out of the core's journal window already
			}
			if !c.agree(nd, g, nd.part.lives[g], &h) {
				return
			}
		}
		if core.View() != ob.view {
			c.trace("r%d g%d %v view %d op %d commit %d/%d applied %d", nd.id, g, core.Status(), core.View(), core.Op(), core.CommitMin(), core.CommitMax(), s.SimApplied(partitionKey(g)))
		}
		ob.view, ob.commitMin = core.View(), core.CommitMin()
	}
}

// agree records op h.Op of group g's life life as committed, or fails when the
// cluster committed another prepare at that op of the life.
func (c *cluster) agree(nd *node, g int, life uint64, h *wire.PrepareHeader) bool {
	committed := c.groups[g].committedIn(life)
	if want, ok := committed[h.Op]; ok && want != h.Checksum {
		c.fail("replica %d group %d (life %d) committed op %d as %x, another replica as %x", nd.id, g, life, h.Op, h.Checksum.Lo, want.Lo)
		return false
	} else if !ok {
		committed[h.Op] = h.Checksum
	}
	return true
}

// storesDone reports whether the partition groups caught up: every replica of
// every group committed and applied everything the cluster committed. Without the
// partition plane's catch-up (Options.CatchUp) a backup that missed an op its peers
// applied can never get it (a partition's journal holds only unapplied ops, and
// there is no state transfer), so there a replication quorum of each group must
// have caught up, the others are counted (Result.Partitions.LaggingReplicas).
func (c *cluster) storesDone() bool {
	need := len(c.nodes)
	if !c.opts.CatchUp {
		need = vsr.QuorumReplication(len(c.nodes))
	}
	lagging := 0
	for g := 1; g < len(c.groups); g++ {
		top := uint64(0)
		for _, nd := range c.nodes {
			core := c.storeCore(nd, g)
			if core == nil {
				return false
			}
			top = max(top, core.CommitMax())
		}
		caughtUp := 0
		for _, nd := range c.nodes {
			core := c.storeCore(nd, g)
			if core.CommitMin() == top && core.Op() == top && core.Status() == vsr.StatusNormal && nd.part.store.SimApplied(partitionKey(g)) == top {
				caughtUp++
			}
		}
		if caughtUp < need {
			return false
		}
		lagging += len(c.nodes) - caughtUp
	}
	c.result.Partitions.LaggingReplicas = lagging
	return true
}

// partitionsStalled reports whether a run that is not done at its liveness bound is
// explained by the partition plane's missing catch-up (Options.CatchUp), and only by
// it: the metadata plane caught up, every client still waiting waits for a partition
// request, and every partition group that has not caught up has a replica behind
// the commit point, missing ops no peer's journal serves any more. Such a replica
// stalls its group for good once it leads (it cannot repair what it must commit),
// or keeps a group of five below its replication quorum. The run's safety checks
// still run.
func (c *cluster) partitionsStalled() bool {
	if c.opts.CatchUp || !c.metadataDone() {
		return false
	}
	for _, cl := range c.clients {
		if cl.finished < c.opts.RequestsAfterHeal && (!cl.outstanding || cl.plan.group == metadataGroupIndex || cl.session == 0) {
			return false
		}
	}
	for g := 1; g < len(c.groups); g++ {
		top := uint64(0)
		for _, nd := range c.nodes {
			top = max(top, c.storeCore(nd, g).CommitMax())
		}
		behind := false
		for _, nd := range c.nodes {
			behind = behind || nd.part.store.SimApplied(partitionKey(g)) < top
		}
		if !behind && !c.groupCaughtUp(g, len(c.nodes)) {
			return false
		}
	}
	return true
}

// groupCaughtUp reports whether at least need replicas of partition group g
// committed and applied everything the cluster committed.
func (c *cluster) groupCaughtUp(g, need int) bool {
	top := uint64(0)
	for _, nd := range c.nodes {
		top = max(top, c.storeCore(nd, g).CommitMax())
	}
	caughtUp := 0
	for _, nd := range c.nodes {
		core := c.storeCore(nd, g)
		if core.CommitMin() == top && core.Op() == top && core.Status() == vsr.StatusNormal && nd.part.store.SimApplied(partitionKey(g)) == top {
			caughtUp++
		}
	}
	return caughtUp >= need
}

// pollDone is a poll's completion: it keeps the reply bytes.
type pollDone struct {
	reply []byte
	err   error
	done  bool
}

func (p *pollDone) PollDone(_ uint64, r *partition.PollResult, err error) {
	p.reply, p.err, p.done = partition.AppendPollReply(nil, r), err, true
}

// pollRoundsMax bounds the storage polls a read waits for.
const pollRoundsMax = 100_000

// readLog reads partition k's whole log back from a store through Store.Poll, as a
// consumer would, and returns its batches in order.
func (c *cluster) readLog(nd *node, k partition.Key) ([][]byte, error) {
	var res partition.PollResult
	var done pollDone
	req := partition.PollRequest{Consumer: partition.Consumer{Kind: wire.ConsumerSingle, ID: 1 << 20},
		Strategy: wire.PollingStrategy{Kind: wire.PollingOffset, Value: 0}, Count: 1 << 30}
	if err := nd.part.store.Poll(k, req, &res, &done, 0); err != nil {
		return nil, err
	}
	for i := 0; !done.done; i++ {
		if i == pollRoundsMax {
			return nil, fmt.Errorf("the poll of %v never completes", k)
		}
		nd.part.store.PollIO()
	}
	if done.err != nil {
		return nil, done.err
	}
	b := done.reply[wire.PolledMessagesPrefixSize:]
	var batches [][]byte
	for len(b) > 0 {
		bh, err := wire.ViewBatchHeader(b)
		if err != nil || bh.BatchLength() > uint64(len(b)) || bh.BatchLength() < wire.BatchHeaderSize {
			return nil, fmt.Errorf("the poll of %v returned a malformed record", k)
		}
		batches = append(batches, b[:bh.BatchLength()])
		b = b[bh.BatchLength():]
	}
	return batches, nil
}

// storeFinalChecks checks the real partition plane at the end of a run, after every
// store finished its I/O: every replica's log reads back the same batches, every
// acknowledged send is the batch at its base offset on every replica (the bytes the
// primary stamped), a client's acknowledged sends are in the order it sent them,
// and the replicas hold the same consumer offsets.
func (c *cluster) storeFinalChecks() {
	if c.opts.PartitionGroups == 0 {
		return
	}
	for _, nd := range c.nodes {
		nd.part.store.WaitIdle()
	}
	for g := 1; g < len(c.groups); g++ {
		k := partitionKey(g)
		// Every replica applied every metadata op (done, or stalled with the
		// metadata done): all are in one life.
		life := c.nodes[0].part.lives[g]
		for _, nd := range c.nodes {
			if nd.part.lives[g] != life {
				c.fail("replica %d group %d ends in life %d, replica %d in life %d", nd.id, g, nd.part.lives[g], c.nodes[0].id, life)
				return
			}
		}
		committed := c.groups[g].committedIn(life)
		var logs [][][]byte
		for _, nd := range c.nodes {
			core := c.storeCore(nd, g)
			for op := uint64(1); op <= core.CommitMin(); op++ {
				if h, ok := core.Header(op); ok && h.Checksum != committed[op] {
					c.fail("log equality: replica %d group %d holds %x at committed op %d of life %d, the cluster committed %x", nd.id, g, h.Checksum.Lo, op, life, committed[op].Lo)
					return
				}
			}
			batches, err := c.readLog(nd, k)
			if err != nil {
				c.fail("replica %d group %d: the log does not read back: %v", nd.id, g, err)
				return
			}
			next := uint64(0)
			for _, b := range batches {
				bh, _ := wire.ViewBatchHeader(b)
				if bh.BaseOffset() != next {
					c.fail("replica %d group %d: a batch at offset %d after offset %d", nd.id, g, bh.BaseOffset(), next)
					return
				}
				if key := (admittedBatch{group: g, life: life, frames: batchFrames(b)}); !c.admitted[key] {
					c.fail("replica %d group %d: the batch at offset %d was admitted by no store in life %d, the replicas' last (%s)", nd.id, g, bh.BaseOffset(), life, c.admittedElsewhere(key))
					return
				}
				next += uint64(bh.MessageCount())
			}
			logs = append(logs, batches)
		}
		// The logs are prefixes of the longest: a replica behind (storesDone) holds
		// fewer batches, never others.
		longest := 0
		for i := range logs {
			if len(logs[i]) > len(logs[longest]) {
				longest = i
			}
		}
		for i, batches := range logs {
			for j := range batches {
				if !bytes.Equal(batches[j], logs[longest][j]) {
					c.fail("replica %d group %d: batch %d differs from replica %d's", c.nodes[i].id, g, j, c.nodes[longest].id)
					return
				}
			}
		}
		// The replicas that applied every op hold the whole log, and the same
		// consumer offsets.
		var caughtUp []*node
		top := uint64(0)
		for _, nd := range c.nodes {
			top = max(top, nd.part.store.SimApplied(k))
		}
		for i, nd := range c.nodes {
			if nd.part.store.SimApplied(k) != top {
				continue
			}
			if len(logs[i]) != len(logs[longest]) {
				c.fail("replica %d group %d applied op %d as replica %d did, and holds %d batches, replica %d %d (%v)", nd.id, g, top, c.nodes[longest].id, len(logs[i]), c.nodes[longest].id, len(logs[longest]), nd.part.store.Err(k))
				return
			}
			caughtUp = append(caughtUp, nd)
		}
		for consumer := uint32(0); consumer < consumersCount; consumer++ {
			want, wantOK, _ := caughtUp[0].part.store.ConsumerOffset(k, partition.Consumer{Kind: wire.ConsumerSingle, ID: consumer})
			for _, nd := range caughtUp[1:] {
				got, ok, _ := nd.part.store.ConsumerOffset(k, partition.Consumer{Kind: wire.ConsumerSingle, ID: consumer})
				if ok != wantOK || got.StoredOffset != want.StoredOffset {
					c.fail("replica %d group %d: consumer %d's offset is %d (%v), replica %d's %d (%v) (errors: %v; %v)", nd.id, g, consumer, got.StoredOffset, ok, caughtUp[0].id, want.StoredOffset, wantOK, nd.part.store.Err(k), caughtUp[0].part.store.Err(k))
					return
				}
			}
		}
		for _, cl := range c.clients {
			last := map[uint64]uint64{} // request -> base offset
			lastRequest, lastBase := uint64(0), uint64(0)
			for _, reply := range cl.partitionReplies {
				if reply.group != g || reply.frame == nil {
					continue
				}
				if reply.life != life {
					// Acknowledged in a life a committed purge ended: gone by
					// contract.
					c.result.Partitions.AcksPurged++
					continue
				}
				for n, batches := range logs {
					if !reaches(batches, reply.baseOffset) && (!c.opts.CatchUp || c.result.Partitions.ForeignWedged) && n != longest {
						continue // a replica behind that has not applied it (or cannot)
					}
					if !holdsBatch(batches, reply.baseOffset, reply.frame) {
						c.fail("acknowledged send %d of client %d (group %d, offset %d) is not in replica %d's log as acknowledged", reply.request, cl.id, g, reply.baseOffset, c.nodes[n].id)
						return
					}
				}
				if _, dup := last[reply.request]; dup {
					continue
				}
				last[reply.request] = reply.baseOffset
				if reply.request > lastRequest {
					if lastRequest != 0 && reply.baseOffset <= lastBase {
						c.fail("client %d group %d: send %d acknowledged at offset %d, its earlier send %d at offset %d", cl.id, g, reply.request, reply.baseOffset, lastRequest, lastBase)
						return
					}
					lastRequest, lastBase = reply.request, reply.baseOffset
				}
			}
		}
	}
}

// reaches reports whether a log holds offset.
func reaches(batches [][]byte, offset uint64) bool {
	if len(batches) == 0 {
		return false
	}
	bh, _ := wire.ViewBatchHeader(batches[len(batches)-1])
	return offset < bh.BaseOffset()+uint64(bh.MessageCount())
}

// holdsBatch reports whether a log's batch at base offset is the acknowledged one,
// byte for byte.
func holdsBatch(batches [][]byte, base uint64, want []byte) bool {
	i, ok := slices.BinarySearchFunc(batches, base, func(b []byte, base uint64) int {
		bh, _ := wire.ViewBatchHeader(b)
		return cmp.Compare(bh.BaseOffset(), base)
	})
	return ok && bytes.Equal(batches[i], want)
}

// storeBatch is a producer batch of 1 to 4 messages with random payloads.
func storeBatch(r *rand.Rand) []byte {
	var bb wire.BatchBuilder
	bb.Reset(nil)
	for n := 1 + r.IntN(4); n > 0; n-- {
		payload := make([]byte, 8+r.IntN(48))
		for i := range payload {
			payload[i] = byte(r.Uint32())
		}
		if err := bb.Append(wire.Uint128{Lo: r.Uint64() | 1, Hi: r.Uint64()}, 1_700_000_000_000_000+r.Uint64N(1_000_000), payload, nil); err != nil {
			panic(fmt.Sprintf("sim: a workload batch does not build: %v", err))
		}
	}
	b, err := bb.Finish()
	if err != nil {
		panic(fmt.Sprintf("sim: a workload batch does not build: %v", err))
	}
	return b
}
