package server

import (
	"fmt"
	"slices"

	"github.com/iggy-shard/iggy-shard/partition"
	"github.com/iggy-shard/iggy-shard/request"
	"github.com/iggy-shard/iggy-shard/shard"
	"github.com/iggy-shard/iggy-shard/wire"
)

// A poll from a connection that can splice (plaintext, a pipe free on its
// shard) may be answered by a plan: the owner shard names the stored batches
// as runs of the segment files (partition.Store.PlanPoll, partitionhost's
// planPoll) and this shard sends the reply header and prefix, then the runs
// file -> pipe -> socket (shard.Conn.SendFileRuns). The job is the plan's
// releaser: recycling it, once the kernel is done with every splice, closes
// the plan's descriptors. Every other poll is read and copied as before
// (deliverPoll), and the bytes on the wire are the same.

// pollPlanConfig says which polls are planned (partition.PlanConfig), from
// [system.partition] (config.Partition). Its defaults plan only batches a poll
// has verified (issue 23:
// verify a batch once, when it is first read after it was written or
// recovered). So a consumer's first read of a batch is copied, because that
// read is its verification, and what a consumer reads again (a replay, a second
// consumer, a consumer group's rebalance) is spliced. partition.PlanConfig's
// TrustWrites would splice first reads too, by counting a batch verified once
// its write completed; it is off because the scrubber re-reads only sealed
// segments, so a batch corrupted on disk in the active segment would reach
// consumers unverified, and the official SDKs do not verify on poll.
func (s *Server) pollPlanConfig() partition.PlanConfig {
	if s.cfg.pollPlans != nil {
		return *s.cfg.pollPlans
	}
	p := &s.cfg.Partition
	return partition.PlanConfig{ReplyBytesMin: p.SpliceReplyBytesMin, PinMax: p.SplicePinMax, PlansMax: p.SplicePlansMax,
		TrustWrites: p.SpliceTrustWrites}
}

// scrubBytesPerSecond is partition.Replication.ScrubBytesPerSecond from
// [system.partition] scrub_bytes_per_second, whose 0 (off) is the package's
// negative.
func (s *Server) scrubBytesPerSecond() int64 {
	if r := s.cfg.Partition.ScrubBytesPerSecond; r > 0 {
		return r
	}
	return -1
}

// routePollHere routes a connection's poll, planned if its reply can splice.
func (h *handler) routePollHere(c *shard.Conn, req *shard.Request, userID uint32) {
	j := h.deferToJob(c, req, request.KindPoll, userID)
	j.Poll.MayPlan = c.CanSplice()
	h.route(j)
}

// deliverPlanned sends a planned poll's reply: the header and the prefix
// copied, the batches spliced from the plan's files. The job is released (the
// plan closed) once the last splice completed or the connection closed.
func (h *handler) deliverPlanned(c *shard.Conn, j *job) {
	plan := &j.Poll.Plan
	rh := wire.ReplyTo(j.Frame.Header, 0, plan.ReplySizeBytes(), true)
	head := slices.Grow(j.Out.Reply[:0], wire.HeaderSize+wire.PolledMessagesPrefixSize)[:wire.HeaderSize]
	rh.Put(head)
	head = append(head, plan.Prefix()...)
	j.Out.Reply = head
	switch err := c.SendFileRuns(head, plan.Runs(), plan.DeadlineNs(), j); err {
	case nil:
	case shard.ErrSpliceUnavailable:
		// MayPlan is set only for a connection that can splice, and a
		// connection does not become TLS.
		panic(fmt.Sprintf("server: a planned poll on connection %d, which cannot splice", c.ID()))
	default:
		h.recycle(j) // the connection is closed
	}
}
