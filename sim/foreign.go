package sim

import (
	"fmt"

	"github.com/iggy-shard/iggy-shard/wire"
)

// Another incarnation of the group ids (Options.ForeignIncarnation). A partition's
// group id is its stream/topic/partition key tagged with its incarnation; a node
// that still runs a deleted partition's group meets the recreated one's replicas
// under the same key, and a store drops the other incarnation's frames by their
// tag, unless the tags collide (11 bits) or are not sent (a binary before them,
// or cluster.partition_incarnation_tags = false). Then the consensus core alone
// stands between the two logs: it refuses whatever of the other's log
// contradicts what it holds as committed (vsr/committed.go). Here the other
// incarnation is a whole second cluster, of the same size and ids and another
// seed, run in lockstep while the faults last; now and then a partition group's
// frame either sends crosses to the other's node of the same id as well. Each
// cluster's checkers see only their own groups: an op of the other committed,
// applied or acknowledged is a violation there. A receiver may refuse a foreign
// frame as bad input (counted, ForeignRefused); a group that took the other's
// log above its applied ops may wait in that view for good once the other
// parted (ForeignWedged, foreignWedged): liveness lost, which the run counts;
// safety is checked.
//
// What crosses, and why not more: the frames of view changes (votes, StartView),
// probes, repair and state transfer, each now and then, and the answers to a
// state transfer's requests that crossed, all of them (the other's node answers
// on the connection the request came by). The metadata group has no other
// incarnation and never crosses. The normal case's frames (Prepare,
// PrepareOk, Commit) do not cross by default: two groups in the same view, each
// with a primary, are two primaries of one view to a backup, and no check of a log
// tells their prepares apart when neither has committed an op the other
// contradicts (at op 1 above all: both chains start from the same root); with
// them (foreignNormalCase, -foreign-normal-case) agreement breaks in one seed in
// ten (102 of seeds 1..1000, 83 of them at op 1). Nor do the probes' and repair
// requests' answers all cross back (foreignAnswers, -foreign-answers): with them
// a fresh group repairs the other's whole log from its node and commits it, or a
// group that shares a prefix with the other takes its view's ops above it (27 of
// seeds 1..1000 break agreement, 22 at op 1, and 11 more end with a store that
// refuses a client's request, its log parted from its group's). Only the group's
// identity can tell those apart, not a check of the applied ops.
//
// The final check that every batch a log holds was admitted by one of this
// cluster's stores (purge.go) finds the other's batches served from our logs,
// every replica alike (so agreement holds), in 3 of seeds 1..1000 with the
// default crossings (166; 454 and 683 at the liveness bound), and in 29 more
// with -foreign-answers: not looked into yet.
//
// The state transfer check (vsr/committed.go) is what this run exercises most:
// without it, seeds 1..1000 install about 1,265 partition states instead of
// about 500, seed 481 one of the other's above its group's commit point, then
// ours again and again (770 installs) under a core that counts the other's ops
// applied.

// foreignSeedSalt makes the other incarnation's seed.
const foreignSeedSalt = 0xF0E1_6A7E_1A7E_0001

// crossPerMille is how often a replica frame crosses to the other incarnation.
const crossPerMille = 20

// answerCrossTicks is how long after a frame crossed the receiver's frames to
// its sender cross back: its answers.
const answerCrossTicks = 20

// pairForeign builds the other incarnation beside c.
func (c *cluster) pairForeign() {
	opts := c.opts
	opts.Seed ^= foreignSeedSalt
	opts.ForeignIncarnation = false
	if c.opts.Trace != nil {
		trace := c.opts.Trace
		opts.Trace = func(line string) { trace("  other| " + line) }
	}
	other := newCluster(opts)
	c.other, other.other = other, c
	c.paired = other
}

// foreignTick runs the other incarnation's tick beside c's, until c heals: then
// they part (frames in flight still arrive). A broken property of the other is a
// violation of c's run too: it met c's frames.
func (c *cluster) foreignTick() {
	o := c.other
	if o == nil || !c.opts.ForeignIncarnation {
		return // none, or c is the other, ticked by the cluster it pairs
	}
	if c.healed {
		c.other, o.other = nil, nil
		return
	}
	over := func() (over bool) {
		defer func() {
			if p := recover(); p != nil {
				o.fail("panic: %v", p)
				over = true
			}
		}()
		return o.advance()
	}()
	if o.violation != nil {
		c.fail("the other incarnation (seed %d): %v", o.opts.Seed, o.violation)
		return
	}
	if over {
		c.other, o.other = nil, nil
	}
}

// cross delivers a copy of a replica frame c sends to the other incarnation's
// node of the same id, now and then.
func (c *cluster) cross(p packet) {
	o := c.other
	if o == nil || p.frame == nil {
		return
	}
	command := wire.Command(p.frame[wire.CommandFieldOffset])
	answer := answerCommand(command, c.opts.foreignAnswers) && c.now <= c.answersCrossUntil[[2]int{p.from, p.to}]
	if !answer && c.rngNet.IntN(1000) >= crossPerMille {
		return
	}
	if h, err := wire.DecodeReplicaHeader(p.frame, frameSizeMax); err != nil {
		return
	} else if group, ok := wire.FrameGroup(h); !ok || group == wire.MetadataGroup {
		return // one metadata group per cluster: it has no other incarnation
	}
	if !c.opts.foreignNormalCase && !o.opts.foreignNormalCase {
		switch command {
		case wire.CommandPrepare, wire.CommandPrepareOk, wire.CommandCommit:
			return
		}
	}
	c.trace("cross %d->%d", p.from, p.to)
	frame := alignedFrame(len(p.frame))
	copy(frame, p.frame)
	p.frame, p.foreign = frame, true
	p.damage = damageNone
	p.deliverAt = o.now + 1 + uint64(c.rngNet.IntN(c.delayMax))
	if requestCommand(command, c.opts.foreignAnswers) {
		// The other's node answers on the connection the request came by: to
		// the sender, here.
		if o.answersCrossUntil == nil {
			o.answersCrossUntil = make(map[[2]int]uint64)
		}
		o.answersCrossUntil[[2]int{p.to, p.from}] = p.deliverAt + answerCrossTicks
	}
	o.seq++
	p.seq = o.seq
	o.packets = append(o.packets, p)
}

// requestCommand: a frame its receiver answers to its sender alone whose
// answers cross back: a state transfer's requests, and with all (foreignAnswers)
// the probes and repair requests too.
func requestCommand(c wire.Command, all bool) bool {
	switch c {
	case wire.CommandRequestStateTransfer, wire.CommandRequestStateChunk:
		return true
	case wire.CommandRequestStartView, wire.CommandRequestPrepares:
		return all
	}
	return false
}

// answerCommand: a frame that answers a requestCommand.
func answerCommand(c wire.Command, all bool) bool {
	switch c {
	case wire.CommandStateTransferTarget, wire.CommandStateChunk:
		return true
	case wire.CommandStartView, wire.CommandRepairPrepare, wire.CommandRepairDone, wire.CommandRangeEvicted:
		return all
	}
	return false
}

// foreignWedged ends a run at the liveness bound whose metadata group is done
// while a partition group is not, when the other incarnation's frames crossed:
// what the group took of the other's log above its applied ops (a view's head,
// ops it cannot tell from its own until their chain reaches down to its applied
// op) cannot be repaired once the other parted, and the group waits in that view
// (vsr/committed.go). That is liveness lost, not safety: the final checks run.
func (c *cluster) foreignWedged() bool {
	if !c.opts.ForeignIncarnation || !c.metadataDone() {
		return false
	}
	c.result.Partitions.ForeignWedged = true
	c.trace("partition groups wedged by the other incarnation's log (%s)", c.describe())
	c.finalChecks()
	return true
}

// foreignRefused accounts for a foreign frame a node refused as bad input.
func (c *cluster) foreignRefused(nd *node, err error) {
	c.result.ForeignRefused++
	c.trace("r%d refuses a foreign frame: %v", nd.id, fmt.Sprint(err))
}

// ForeignConfig is Config with another incarnation of the group ids beside the
// cluster (Options.ForeignIncarnation).
func ForeignConfig(seed uint64) Options {
	o := Config(seed)
	o.ForeignIncarnation = true
	return o
}
