package partition

import (
	"sync/atomic"
	"time"

	"github.com/iggy-shard/iggy-shard/segment"
	"github.com/iggy-shard/iggy-shard/wire"
)

// A poll of whole, verified, durable batches can be answered by a plan: the
// reply's 16-byte prefix, then runs of the segment files as they are, which
// the server splices to the socket (file -> pipe -> socket) instead of
// reading them into a buffer and writing that (segment/plan.go says which
// polls can, and why the others are copied). PlanPoll is the seam, chosen per
// reply: a poll it declines is served by Poll as before, and the bytes a
// client receives are the same either way (TestPlanPollMatchesPoll).
//
// A plan holds a descriptor of each file it names until its holder releases
// it, which the holder does once the kernel is done with every request that
// names them, from any goroutine (the shard that sends a reply is not always
// the one that owns the partition). Nothing waits for a plan: retention,
// purge, topic deletion, rollover and a failure's rewind go on at once, and
// the plan's descriptors keep the planned bytes (segment.Plan). What a plan
// holds back is the disk space of a segment deleted under it, and a
// descriptor per run, so plans are bounded in number (PlanConfig.PlansMax:
// past it polls are copied) and in time: a plan carries a deadline
// (PlanConfig.PinMax after it was made), past which its holder cuts the reply
// short, as for a connection that stopped reading, and releases it.

// PlanConfig says when a poll is answered by a plan.
type PlanConfig struct {
	// ReplyBytesMin: a reply shorter than this is copied, which costs less
	// than a splice below it. 0 = PlanReplyBytesMinDefault; negative: no poll
	// is planned.
	ReplyBytesMin int64
	// PinMax is how long a plan may hold its descriptors: its DeadlineNs is
	// PlanPoll's clock plus PinMax. 0 = PlanPinMaxDefault.
	PinMax time.Duration
	// PlansMax bounds the plans held at once; past it polls are copied.
	// 0 = PlansMaxDefault.
	PlansMax int
	// TrustWrites counts a batch verified once its write completed
	// (segment.Config.TrustWrites), so that its first poll can be planned too:
	// a consumer that reads each batch once is otherwise always copied.
	TrustWrites bool
}

// PlanReplyBytesMinDefault is PlanConfig.ReplyBytesMin's default, from the
// server's BenchmarkConsumerSplice (server/pollsplice_bench_test.go), which
// polls whole stored batches through the whole server, copied or spliced, by
// one and four consumers. On this project's 2-core test machine, shared with
// other work (load 6-8), six runs each (benchstat): at 128 KiB replies one
// consumer's splice moved 0.67x the copy's MB/s (p=0.04); at 256 KiB it was
// level with the copy for one consumer and took a third less server CPU per
// GB for four (p=0.002); at 512 KiB and 1 MiB it was ahead in both. 1 MiB,
// the earlier default from ring's BenchmarkPollReply alone, left the usual
// poll of 1000 messages of 1000 bytes (1,048,272 bytes) just under it,
// always copied.
const PlanReplyBytesMinDefault = 256 << 10

// PlanPinMaxDefault is PlanConfig.PinMax's default: 30 s sends the largest
// reply a poll reads (segment.DefaultReadBytesMax, 64 MiB) to a consumer
// reading at 2.2 MB/s, and keeps a deleted segment's disk space at most half
// a retention interval (the server runs retention every minute, as the
// reference server's cleaner does) past its deletion.
const PlanPinMaxDefault = 30 * time.Second

// PlansMaxDefault is PlanConfig.PlansMax's default: twice the shard's pool
// of pipes (shard.PipesPerShardMaxDefault, 32), which bounds the replies it
// splices at once; each plan holds at most segment.PlanRunsMax descriptors.
const PlansMaxDefault = 64

func (c PlanConfig) replyBytesMin() int64 {
	if c.ReplyBytesMin == 0 {
		return PlanReplyBytesMinDefault
	}
	return c.ReplyBytesMin
}

func (c PlanConfig) pinMax() time.Duration {
	if c.PinMax <= 0 {
		return PlanPinMaxDefault
	}
	return c.PinMax
}

func (c PlanConfig) plansMax() int {
	if c.PlansMax <= 0 {
		return PlansMaxDefault
	}
	return c.PlansMax
}

// PollPlan is one poll's answer as a plan: Prefix, then each of Runs. It is
// owned by the caller and reused from poll to poll; it allocates nothing once
// its record list has grown to the largest poll.
//
// A PollPlan belongs to one goroutine at a time: PlanPoll's (the partition's
// shard) while it plans, then its holder's, who may hand it to another
// goroutine (the connection's shard) through a synchronizing queue.
type PollPlan struct {
	plan        segment.Plan
	prefix      [wire.PolledMessagesPrefixSize]byte
	partitionID uint32
	deadlineNs  int64
	plans       *storePlans // the store's count it holds a place in; nil when not held
}

// Prefix is the PolledMessages reply body's 16-byte prefix, sent before the
// runs.
func (p *PollPlan) Prefix() []byte { return p.prefix[:] }

// Runs are the stored batches to send after the prefix, in order: FD (the
// plan's own descriptor, valid until Release), file Offset, Length.
func (p *PollPlan) Runs() []segment.Run { return p.plan.Runs }

// ReplySizeBytes is the length of the PolledMessages reply body.
func (p *PollPlan) ReplySizeBytes() int {
	return wire.PolledMessagesPrefixSize + int(p.plan.SizeBytes)
}

// MessageCount is the number of messages the plan sends.
func (p *PollPlan) MessageCount() uint32 { return p.plan.MessageCount }

// PartitionID is the polled partition.
func (p *PollPlan) PartitionID() uint32 { return p.partitionID }

// FirstOffset and LastOffset are the offsets of the plan's first and last
// messages.
func (p *PollPlan) FirstOffset() uint64 { return p.plan.FirstOffset }
func (p *PollPlan) LastOffset() uint64  { return p.plan.LastOffset() }

// DeadlineNs is when the plan has held its descriptors for PlanConfig.PinMax,
// on the clock PlanPoll was given: its holder cuts a reply still sending by
// then short (cancels its requests; the connection, whose reply cannot be
// finished, closes) and releases the plan once their completions arrived.
func (p *PollPlan) DeadlineNs() int64 { return p.deadlineNs }

// Overdue reports whether the plan is past its deadline at nowNs.
func (p *PollPlan) Overdue(nowNs int64) bool { return nowNs >= p.deadlineNs }

// Held reports whether the plan holds descriptors: PlanPoll planned it and it
// was not released.
func (p *PollPlan) Held() bool { return p.plans != nil }

// Release closes the plan's descriptors and gives its place among the
// store's plans back, from any goroutine. Call it once the kernel is done
// with every request that names them (their completions have arrived):
// io_uring resolves a splice's input descriptor when it runs the request,
// not when it is submitted, so a descriptor closed earlier could name
// another file by then. It returns a close error, which loses nothing (the
// descriptor is closed all the same).
func (p *PollPlan) Release() error {
	sp := p.plans
	if sp == nil {
		return nil
	}
	p.plans = nil
	err := p.plan.Release()
	sp.released.Add(1)
	sp.held.Add(-1)
	return err
}

// storePlans counts the store's plans: held and released from any goroutine,
// the rest on the store's.
type storePlans struct {
	held     atomic.Int64
	released atomic.Uint64
	verdicts [segment.PlanVerdicts]uint64
	full     uint64
}

// PlanStats counts what PlanPoll did.
type PlanStats struct {
	Held     int64  // plans held now
	Released uint64 // plans released
	// Verdicts counts PlanPoll's answers by segment.PlanVerdict (Planned
	// first); Full counts the polls copied because PlansMax plans were held.
	Verdicts [segment.PlanVerdicts]uint64
	Full     uint64
}

// PlanStats returns what PlanPoll did so far.
func (s *Store) PlanStats() PlanStats {
	sp := &s.plans
	return PlanStats{Held: sp.held.Load(), Released: sp.released.Load(), Verdicts: sp.verdicts, Full: sp.full}
}

// PlanPoll answers a poll of partition k with a plan in plan when it can, and
// reports whether it did; when it did not, plan holds nothing and the caller
// serves the poll with Poll. A planned poll is served: auto-commit has stored
// its offset as Poll's completion would. nowNs is the shard's monotonic clock
// (for the plan's deadline). It never waits for I/O, but to load a cold
// index as Poll does, and allocates nothing once plan has grown.
//
// It returns 3007 PartitionNotFound when the store does not own k. plan must
// not be held.
func (s *Store) PlanPoll(k Key, req PollRequest, plan *PollPlan, nowNs int64) (bool, error) {
	p, ok := s.partitions[k]
	if !ok {
		return false, wire.ErrPartitionNotFound
	}
	if plan.Held() {
		panic("partition: PollPlan reused while it is held")
	}
	cfg := s.repl.Plans
	minBytes := cfg.replyBytesMin()
	if minBytes < 0 {
		return false, nil
	}
	sp := &s.plans
	if sp.held.Load() >= int64(cfg.plansMax()) {
		sp.full++
		return false, nil
	}
	s.activate(p)
	verdict := p.log.PlanRead(req.query(), minBytes-wire.PolledMessagesPrefixSize, &plan.plan)
	sp.verdicts[verdict]++
	if verdict != segment.Planned {
		return false, nil
	}
	plan.partitionID = k.PartitionID
	plan.deadlineNs = nowNs + int64(cfg.pinMax())
	plan.plans = sp
	sp.held.Add(1)
	if req.AutoCommit {
		p.commitForward(req.Consumer, plan.plan.LastOffset())
	}
	prefix := wire.PolledMessages{PartitionID: k.PartitionID, CurrentOffset: plan.plan.CurrentOffset, MessagesCount: plan.plan.MessageCount}
	prefix.AppendPrefix(plan.prefix[:0])
	return true, nil
}
