package partition

import (
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
// names them. Nothing waits for a plan: retention, purge, topic deletion,
// rollover and a failure's rewind go on at once, and the plan's descriptors
// keep the planned bytes (segment.Plan). What a plan holds back is the disk
// space of a segment deleted under it, and a descriptor per run, so plans
// are bounded in number (PlanConfig.PlansMax: past it polls are copied) and
// in time (PlanConfig.PinMax: OverduePlans names the plans held past it, whose
// replies their holder cuts short, as it would for a connection that stopped
// reading, and then releases).

// PlanConfig says when a poll is answered by a plan.
type PlanConfig struct {
	// ReplyBytesMin: a reply shorter than this is copied, which costs less
	// than a splice below it. 0 = PlanReplyBytesMinDefault; negative: no poll
	// is planned.
	ReplyBytesMin int64
	// PinMax is how long a plan may hold its descriptors before OverduePlans
	// names it. 0 = PlanPinMaxDefault.
	PinMax time.Duration
	// PlansMax bounds the plans held at once; past it polls are copied.
	// 0 = PlansMaxDefault.
	PlansMax int
}

// PlanReplyBytesMinDefault is PlanConfig.ReplyBytesMin's default, from
// ring's BenchmarkPollReply (ring/pollreply_bench_test.go), which sends whole
// poll replies each way over loopback TCP on one ring: on this project's
// 2-core test machine the splice chain loses to the copy up to 512 KiB and
// draws level with it, within the noise, from 1 MiB (a splice runs in
// io_uring's workers, a hand-off a copy does not pay). Below 1 MiB a plan
// would only hold descriptors for nothing.
const PlanReplyBytesMinDefault = 1 << 20

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
type PollPlan struct {
	plan        segment.Plan
	prefix      [wire.PolledMessagesPrefixSize]byte
	partitionID uint32
	deadlineNs  int64
	overdue     bool
	store       *Store
	prev, next  *PollPlan // the store's held plans, oldest first
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
// on the clock PlanPoll was given.
func (p *PollPlan) DeadlineNs() int64 { return p.deadlineNs }

// Held reports whether the plan holds descriptors: PlanPoll planned it and it
// was not released.
func (p *PollPlan) Held() bool { return p.store != nil }

// Release closes the plan's descriptors and gives its place among the
// store's plans back. Call it once the kernel is done with every request
// that names them (their completions have arrived): io_uring resolves a
// splice's input descriptor when it runs the request, not when it is
// submitted, so a descriptor closed earlier could name another file by then.
// It returns a close error, which loses nothing (the descriptor is closed).
func (p *PollPlan) Release() error {
	s := p.store
	if s == nil {
		return nil
	}
	sp := &s.plans
	if p.prev == nil {
		sp.oldest = p.next
	} else {
		p.prev.next = p.next
	}
	if p.next == nil {
		sp.newest = p.prev
	} else {
		p.next.prev = p.prev
	}
	p.prev, p.next, p.store = nil, nil, nil
	sp.held--
	sp.stats.Released++
	return p.plan.Release()
}

// storePlans is the store's held plans, oldest first (deadlines come in the
// same order: each is PlanPoll's clock plus PinMax).
type storePlans struct {
	oldest, newest *PollPlan
	held           int
	stats          PlanStats
}

// PlanStats counts what PlanPoll did.
type PlanStats struct {
	Held     int    // plans held now
	Released uint64 // plans released
	Overdue  uint64 // plans OverduePlans named
	// Verdicts counts PlanPoll's answers by segment.PlanVerdict (Planned
	// first); Full counts the polls copied because PlansMax plans were held.
	Verdicts [segment.PlanVerdicts]uint64
	Full     uint64
}

// PlanStats returns what PlanPoll did so far.
func (s *Store) PlanStats() PlanStats {
	st := s.plans.stats
	st.Held = s.plans.held
	return st
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
	if sp.held >= cfg.plansMax() {
		sp.stats.Full++
		return false, nil
	}
	s.activate(p)
	q := segment.Query{
		Kind:         segment.PollingKind(req.Strategy.Kind),
		Value:        req.Strategy.Value,
		Count:        req.Count,
		ConsumerKind: req.Consumer.segmentKind(),
		ConsumerID:   req.Consumer.ID,
		MaxBytes:     req.MaxBytes,
	}
	verdict := p.log.PlanRead(q, minBytes-wire.PolledMessagesPrefixSize, &plan.plan)
	sp.stats.Verdicts[verdict]++
	if verdict != segment.Planned {
		return false, nil
	}
	plan.partitionID = k.PartitionID
	plan.deadlineNs = nowNs + int64(cfg.pinMax())
	plan.overdue = false
	plan.store = s
	plan.prev, plan.next = sp.newest, nil
	if sp.newest == nil {
		sp.oldest = plan
	} else {
		sp.newest.next = plan
	}
	sp.newest = plan
	sp.held++
	if req.AutoCommit {
		p.commitForward(req.Consumer, plan.plan.LastOffset())
	}
	prefix := wire.PolledMessages{PartitionID: k.PartitionID, CurrentOffset: plan.plan.CurrentOffset, MessagesCount: plan.plan.MessageCount}
	prefix.AppendPrefix(plan.prefix[:0])
	return true, nil
}

// OverduePlans calls fn, oldest first, with each plan held past its deadline
// at nowNs and not named before: its holder cuts its reply short (cancels
// its requests, and closes the connection, whose reply cannot be finished)
// and releases it once their completions have arrived. fn may release the
// plan.
func (s *Store) OverduePlans(nowNs int64, fn func(*PollPlan)) {
	for p := s.plans.oldest; p != nil && p.deadlineNs <= nowNs; {
		next := p.next
		if !p.overdue {
			p.overdue = true
			s.plans.stats.Overdue++
			fn(p)
		}
		p = next
	}
}
