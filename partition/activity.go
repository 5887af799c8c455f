package partition

import (
	"fmt"

	"github.com/iggy-shard/iggy-shard/vsr"
)

// What a store does per shard tick and per loop turn does not grow with the
// partitions it holds, only with the ones that have something to do:
//
//   - PollIO visits the active partitions only: those that submitted I/O, or have
//     completions, sends or applies waiting (a partition joins the list when its
//     group is driven or a request is made of it, and leaves once idle).
//   - Tick looks at the timers' heap top (vsr.Timers) and visits the groups due, at
//     most groupsPerTickMax of them per tick: a burst (a thousand groups created
//     at once come due together, a node that went silent wakes every group it
//     led) is spread over the next ticks, and so are the frames it makes, which
//     would otherwise overflow the replica connections' send queues at once.
//   - An idle group is parked off the timers when its deadline comes: a backup
//     whose primary's node is heard from (its only deadline is the heartbeat
//     timeout, which that liveness keeps resetting), a fresh primary that has
//     prepared nothing (its backups know its commit point, op 0). A parked group
//     costs nothing per tick. Any input unparks it (a frame, a proposal, a
//     takeover: its run files it under its deadline again), but for its
//     primary's keep-alive when it brings nothing new (Partition.keepAliveOnly:
//     the node's liveness is all it carries), and so does its primary's node
//     going silent for a heartbeat timeout (the watch below is one check per
//     replica per tick, and a sleeping shard wakes for it once per heartbeat
//     timeout: renewWatch), which lets its heartbeat fire.
//   - The keep-alive (one Commit per commit broadcast interval) picks from the
//     groups this replica leads, kept in a list, not from every group.
//
// So an idle node of a cluster exchanges one Commit per peer per commit broadcast
// interval per shard, however many partitions it holds; the reference sends each
// group's heartbeat (iggy.apache.org/docs/clustering), the frames are the same.

// partitionActivity is a partition's places in the store's lists. active: in the
// list PollIO visits; resumeWanted: a storage completion left work for after the
// poll (resume). parked: its group is off the timers, idle (parkedFor: its
// primary, for a backup); leading: in the list of groups this replica leads;
// statsChanged: in the store's changed list.
type partitionActivity struct {
	timer        vsr.GroupHandle
	active       bool
	resumeWanted bool
	parked       bool
	parkedFor    uint8
	leading      bool
	statsChanged bool
	// armedAt is the partition's index in the store's list of armed groups (-1:
	// not armed), dueAt the shard tick its deadline falls due.
	armedAt int
	dueAt   uint64
}

// groupsPerTickMax bounds the groups a tick catches up and drives.
const groupsPerTickMax = 64

type activity struct {
	// active lists the partitions PollIO visits.
	active []*Partition
	// armed lists the groups in the timers' heap (partitionActivity.armedAt).
	armed []*Partition
	// backlog holds the groups due and not visited yet, from backlogHead on.
	backlog     []vsr.GroupHandle
	backlogHead int
	// parkedBy lists the parked backups by their primary's replica; heardAt is
	// the shard tick + 1 at which each replica's node was last heard (0: never).
	parkedBy [vsr.ReplicasMax][]*Partition
	heardAt  [vsr.ReplicasMax]uint64
	// watchAt is the tick at which the watch next looks at each replica's
	// parked groups (TicksUntilDue announces it): see renewWatch.
	watchAt [vsr.ReplicasMax]uint64
	// leading lists the groups this replica leads (some may have stopped:
	// dropped when met); keepAliveNext is the keep-alive's turn in it.
	leading       []*Partition
	keepAliveNext int
	keptAliveAt   uint64
	counts        activityCounts
}

// activityCounts is what a store did, for the tests that hold an idle store to
// constant work per tick.
type activityCounts struct {
	ticks          uint64
	timerFirings   uint64 // groups the timers found due
	groupsDriven   uint64 // groups caught up and driven by ticks (keep-alive included)
	partitionPolls uint64 // partitions PollIO visited
	framesSent     uint64
	parks          uint64
}

// activate puts p in the list PollIO visits.
func (s *Store) activate(p *Partition) {
	if !p.activity.active {
		p.activity.active = true
		s.active = append(s.active, p)
	}
}

// needsPoll reports whether PollIO must visit p again: I/O in flight, completions
// left work, or sends, applies or a save wait.
func (p *Partition) needsPoll() bool {
	return !p.idle() || p.activity.resumeWanted || p.saveWanted || p.persist.ready != nil || p.sends.n > 0 || len(p.copies.unwritten) > 0 ||
		p.group.state != nil && p.group.state.writing ||
		p.journal.len() > 0 && p.journal.firstOp <= p.committedOp && p.group.core != nil && !p.group.core.Transferring()
}

// PollIO runs the storage completions of the active partitions without waiting. It
// returns how many ran plus how many partitions still have I/O in flight or queued
// (completions may submit more: a save, a seal, the next read), so 0 means the store
// is quiet and the caller may stop polling until its next send or poll. The shard's
// loop calls it each turn; with a ring-backed storage it reaps what the ring
// completed.
func (s *Store) PollIO() int {
	if s.SyncDirs() != nil {
		return 1 // the directories are tried again next time; no I/O meanwhile
	}
	n := 0
	// Partitions activated meanwhile (by a completion) are appended behind end
	// and visited next time.
	end := len(s.active)
	for i := 0; i < end; i++ {
		p := s.active[i]
		if s.partitions[p.key] != p {
			p.activity.active = false // deleted
			s.active[i] = nil
			continue
		}
		s.counts.partitionPolls++
		ran := p.pollStorage(false)
		n += ran
		p.settleSends()
		if ran > 0 && p.group.applied.n > 0 {
			p.maybeCheckpoint() // an offset write it waited for may be done
		}
		if p.needsPoll() {
			n++
			continue
		}
		p.activity.active = false
		s.active[i] = nil
	}
	kept := s.active[:0]
	for _, p := range s.active {
		if p != nil && p.activity.active {
			kept = append(kept, p)
		}
	}
	clear(s.active[len(kept):])
	s.active = kept
	return n
}

// Tick is one shard tick (10 ms) for every group of the store: the groups whose
// deadline is due (vsr.Timers), at most groupsPerTickMax of them, idle ones parked.
func (s *Store) Tick() {
	if s.SyncDirs() != nil {
		return
	}
	s.counts.ticks++
	s.keepAlive()
	due := s.timers.Tick()
	s.counts.timerFirings += uint64(len(due))
	for _, h := range due {
		if p := s.byTimer(h); p != nil {
			s.noteDisarmed(p) // out of the heap until filed again
		}
	}
	s.backlog = append(s.backlog, due...)
	s.wakeSilentlyLed()
	for driven := 0; driven < groupsPerTickMax && s.backlogHead < len(s.backlog); {
		h := s.backlog[s.backlogHead]
		s.backlogHead++
		p := s.byTimer(h)
		if p == nil || p.holding() {
			continue // a group whose Ready is out is rearmed once it is done
		}
		if s.park(p) {
			continue
		}
		s.timers.Catch(h) // ticks the core up to now, which fires what is due
		p.run()
		s.counts.groupsDriven++
		driven++
	}
	if s.backlogHead == len(s.backlog) {
		s.backlog, s.backlogHead = s.backlog[:0], 0
	}
}

// park takes an idle group off the timers (vsr.Timers.Remove; addTimer files it
// again when an input comes) and reports whether it did; see the comment at the
// top. A backup is caught up first, its primary's liveness applied, so that its
// heartbeat timeout restarts from now: parked, its clock stands still, and it
// resumes as if the primary's node had been heard until then, which the watch
// (wakeSilentlyLed) makes true. A fresh primary is not caught up: its first Commit
// broadcast, due now, would tell its backups op 0, which they know.
func (s *Store) park(p *Partition) bool {
	core := p.group.core
	if s.repl.replicaCount() == 1 || core.Status() != vsr.StatusNormal || core.Transferring() ||
		p.journal.len() > 0 || p.proposing.queue.n > 0 || p.broken() != nil {
		return false
	}
	if core.IsPrimary() {
		if core.Op() != 0 {
			return false // its backups may not know its commit point yet
		}
	} else {
		primary := core.Primary()
		heard := s.heardAt[primary]
		if core.Op() != core.CommitMin() || heard == 0 || s.timers.Now()-(heard-1) >= s.timing().HeartbeatTimeoutTicks {
			return false // ops wait for a commit, or the primary's node is silent: the heartbeat fires
		}
		s.timers.Catch(p.activity.timer)
		if core.HasReady() || core.Status() != vsr.StatusNormal {
			return false // the catch-up fired something: drive it
		}
		p.activity.parkedFor = primary
		s.parkedBy[primary] = append(s.parkedBy[primary], p)
		s.renewWatch(primary)
	}
	s.noteDisarmed(p)
	s.timers.Remove(p.activity.timer)
	s.timerOwners[p.activity.timer] = nil
	p.activity.parked = true
	s.counts.parks++
	return true
}

// addTimer files p's group on the timers (a fresh group, or one parked).
func (s *Store) addTimer(p *Partition) {
	p.activity.parked = false
	p.activity.timer = s.timers.Add(p.group.core)
	for int(p.activity.timer) >= len(s.timerOwners) {
		s.timerOwners = append(s.timerOwners, nil)
	}
	s.timerOwners[p.activity.timer] = p
	s.noteArmed(p)
}

// catchUp brings p's group to the shard's tick before an input (vsr.Timers.Catch),
// putting it back on the timers first if it was parked.
func (p *Partition) catchUp() {
	if p.activity.parked {
		p.store.addTimer(p)
	}
	p.store.timers.Catch(p.activity.timer)
}

// wakeSilentlyLed puts back on the timers every group parked under a replica whose
// node has not been heard from for a heartbeat timeout, its clock moved on to its
// heartbeat deadline: the timeout fires as it would have had it stayed on the
// timers (the clock stood still from the park, when the node was last known alive).
func (s *Store) wakeSilentlyLed() {
	timeout := s.timing().HeartbeatTimeoutTicks
	for r := range s.parkedBy {
		parked := s.parkedBy[r]
		if len(parked) == 0 {
			continue
		}
		if heard := s.heardAt[r]; heard != 0 && s.timers.Now()-(heard-1) < timeout {
			s.renewWatch(uint8(r))
			continue
		}
		for i, p := range parked {
			if p.activity.parked && p.activity.parkedFor == uint8(r) && s.partitions[p.key] == p && !p.holding() {
				s.addTimer(p)
				for d := p.group.core.NextDeadline(); d != 0 && p.group.core.Now() < d && !p.group.core.HasReady(); {
					p.group.core.Tick()
				}
				s.backlog = append(s.backlog, p.activity.timer)
			}
			parked[i] = nil
		}
		s.parkedBy[r] = parked[:0]
	}
}

// rearm files p's group under its next deadline after its Driver ran, lists it
// among the groups this replica leads when it does, and has PollIO visit the
// partition for what the run submitted.
func (s *Store) rearm(p *Partition) {
	if p.activity.parked {
		s.addTimer(p)
	}
	s.timers.Rearm(p.activity.timer)
	s.noteArmed(p)
	s.noteLeading(p)
	s.activate(p)
}

// noteArmed keeps the list of armed groups (in the timers' heap) in step with the
// timers, after p's group was filed again: TicksUntilDue reads the deadlines of a
// few armed groups from it without the heap.
func (s *Store) noteArmed(p *Partition) {
	dueAt, ok := s.timers.Armed(p.activity.timer)
	if !ok {
		s.noteDisarmed(p)
		return
	}
	p.activity.dueAt = dueAt
	if p.activity.armedAt < 0 {
		p.activity.armedAt = len(s.armed)
		s.armed = append(s.armed, p)
	}
}

// noteDisarmed takes p off the list of armed groups.
func (s *Store) noteDisarmed(p *Partition) {
	i := p.activity.armedAt
	if i < 0 {
		return
	}
	last := len(s.armed) - 1
	s.armed[i] = s.armed[last]
	s.armed[i].activity.armedAt = i
	s.armed[last] = nil
	s.armed = s.armed[:last]
	p.activity.armedAt = -1
}

// armedScanMax is how many armed groups TicksUntilDue looks through for the
// earliest deadline; with more armed, the store is busy and ticks every tick.
const armedScanMax = 32

// TicksUntilDue reports in how many shard ticks the store has something to do on a
// Tick (1: the next one), and false when it never will until an input comes (a
// single node's groups keep no timer). An idle cluster store is due once per
// commit broadcast interval, for its keep-alive: the shard may sleep until then
// and make up the ticks it slept through with that many Ticks, which do nothing
// until the last. With many groups armed (a busy store) it answers 1.
func (s *Store) TicksUntilDue() (uint64, bool) {
	if s.dirsPending || s.backlogHead < len(s.backlog) {
		return 1, true
	}
	now := s.timers.Now()
	next, armed := uint64(0), false
	due := func(at uint64) {
		in := uint64(1)
		if at > now {
			in = at - now
		}
		if !armed || in < next {
			next, armed = in, true
		}
	}
	if len(s.armed) > armedScanMax {
		return 1, true
	}
	for _, p := range s.armed {
		due(p.activity.dueAt)
	}
	if s.repl.replicaCount() > 1 && len(s.leading) > 0 {
		due(s.keptAliveAt + s.commitIntervalTicks())
	}
	for r := range s.parkedBy {
		if len(s.parkedBy[r]) == 0 {
			continue
		}
		if s.heardAt[r] == 0 {
			due(now + 1)
		} else {
			due(s.watchAt[r])
		}
	}
	return next, armed
}

// renewWatch moves the watch of the groups parked under replica on to the tick
// at which that replica's node will have been silent for a heartbeat timeout,
// once the tick it was set for has come. Not sooner: every frame from the node
// moves that tick on, and a watch that followed it would have its shard ask for
// a new wake-up for every frame heard (a keep-alive per commit broadcast interval
// per peer shard, each wake-up pending for a heartbeat timeout), where one per
// heartbeat timeout does: the node's heardAt only grows, so the watch never
// looks late, and when it looks early it finds the node heard and is renewed.
func (s *Store) renewWatch(replica uint8) {
	if heard := s.heardAt[replica]; heard != 0 && s.watchAt[replica] <= s.timers.Now() {
		s.watchAt[replica] = heard - 1 + s.timing().HeartbeatTimeoutTicks
	}
}

// noteLeading lists p among the groups this replica leads, when it does.
func (s *Store) noteLeading(p *Partition) {
	if !p.activity.leading && p.group.core.IsPrimary() {
		p.activity.leading = true
		s.leading = append(s.leading, p)
	}
}

// keepAlive broadcasts, once per commit broadcast interval, a Commit of the next
// group in turn that this replica leads (vsr.Core.Heartbeat). Partition groups are
// quiet when idle (vsr.CoreConfig.QuietWhenIdle): this one frame per interval lets
// every peer's backups of every group the shard leads count this node alive
// (NoteLiveness), and tells a primary left quiet in an old view of the newer one
// (the stale-view answer) within as many intervals as the shard leads groups.
func (s *Store) keepAlive() {
	if s.repl.replicaCount() == 1 || s.timers.Now()-s.keptAliveAt < s.commitIntervalTicks() {
		return
	}
	s.keptAliveAt = s.timers.Now()
	for len(s.leading) > 0 {
		i := s.keepAliveNext % len(s.leading)
		p := s.leading[i]
		if s.partitions[p.key] != p || p.group.core == nil || !p.group.core.IsPrimary() {
			// No longer led here: out of the list (the last entry takes its place).
			p.activity.leading = false
			last := len(s.leading) - 1
			s.leading[i] = s.leading[last]
			s.leading[last] = nil
			s.leading = s.leading[:last]
			continue
		}
		s.keepAliveNext = i + 1
		if p.holding() {
			return // its Ready is out; the next interval takes the next group
		}
		p.catchUp()
		if p.group.driver.Heartbeat() {
			s.counts.groupsDriven++
			p.afterRun()
		}
		return
	}
}

func (s *Store) commitIntervalTicks() uint64 { return s.timing().CommitBroadcastIntervalTicks }

// NoteLiveness records that a frame came from replica's node (any group): see
// vsr.Timers.NoteLiveness; it also keeps the groups parked under that replica
// parked.
func (s *Store) NoteLiveness(replica uint8) {
	s.timers.NoteLiveness(replica)
	if int(replica) < len(s.heardAt) {
		s.heardAt[replica] = s.timers.Now() + 1
	}
}

// SyncDirs makes durable the directories of the partitions created since it last
// ran, when the store's StorageProvider defers that (DirSyncer): once for them all.
// Every call that may write in a partition runs it first, so the caller needs it
// only to bound when a burst of creations is durable. While it fails, nothing is
// written: sends and replica frames are refused (the disk is failing), and ticks
// and polls do nothing.
func (s *Store) SyncDirs() error {
	if !s.dirsPending {
		return nil
	}
	d, ok := s.storages.(DirSyncer)
	if !ok {
		s.dirsPending = false
		return nil
	}
	if err := d.SyncDirs(); err != nil {
		return fmt.Errorf("partition: make directories durable: %w", err)
	}
	s.dirsPending = false
	return nil
}
