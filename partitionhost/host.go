// Package partitionhost is the partition plane on its owner shards: each shard's
// Host holds the store of the partitions it owns (package partition), serves the
// sends, polls and consumer offsets routed to it and finishes them as their
// storage completes, carries out what metadata commits ask of its partitions
// (creations, deletions, purges, a slice per loop turn: effects.go) and records
// them (record.go), keeps replica frames for partitions not created yet
// (heldframes.go), deletes deleted groups' offsets (groupoffsets.go), and gives
// the retention pass and the scrubber their turns.
//
// The transports' handler (package server) drives it on each shard and is its
// Shard: the seam through which a finished job goes back to its home shard.
package partitionhost

import (
	"errors"
	"log/slog"
	"time"

	"github.com/iggy-shard/iggy-shard/metadata"
	"github.com/iggy-shard/iggy-shard/partition"
	"github.com/iggy-shard/iggy-shard/partitiondir"
	"github.com/iggy-shard/iggy-shard/pollmemory"
	"github.com/iggy-shard/iggy-shard/request"
	"github.com/iggy-shard/iggy-shard/shard"
	"github.com/iggy-shard/iggy-shard/wire"
)

// Shard is what a Host needs of its shard's handler.
type Shard interface {
	// Reply sends a finished job back to its home shard, which answers it.
	Reply(j *request.Job)
	// NowNs is the shard's clock, NowMicros the wall clock.
	NowNs() int64
	NowMicros() uint64
	// WakeAt asks for a turn at the shard clock's ns.
	WakeAt(ns int64)
	// ViewState is the shard's view of the committed metadata (package
	// metaview), caught up as of the handler's last look.
	ViewState() *metadata.State
}

// Config is what a Host is made of.
type Config struct {
	Shard Shard
	Log   *slog.Logger
	// Index is the shard's; OwnerOf names the shard that owns a partition.
	Index   int
	OwnerOf func(partition.Key) int
	// SystemPath is the node's data directory; Disk the shard's disk ring.
	SystemPath string
	Disk       *shard.Disk
	// Replication places the partitions in their groups (the zero value but
	// for its file budget on a single node); FilesMax is the shard's budget of
	// open partition files.
	Replication partition.Replication
	FilesMax    int
	// Stats is the node's table of partition figures, published here.
	Stats *Stats
	// PollMemory bounds the bytes the shard's polls hold (package pollmemory).
	PollMemory *pollmemory.Memory[*request.Job]
	// Lender, when set, lends the store the replica frames it steps
	// (partition.BodyLender): a backup journals a prepare in the frame it
	// arrived in rather than a copy.
	Lender partition.BodyLender
}

// Host is a shard's partition plane: the store of the partitions it owns, the
// work in flight on their storage, and what the metadata commits ask of them.
type Host struct {
	// Store is the shard's partitions; Disk its disk ring.
	Store *partition.Store
	Disk  *shard.Disk
	// FilesMax is the store's budget of open files (partition.Replication.
	// OpenFilesMax): the shard's share of the node's.
	FilesMax int
	// IOWanted: requests were queued this turn; the shard's Tick submits them.
	IOWanted bool

	shard      Shard
	log        *slog.Logger
	index      int
	ownerOf    func(partition.Key) int
	systemPath string
	stats      *Stats
	pollMemory *pollmemory.Memory[*request.Job]
	lender     partition.BodyLender
	// storages is the store's StorageProvider (partitiondir/storages.go), on the
	// shard's disk ring.
	storages *partitiondir.Storages

	// inflight are the partition jobs waiting for storage completions, by token
	// (free: the tokens to reuse).
	inflight inflight
	// groupPolls holds, per partition and consumer group with a poll in flight, the
	// polls waiting for it.
	groupPolls map[groupPollKey][]*request.Job
	// groupOffsets are deleted groups' offsets to delete again (groupoffsets.go).
	groupOffsets groupOffsets
	// segmentDeletes are DeleteSegments effects waiting for their op
	// (segmentdeletes.go).
	segmentDeletes segmentDeletes
	// effects are the metadata commits' partition effects not carried out yet
	// (effects.go).
	effects effectQueue
	// hold keeps replica frames for partitions the view does not have yet
	// (heldframes.go).
	hold frameHold
	// due are the shard clock's times of the retention pass and the scrubber.
	due passes
	// sendRefused rate-limits the log lines of sends refused for a storage
	// failure (eventlog.go).
	sendRefused eventLog
	// closed is set once Close closed the store on the shard's thread, with what
	// that reported.
	closed struct {
		done bool
		err  error
	}
}

// inflight are the jobs with the storage.
type inflight struct {
	jobs []*request.Job
	free []uint64
}

// groupOffsets are the deletions of deleted groups' offsets.
type groupOffsets struct {
	deletes []*groupOffsetDelete
	// proposals counts the deletions this shard proposed as its partitions'
	// primary (tests).
	proposals int
}

// passes are when the shard's periodic passes over its partitions next run.
type passes struct {
	// retentionNs is when the next retention pass runs (shard clock).
	retentionNs int64
	// pollMemoryNs is when the idle poll buffers are next dropped (pollmemory.go).
	pollMemoryNs int64
	// scrubNs is when the scrubber next takes its turn (0: it has not started),
	// and scrubbing whether its last turn found something to verify (scrub.go).
	scrubNs   int64
	scrubbing bool
}

// New is a shard's Host, its store empty until OpenAtStart.
func New(cfg Config) *Host {
	h := &Host{Disk: cfg.Disk, FilesMax: cfg.FilesMax, shard: cfg.Shard, log: cfg.Log, index: cfg.Index, ownerOf: cfg.OwnerOf,
		systemPath: cfg.SystemPath, stats: cfg.Stats, pollMemory: cfg.PollMemory, lender: cfg.Lender,
		sendRefused: newEventLog()}
	h.due.retentionNs = cfg.Shard.NowNs() + retentionIntervalNs
	h.due.pollMemoryNs = cfg.Shard.NowNs() + int64(pollmemory.DropIdleInterval)
	h.groupPolls = make(map[groupPollKey][]*request.Job)
	h.storages = partitiondir.NewStorages(cfg.Disk)
	repl := cfg.Replication
	repl.OpenFilesMax = cfg.FilesMax
	h.Store = partition.NewReplicatedStore(cfg.SystemPath, h.storages, repl)
	return h
}

// Close closes the store on the shard's thread (its last turn), making what was
// written durable.
func (h *Host) Close() error {
	err := h.Store.Close()
	h.closed.done, h.closed.err = true, err
	return err
}

// Closed reports whether Close ran, and what it reported.
func (h *Host) Closed() (bool, error) { return h.closed.done, h.closed.err }

// errorCode turns an error from a package below into the code to answer with.
func errorCode(err error, fallback wire.ErrorCode) wire.ErrorCode {
	if code, ok := err.(wire.ErrorCode); ok && code != 0 {
		return code
	}
	return fallback
}

func (h *Host) Serve(j *request.Job) {
	h.EnsureCreated(j.Partition()) // its creation may wait for its turn (effects.go)
	switch j.Kind {
	case request.KindSend:
		token := h.track(j)
		if err := h.Store.Send(j.Send.Key, &j.Send.Batch, h.shard.NowMicros(), h, token); err != nil {
			h.untrack(token)
			j.Out.Status = errorCode(err, wire.ErrCannotAppendMessage)
			h.logSendRefused(j, j.Out.Status)
			h.shard.Reply(j)
			return
		}
		h.scheduleIO()
	case request.KindPoll:
		if j.Poll.Req.Consumer.Kind == wire.ConsumerGroup {
			// One poll of a group on a partition at a time: a second one started before
			// the first auto-commits would read from the same stored offset and deliver
			// the same messages to two members.
			key := groupPollKey{key: j.Poll.Key, group: j.Poll.Req.Consumer.ID}
			if waiting, busy := h.groupPolls[key]; busy {
				h.groupPolls[key] = append(waiting, j)
				return
			}
			h.groupPolls[key] = nil
		}
		h.admitPoll(j)
	case request.KindGetOffset:
		out, err := h.Store.AppendConsumerOffsetReply(j.Out.Reply[:0], j.Offset.Key, j.Offset.Consumer)
		if err != nil {
			j.Out.Status = errorCode(err, wire.ErrPartitionNotFound)
		}
		j.Out.Reply = out
		h.shard.Reply(j)
	case request.KindStoreOffset, request.KindDeleteOffset:
		if j.Offset.Ack == wire.AckQuorum {
			// Through the partition's group: in a cluster the answer comes once the
			// op is applied (OffsetDone).
			token := h.track(j)
			deferred, err := h.Store.ReplicateConsumerOffset(j.Offset.Key, j.Offset.Consumer, j.Offset.Value, j.Kind == request.KindDeleteOffset, h, token)
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
			err = h.Store.StoreConsumerOffset(j.Offset.Key, j.Offset.Consumer, j.Offset.Value, j.Offset.Ack)
		} else {
			err = h.Store.DeleteConsumerOffset(j.Offset.Key, j.Offset.Consumer, j.Offset.Ack)
		}
		h.answerOffset(j, err)
	default:
		panic("server: job of kind routed to an owner shard that owns no such work")
	}
}

// OffsetDone implements partition.OffsetCompletion: a replicated consumer offset op
// was applied, or failed.
func (h *Host) OffsetDone(token uint64, err error) { h.answerOffset(h.untrack(token), err) }

// answerOffset answers a consumer offset store or delete.
func (h *Host) answerOffset(j *request.Job, err error) {
	if err != nil {
		j.Out.Status = errorCode(err, wire.ErrResourceNotFound)
	} else {
		j.Out.Reply = wire.AppendResultSuccess(j.Out.Reply[:0])
	}
	h.shard.Reply(j)
}

// SendDone implements partition.SendCompletion.
func (h *Host) SendDone(token uint64, c wire.SendConfirmation, err error) {
	j := h.untrack(token)
	if err != nil {
		j.Out.Status = errorCode(err, wire.ErrCannotSaveMessagesToSegment)
		h.logSendRefused(j, j.Out.Status)
	} else {
		j.Out.Reply = partition.AppendSendReply(j.Out.Reply[:0], c)
		h.PublishStats(j.Send.Key)
	}
	h.shard.Reply(j)
}

type groupPollKey struct {
	key   partition.Key
	group uint32
}

// startPoll starts an admitted poll (admitPoll): its read takes its buffer from
// the shard's poll memory.
func (h *Host) startPoll(j *request.Job) {
	if j.Poll.MayPlan && h.planPoll(j) {
		return
	}
	token := h.track(j)
	j.Poll.Res.SetReadBuffers(h.pollMemory.Lend)
	if err := h.Store.Poll(j.Poll.Key, j.Poll.Req, &j.Poll.Res, h, token); err != nil {
		h.untrack(token)
		j.Out.Status = errorCode(err, wire.ErrPartitionNotFound)
		h.pollRead(j)
		return
	}
	h.scheduleIO()
}

// planPoll answers a poll by a plan of file runs for the connection's shard to
// splice, when the store can (partition.Store.PlanPoll), and reports whether it
// did. A planned poll took no read buffer, so its poll memory reservation goes
// back at once (pollRead); one the store declines, or that fails, is read by
// Poll as any other, which answers the failure as well.
func (h *Host) planPoll(j *request.Job) bool {
	planned, err := h.Store.PlanPoll(j.Poll.Key, j.Poll.Req, &j.Poll.Plan, h.shard.NowNs())
	if err != nil || !planned {
		return false
	}
	j.Poll.Read = true
	h.pollRead(j)
	return true
}

// PollDone implements partition.PollCompletion.
func (h *Host) PollDone(token uint64, r *partition.PollResult, err error) {
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
func (h *Host) pollRead(j *request.Job) {
	planned := j.Poll.Res.HoldsReadBuffer() // before the reply: then the job is the connection shard's
	h.pollFinished(j)
	if !planned {
		h.pollMemory.Unplanned()
		h.startWaitingPolls()
	}
}

// pollFinished replies and starts the next waiting poll of the same group.
func (h *Host) pollFinished(j *request.Job) {
	key := groupPollKey{key: j.Poll.Key, group: j.Poll.Req.Consumer.ID}
	group := j.Poll.Req.Consumer.Kind == wire.ConsumerGroup
	h.shard.Reply(j)
	if !group {
		return
	}
	waiting := h.groupPolls[key]
	if len(waiting) == 0 {
		delete(h.groupPolls, key)
		return
	}
	next := waiting[0]
	waiting[0] = nil
	h.groupPolls[key] = waiting[1:]
	h.admitPoll(next)
}

func (h *Host) track(j *request.Job) uint64 {
	if n := len(h.inflight.free); n > 0 {
		token := h.inflight.free[n-1]
		h.inflight.free = h.inflight.free[:n-1]
		h.inflight.jobs[token] = j
		return token
	}
	h.inflight.jobs = append(h.inflight.jobs, j)
	return uint64(len(h.inflight.jobs) - 1)
}

// InflightJob is the job the store was given token for (Store.Send's, the
// SendCompletion's), while it waits for its storage; nil when none does.
func (h *Host) InflightJob(token uint64) *request.Job {
	if token >= uint64(len(h.inflight.jobs)) {
		return nil
	}
	return h.inflight.jobs[token]
}

func (h *Host) untrack(token uint64) *request.Job {
	j := h.inflight.jobs[token]
	if j == nil {
		panic("server: storage completion for a token that is not in flight")
	}
	h.inflight.jobs[token] = nil
	h.inflight.free = append(h.inflight.free, token)
	return j
}

// scheduleIO asks for a storage round at this turn's Tick, so the sends and polls of
// one turn share one submit to the disk ring.
func (h *Host) scheduleIO() { h.IOWanted = true }

func (h *Host) PublishStats(k partition.Key) {
	if info, err := h.Store.Info(k); err == nil {
		h.stats.Publish(k, info)
	}
}

// effect is one instruction of a metadata commit for an owner shard. Each is
// applied at most once in effect, however often its op is (record.go).
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
	// view is where the group of a partition the op creates starts
	// (metaview.Entry.View): led by the node that prepared the op, the leader
	// then, the same on every node. A purged life starts in view 0 (partition.
	// Store.Purge says why).
	view uint32
	// revision is the op's metadata revision (its prepare timestamp): the effect
	// touches only partitions created at or before it.
	revision uint64
}

func (h *Host) applyEffect(e *effect) {
	h.effects.counted(h.shard.NowNs())
	var err error
	k := e.key
	switch {
	case e.reconfig:
		err = h.Store.Reconfigure(k.StreamID, k.TopicID, e.cfg)
		if errors.Is(err, partition.ErrNotOwned) {
			err = nil
		}
	case e.kind == metadata.EffectCreatePartitions:
		err = h.createPartition(e)
		h.PublishStats(k)
	case e.kind == metadata.EffectDeletePartitions:
		if h.madeBefore(k, e.revision) {
			h.stats.Remove(k)
			err = h.Store.Delete(k)
		}
	case e.kind == metadata.EffectDeleteTopic, e.kind == metadata.EffectDeleteStream:
		h.forEachOwned(k.StreamID, k.TopicID, e.kind == metadata.EffectDeleteTopic, e.revision, func(p partition.Key) {
			h.stats.Remove(p)
			err = errors.Join(err, h.Store.Delete(p))
		})
	case e.kind == metadata.EffectPurgeTopic:
		// Partition by partition: only one that was emptied records the generation,
		// so a failed purge is carried out again at the next start.
		h.forEachOwned(k.StreamID, k.TopicID, true, e.revision, func(p partition.Key) {
			err = errors.Join(err, h.purgePartition(p, e.purgeGeneration, e.revision))
			h.PublishStats(p)
		})
	case e.kind == metadata.EffectDeleteSegments:
		if h.madeBefore(k, e.revision) {
			err = h.deleteSegments(e)
			h.PublishStats(k)
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
func (h *Host) forEachOwned(stream, topic uint32, matchTopic bool, revision uint64, f func(partition.Key)) {
	for _, k := range h.Store.Keys(nil) {
		if k.StreamID == stream && (!matchTopic || k.TopicID == topic) && h.madeBefore(k, revision) {
			f(k)
		}
	}
}

// retentionIntervalNs is how often a shard deletes the expired and oversized
// sealed segments of its partitions (the reference server's cleaner runs every
// minute). It runs at a turn of the shard's, and an idle shard takes one every
// shard.Config.MaintenanceInterval, so expired segments go without traffic too.
const retentionIntervalNs = int64(60 * time.Second)

func (h *Host) ApplyRetentionIfDue() {
	now := h.shard.NowNs()
	if now < h.due.retentionNs {
		return
	}
	h.due.retentionNs = now + retentionIntervalNs
	removed, err := h.Store.ApplyRetention(h.shard.NowMicros())
	if err != nil {
		h.log.Error("retention pass failed", "err", err)
	}
	if removed > 0 {
		h.log.Info("retention", "removed_segments", removed)
		for _, k := range h.Store.Keys(nil) {
			h.PublishStats(k)
		}
	}
}

// StepFrame steps a frame into partition k's group, offering it to the store
// to keep (Config.Lender) rather than copy its body.
func (h *Host) StepFrame(k partition.Key, peer uint8, hdr *wire.GenericHeader, body []byte) {
	var err error
	if h.lender != nil {
		err = h.Store.StepLending(k, hdr, body, h.lender)
	} else {
		err = h.Store.Step(k, hdr, body)
	}
	if err != nil {
		h.log.Debug("replica frame refused by a partition group", "partition", k.String(), "peer", peer,
			"command", hdr.Command.String(), "err", err)
	}
	h.IOWanted = true // a step may have applied commits or queued writes
}

// EffectsPending reports whether commits' effects wait to be carried out.
func (h *Host) EffectsPending() bool { return h.effects.pending() }

// HoldsFrames reports whether frames wait for their partitions (heldframes.go),
// and HeldFrames how many.
func (h *Host) HoldsFrames() bool { return len(h.hold.frames) > 0 }
func (h *Host) HeldFrames() int   { return len(h.hold.frames) }

// HeldCounts are the held frames' figures (metrics, tests).
func (h *Host) HeldCounts() HeldFrameCounts { return h.hold.counts }

// Scrubbing reports whether the scrubber's last turn found something to verify,
// and when it next takes one (shard clock).
func (h *Host) Scrubbing() (bool, int64) { return h.due.scrubbing, h.due.scrubNs }

// EffectsPeak is the most effects carried out in one turn (tests).
func (h *Host) EffectsPeak() int { return h.effects.peak }

// GroupOffsetDeletes is how many deleted groups' offsets wait to be deleted
// again, and GroupOffsetProposals how many deletions this shard proposed (tests).
func (h *Host) GroupOffsetDeletes() int   { return len(h.groupOffsets.deletes) }
func (h *Host) GroupOffsetProposals() int { return h.groupOffsets.proposals }
