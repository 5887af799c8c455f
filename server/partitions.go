package server

import (
	"errors"

	"github.com/iggy-shard/iggy-shard/metadata"
	"github.com/iggy-shard/iggy-shard/partition"
	"github.com/iggy-shard/iggy-shard/partitiondir"
	"github.com/iggy-shard/iggy-shard/request"
	"github.com/iggy-shard/iggy-shard/shard"
	"github.com/iggy-shard/iggy-shard/wire"
)

// The partition plane on an owner shard: the jobs shard 0 routed here, the
// effects of metadata commits, and the storage completions that finish sends and
// polls.

// ownedPartitions is a shard's partition plane: the store of the partitions it
// owns, the work in flight on their storage, and what the metadata commits ask
// of them.
type ownedPartitions struct {
	store *partition.Store
	// filesMax is the store's budget of open files (partition.Replication.
	// OpenFilesMax): the shard's share of the node's.
	filesMax int
	// storages is the store's StorageProvider (partitiondir/storages.go), on the shard's disk
	// ring.
	storages *partitiondir.Storages
	disk     *shard.Disk

	// Partition jobs waiting for storage completions, by token.
	inflight     []*job
	inflightFree []uint64
	ioWanted     bool // requests were queued this turn: Tick submits them
	// groupPolls holds, per partition and consumer group with a poll in flight, the
	// polls waiting for it.
	groupPolls map[groupPollKey][]*job
	// groupOffsetDeletes are deleted groups' offsets to delete again
	// (groupoffsets.go).
	groupOffsetDeletes []*groupOffsetDelete
	// groupOffsetProposals counts the deletions this shard proposed as its
	// partitions' primary (tests).
	groupOffsetProposals int
	// effects are the metadata commits' partition effects not carried out yet
	// (effects.go).
	effects effectQueue
	// hold keeps replica frames for partitions the view does not have yet
	// (heldframes.go).
	hold frameHold

	// retentionDueNs is when the next retention pass runs (shard clock).
	retentionDueNs int64
	// scrubDueNs is when the scrubber next takes its turn (shard clock; 0: it has
	// not started), and scrubbing whether its last turn found something to verify
	// (scrub.go).
	scrubDueNs int64
	scrubbing  bool

	// storeClosed is set once Stop closed the store on the shard's thread, with
	// closeErr what that reported.
	storeClosed bool
	closeErr    error
}

func (h *handler) serveOwner(j *job) {
	h.ensureCreated(j.Partition()) // its creation may wait for its turn (effects.go)
	switch j.Kind {
	case request.KindSend:
		token := h.track(j)
		if err := h.owned.store.Send(j.Send.Key, &j.Send.Batch, h.srv.nowMicros(), h, token); err != nil {
			h.untrack(token)
			j.Out.Status = errorCode(err, wire.ErrCannotAppendMessage)
			h.logSendRefused(j, j.Out.Status)
			h.reply(j)
			return
		}
		h.scheduleIO()
	case request.KindPoll:
		if j.Poll.Req.Consumer.Kind == wire.ConsumerGroup {
			// One poll of a group on a partition at a time: a second one started before
			// the first auto-commits would read from the same stored offset and deliver
			// the same messages to two members.
			key := groupPollKey{key: j.Poll.Key, group: j.Poll.Req.Consumer.ID}
			if waiting, busy := h.owned.groupPolls[key]; busy {
				h.owned.groupPolls[key] = append(waiting, j)
				return
			}
			h.owned.groupPolls[key] = nil
		}
		h.admitPoll(j)
	case request.KindGetOffset:
		out, err := h.owned.store.AppendConsumerOffsetReply(j.Out.Reply[:0], j.Offset.Key, j.Offset.Consumer)
		if err != nil {
			j.Out.Status = errorCode(err, wire.ErrPartitionNotFound)
		}
		j.Out.Reply = out
		h.reply(j)
	case request.KindStoreOffset, request.KindDeleteOffset:
		if j.Offset.Ack == wire.AckQuorum {
			// Through the partition's group: in a cluster the answer comes once the
			// op is applied (OffsetDone).
			token := h.track(j)
			deferred, err := h.owned.store.ReplicateConsumerOffset(j.Offset.Key, j.Offset.Consumer, j.Offset.Value, j.Kind == request.KindDeleteOffset, h, token)
			if deferred {
				h.scheduleIO()
				return
			}
			h.untrack(token)
			h.answerOffset(j, err)
			return
		}
		var err error
		if j.Kind == request.KindStoreOffset {
			err = h.owned.store.StoreConsumerOffset(j.Offset.Key, j.Offset.Consumer, j.Offset.Value, j.Offset.Ack)
		} else {
			err = h.owned.store.DeleteConsumerOffset(j.Offset.Key, j.Offset.Consumer, j.Offset.Ack)
		}
		h.answerOffset(j, err)
	default:
		panic("server: job of kind routed to an owner shard that owns no such work")
	}
}

// OffsetDone implements partition.OffsetCompletion: a replicated consumer offset op
// was applied, or failed.
func (h *handler) OffsetDone(token uint64, err error) { h.answerOffset(h.untrack(token), err) }

// answerOffset answers a consumer offset store or delete.
func (h *handler) answerOffset(j *job, err error) {
	if err != nil {
		j.Out.Status = errorCode(err, wire.ErrResourceNotFound)
	} else {
		j.Out.Reply = wire.AppendResultSuccess(j.Out.Reply[:0])
	}
	h.reply(j)
}

// SendDone implements partition.SendCompletion.
func (h *handler) SendDone(token uint64, c wire.SendConfirmation, err error) {
	j := h.untrack(token)
	if err != nil {
		j.Out.Status = errorCode(err, wire.ErrCannotSaveMessagesToSegment)
		h.logSendRefused(j, j.Out.Status)
	} else {
		j.Out.Reply = partition.AppendSendReply(j.Out.Reply[:0], c)
		h.publishStats(j.Send.Key)
	}
	h.reply(j)
}

type groupPollKey struct {
	key   partition.Key
	group uint32
}

// startPoll starts an admitted poll (admitPoll): its read takes its buffer from
// the shard's poll memory.
func (h *handler) startPoll(j *job) {
	token := h.track(j)
	j.Poll.Res.SetReadBuffers(h.pollMemoryOf().Lend)
	if err := h.owned.store.Poll(j.Poll.Key, j.Poll.Req, &j.Poll.Res, h, token); err != nil {
		h.untrack(token)
		j.Out.Status = errorCode(err, wire.ErrPartitionNotFound)
		h.pollRead(j)
		return
	}
	h.scheduleIO()
}

// PollDone implements partition.PollCompletion.
func (h *handler) PollDone(token uint64, r *partition.PollResult, err error) {
	j := h.untrack(token)
	if err != nil {
		// The result holds no message, which is the reply (the reference server fails
		// such a poll closed with an empty result).
		h.log.Error("poll read failed", "partition", j.Poll.Key.String(), "err", err)
	}
	j.Poll.Read = true
	h.pollRead(j)
}

// pollRead finishes a poll whose read is over. A read that took no buffer gives
// its reservation back at once; one that did holds its buffer until the reply is
// sent (returnPollBuffer).
func (h *handler) pollRead(j *job) {
	planned := j.Poll.Res.HoldsReadBuffer() // before the reply: then the job is the connection shard's
	h.pollFinished(j)
	if !planned {
		h.pollMemoryOf().Unplanned()
		h.startWaitingPolls()
	}
}

// pollFinished replies and starts the next waiting poll of the same group.
func (h *handler) pollFinished(j *job) {
	key := groupPollKey{key: j.Poll.Key, group: j.Poll.Req.Consumer.ID}
	group := j.Poll.Req.Consumer.Kind == wire.ConsumerGroup
	h.reply(j)
	if !group {
		return
	}
	waiting := h.owned.groupPolls[key]
	if len(waiting) == 0 {
		delete(h.owned.groupPolls, key)
		return
	}
	next := waiting[0]
	waiting[0] = nil
	h.owned.groupPolls[key] = waiting[1:]
	h.admitPoll(next)
}

func (h *handler) track(j *job) uint64 {
	if n := len(h.owned.inflightFree); n > 0 {
		token := h.owned.inflightFree[n-1]
		h.owned.inflightFree = h.owned.inflightFree[:n-1]
		h.owned.inflight[token] = j
		return token
	}
	h.owned.inflight = append(h.owned.inflight, j)
	return uint64(len(h.owned.inflight) - 1)
}

func (h *handler) untrack(token uint64) *job {
	j := h.owned.inflight[token]
	if j == nil {
		panic("server: storage completion for a token that is not in flight")
	}
	h.owned.inflight[token] = nil
	h.owned.inflightFree = append(h.owned.inflightFree, token)
	return j
}

// scheduleIO asks for a storage round at this turn's Tick, so the sends and polls of
// one turn share one submit to the disk ring.
func (h *handler) scheduleIO() { h.owned.ioWanted = true }

// alignGroups keeps the partitions this shard owns led by the node that leads the
// metadata group, the node GetClusterMetadata names and the SDKs write to: once this
// node has led it for a heartbeat timeout, the groups it backs take over
// (partition.Store.LeadGroups), a bounded number per heartbeat timeout so that a
// takeover is no storm of view changes. Groups created by a metadata op start in
// its view and need none; those that changed view apart from the metadata group
// (a failover of one and not the other) come back this way.
func (h *handler) alignGroups() {
	c := h.srv.cluster
	if c == nil {
		return
	}
	now := h.shard.NowNs()
	if l := c.leader.Load(); l == 0 || uint8(l-1) != c.self {
		h.consensus.leaderSinceNs = 0
		return
	}
	if h.consensus.leaderSinceNs == 0 {
		h.consensus.leaderSinceNs = now
		return
	}
	interval := h.consensus.alignIntervalNs
	if now-h.consensus.leaderSinceNs < interval || now < h.consensus.alignDueNs {
		return
	}
	h.consensus.alignDueNs = now + interval
	if moved := h.owned.store.LeadGroups(alignGroupsMax); moved > 0 {
		h.log.Info("partitions taken over to follow the metadata leader", "groups", moved)
		h.owned.ioWanted = true
	}
}

// alignGroupsMax bounds the partition groups a shard takes over per heartbeat
// timeout.
const alignGroupsMax = 64

// Tick implements shard.Ticker: each loop turn with disk work it submits the
// partitions' queued requests to the shard's disk ring and runs the completions the
// ring posted (the disk ring's eventfd woke the loop). It reports true while completed
// requests still wait for their hooks, so that the loop does not block meanwhile.
func (h *handler) Tick(_ *shard.Shard) bool {
	if h.stopped {
		return false
	}
	h.catchUpTicks()
	h.serveCalls()
	effectsWait := false
	if h.owned.effects.pending() {
		effectsWait = h.runEffects(effectsPerTurnMax, effectsTurnBudget)
		h.owned.ioWanted = true // the new directories are made durable this turn (Store.SyncDirs)
	}
	if len(h.owned.hold.frames) > 0 {
		h.expireHeld()
	}
	h.alignGroups()
	h.retryGroupOffsetDeletes()
	h.scrubIfDue()
	if h.owned.ioWanted || h.owned.disk.InFlight() > 0 || h.owned.disk.Ready() {
		h.owned.ioWanted = h.owned.store.PollIO() > 0
		h.owned.store.TakeChanged(h.publishStats)
		h.flushOutbox()
	}
	if h.meta != nil {
		h.checkHeartbeats()
		h.meta.FinishJournal()
		h.meta.FinishPasswordChecks()
		h.flushOutbox()
	}
	if len(h.outbox) > 0 {
		h.flushOutbox()
	}
	h.scheduleTicks()
	// Requests a completion hook queued after its log was polled (a save after a
	// write, the next read) go to the kernel now, or the loop would sleep on them.
	h.owned.disk.Flush()
	return h.owned.disk.Ready() || effectsWait
}

// Stop implements shard.Stopper: on the shard's own thread (the disk ring belongs to
// it), every partition is closed, making what was written durable. Replies of sends
// that complete now have no shard left to go to.
func (h *handler) Stop(_ *shard.Shard) {
	h.srv.calls.inboxes[h.index].close() // no call is taken any more: those waiting are answered
	if h.meta != nil {
		// The writes first: a login among them may hand its password to the
		// workers again, whose checks are then abandoned with the others, and so
		// are the new passwords still with the workers.
		h.meta.StopJournal()
		h.meta.AbandonPasswordChecks()
		h.flushOutbox()
	}
	h.runAllEffects() // committed: their partitions are as the metadata says at the next start
	h.stopped = true
	if err := h.owned.store.Close(); err != nil {
		h.log.Error("closing partitions", "err", err)
		h.owned.closeErr = err
	}
	h.owned.storeClosed = true
}

func (h *handler) publishStats(k partition.Key) {
	if info, err := h.owned.store.Info(k); err == nil {
		h.srv.stats.publish(k, info)
	}
}

// effect is one instruction of a metadata commit for an owner shard. Each is
// applied at most once in effect, however often its op is (partitionrecord.go).
type effect struct {
	kind      metadata.EffectKind
	key       partition.Key
	count     uint32
	group     uint32
	cfg       partition.Config
	createdAt uint64
	reconfig  bool // apply cfg to every partition of key's topic this shard owns
	// purgeGeneration is the topic's purge generation: the one a purge reached, or
	// the one a created partition starts at.
	purgeGeneration uint64
	// view is the view of the metadata op that creates the partition: its group
	// starts there, led by the node that led the cluster then.
	view uint32
	// revision is the op's metadata revision (its prepare timestamp): the effect
	// touches only partitions created at or before it.
	revision uint64
}

func (h *handler) applyEffect(e *effect) {
	h.owned.effects.counted(h.shard.NowNs())
	var err error
	k := e.key
	switch {
	case e.reconfig:
		err = h.owned.store.Reconfigure(k.StreamID, k.TopicID, e.cfg)
		if errors.Is(err, partition.ErrNotOwned) {
			err = nil
		}
	case e.kind == metadata.EffectCreatePartitions:
		err = h.createPartition(e)
		h.publishStats(k)
	case e.kind == metadata.EffectDeletePartitions:
		if h.madeBefore(k, e.revision) {
			h.srv.stats.remove(k)
			err = h.owned.store.Delete(k)
		}
	case e.kind == metadata.EffectDeleteTopic, e.kind == metadata.EffectDeleteStream:
		h.forEachOwned(k.StreamID, k.TopicID, e.kind == metadata.EffectDeleteTopic, e.revision, func(p partition.Key) {
			h.srv.stats.remove(p)
			err = errors.Join(err, h.owned.store.Delete(p))
		})
	case e.kind == metadata.EffectPurgeTopic:
		// Partition by partition: only one that was emptied records the generation,
		// so a failed purge is carried out again at the next start.
		h.forEachOwned(k.StreamID, k.TopicID, true, e.revision, func(p partition.Key) {
			err = errors.Join(err, h.purgePartition(p, e.purgeGeneration, e.revision))
			h.publishStats(p)
		})
	case e.kind == metadata.EffectDeleteSegments:
		if h.madeBefore(k, e.revision) {
			err = h.deleteSegments(e)
			h.publishStats(k)
		}
	case e.kind == metadata.EffectDeleteConsumerGroup:
		h.forEachOwned(k.StreamID, k.TopicID, true, e.revision, func(p partition.Key) { h.deleteGroupOffset(p, e.group, e.revision) })
	}
	if err != nil {
		h.log.Error("partition effect failed", "effect", e.kind.String(), "partition", k.String(), "err", err)
	}
}

// forEachOwned calls f with each open partition of the stream (of its topic with
// matchTopic) created at or before revision.
func (h *handler) forEachOwned(stream, topic uint32, matchTopic bool, revision uint64, f func(partition.Key)) {
	for _, k := range h.owned.store.Keys(nil) {
		if k.StreamID == stream && (!matchTopic || k.TopicID == topic) && h.madeBefore(k, revision) {
			f(k)
		}
	}
}
