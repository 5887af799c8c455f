package vsr

import "github.com/iggy-shard/iggy-shard/wire"

// The merge: the new primary's canonical log from a view-change quorum of votes
// (DoViewChange), truncated where a nack quorum proves an op never committed.

type doViewChange struct {
	logView uint32
	op      uint64
	commit  uint64
	nack    wire.Uint128
	present wire.Uint128
	// headers[i] is op-i; a zero Op is a blank.
	headers []wire.PrepareHeader
}

// ownDoViewChange is this replica's vote: log view, head, commit point and the
// trusted headers from the head down to the commit point (at most 128), with a nack
// for every op above the commit point it never prepared: a blank, or a header it
// holds without the body (a view named it; the replica acknowledges only what it
// journaled). A faulty op, journaled and lost to corruption, is never nacked, as
// in TigerBeetle's DoViewChange (a dirty slot is nacked, a faulty one is not).
func (c *Core) ownDoViewChange() *doViewChange {
	d := &doViewChange{logView: c.logView, op: c.op, commit: c.commitMax}
	if d.commit > d.op {
		d.commit = d.op
	}
	low := d.commit
	if low == 0 {
		low = 1
	}
	if c.op+1 > low+wire.DoViewChangeSuffixMax {
		low = c.op + 1 - wire.DoViewChangeSuffixMax
	}
	for op := c.op; op >= low && op > 0; op-- {
		i := int(c.op - op)
		s := c.slotAt(op)
		if s == nil || !s.trusted {
			blank := wire.PrepareHeader{Op: op}
			blank.Command = wire.CommandPrepare
			d.headers = append(d.headers, blank)
			// A nack says "I never prepared it"; a faulty op was prepared here and
			// lost to corruption, so it may be one of a commit quorum's copies.
			if op > d.commit && (s == nil || !s.faulty) {
				setBit(&d.nack, i)
			}
			continue
		}
		d.headers = append(d.headers, s.header)
		switch {
		case s.body != bodyNone:
			setBit(&d.present, i)
		case op > d.commit && !s.faulty:
			// The header alone (a view's StartView named it): this replica never
			// journaled the op, so never acknowledged it.
			setBit(&d.nack, i)
		}
	}
	return d
}

func setBit(b *wire.Uint128, i int) {
	if i < 64 {
		b.Lo |= 1 << i
	} else {
		b.Hi |= 1 << (i - 64)
	}
}

func hasBit(b wire.Uint128, i int) bool {
	if i < 64 {
		return b.Lo&(1<<i) != 0
	}
	return b.Hi&(1<<(i-64)) != 0
}

// checkShape: a suffix covers the sender's ops from its commit point (or op 1) to
// its head, or the 128 highest of them; below a full suffix every op is committed
// (the head is never further than a pipeline ahead of the commit point), which bounds
// every walk of the merge to 128 ops whatever a peer claims.
func (d *doViewChange) checkShape() error {
	low := max(d.commit, 1)
	want := uint64(0)
	if d.op >= low {
		want = min(d.op-low+1, wire.DoViewChangeSuffixMax)
	}
	if uint64(len(d.headers)) != want {
		return badMessage("do view change of head %d and commit %d carries %d headers, want %d", d.op, d.commit, len(d.headers), want)
	}
	if d.op >= wire.DoViewChangeSuffixMax && d.commit < d.op-wire.DoViewChangeSuffixMax+1 {
		d.commit = d.op - wire.DoViewChangeSuffixMax + 1
	}
	return nil
}

// entry reports what DVC d says about op: its header (zero Op if blank or outside the
// suffix), whether it is nacked, whether the body is present, and whether op is
// inside the suffix at all.
func (d *doViewChange) entry(op uint64) (h *wire.PrepareHeader, nack, present, inSuffix bool) {
	if op > d.op {
		return nil, true, false, true
	}
	i := int(d.op - op)
	if i >= len(d.headers) {
		return nil, false, false, false
	}
	if d.headers[i].Checksum.IsZero() {
		return nil, hasBit(d.nack, i), false, true
	}
	return &d.headers[i], hasBit(d.nack, i) && !hasBit(d.present, i), hasBit(d.present, i), true
}

// checkDoViewChangeQuorum merges the votes into the canonical log once a view-change
// quorum of them is in, and starts repairing what the new primary lacks.
func (c *Core) checkDoViewChangeQuorum() {
	if c.vc.mergeDone || c.Primary() != c.cfg.ReplicaID || c.status != StatusViewChange {
		return
	}
	if c.vc.dvcs[c.cfg.ReplicaID] == nil {
		return
	}
	votes := 0
	for _, d := range c.vc.dvcs {
		if d != nil {
			votes++
		}
	}
	if votes < QuorumViewChange(c.n()) {
		return
	}
	commitMax := c.commitMax
	logViewMax := uint32(0)
	for _, d := range c.vc.dvcs {
		if d == nil {
			continue
		}
		if d.commit > commitMax {
			commitMax = d.commit
		}
		if d.logView > logViewMax {
			logViewMax = d.logView
		}
	}
	head := uint64(0)
	for _, d := range c.vc.dvcs {
		if d != nil && d.logView == logViewMax && d.op > head {
			head = d.op
		}
	}
	// The head's own commit field names ops committed in its view.
	if h, ok := c.canonicalHeader(head, logViewMax); ok && h.Commit > commitMax && h.Commit <= head {
		commitMax = h.Commit
	}
	if commitMax > head {
		head = commitMax
	}
	// The canonical headers from the head down: the log view's voters hold them,
	// or, where they lack one (a faulty entry), the hash chain names it and any
	// vote may hold it.
	low := max(commitMax, 1)
	top := head
	canon := make([]*wire.PrepareHeader, 0, top-low+1)
	for op := top; op >= low && op > 0; op-- {
		h, ok := c.canonicalHeader(op, logViewMax)
		if !ok && len(canon) > 0 && canon[len(canon)-1] != nil {
			h, _ = c.headerByIdentity(op, canon[len(canon)-1].Parent)
		}
		canon = append(canon, h)
	}
	// A nack quorum proves an op never committed, nor any op after it: truncate
	// from the lowest such op.
	for op := commitMax + 1; op <= top; op++ {
		if c.nacks(op, canon[top-op], logViewMax) >= c.quorumNack() {
			head = op - 1
			break
		}
	}
	// Every op from the commit point to the head needs its canonical header, and
	// every uncommitted one a replica that can serve its body.
	merged := make([]wire.PrepareHeader, 0, head-low+1)
	for op := head; op >= low && op > 0; op-- {
		h := canon[top-op]
		if h == nil {
			return // wait for more votes (with all n in, the view stalls: it never loses a committed op)
		}
		if len(merged) > 0 && merged[len(merged)-1].Parent != h.Checksum {
			return
		}
		if op > commitMax && !c.bodyAvailable(op, h) {
			return
		}
		merged = append(merged, *h)
	}
	if head-commitMax > uint64(len(c.normal.pipeline)) {
		return
	}
	if c.contradictsApplied(merged, head) {
		// Every vote was checked as it came (onDoViewChange), but a header the
		// chain names may come from a vote's unchecked part (an older log view's,
		// above its commit point), named by a vote whose own entry there is blank:
		// a log no view can have (committed.go). Wait for other votes; the view
		// change times out to the next view otherwise.
		return
	}
	c.installLog(merged, head, commitMax)
	c.vc.mergeDone = true
	c.maybeStartView()
}

// canonicalHeader is the header at op in the log of the highest log view among the
// votes; below a voter's commit point its header is committed, so canonical too.
func (c *Core) canonicalHeader(op uint64, logViewMax uint32) (*wire.PrepareHeader, bool) {
	var found *wire.PrepareHeader
	for _, d := range c.vc.dvcs {
		if d == nil || d.logView != logViewMax {
			continue
		}
		if h, _, _, _ := d.entry(op); h != nil {
			if found != nil && found.Checksum != h.Checksum {
				return nil, false // conflict: impossible in one view's log
			}
			found = h
		}
	}
	if found != nil {
		return found, true
	}
	for _, d := range c.vc.dvcs {
		if d == nil || op > d.commit {
			continue
		}
		if h, _, _, _ := d.entry(op); h != nil {
			return h, true
		}
	}
	return nil, false
}

// headerByIdentity is the header at op whose identity is identity, in any vote.
func (c *Core) headerByIdentity(op uint64, identity wire.Uint128) (*wire.PrepareHeader, bool) {
	for _, d := range c.vc.dvcs {
		if d == nil {
			continue
		}
		if h, _, _, _ := d.entry(op); h != nil && h.Checksum == identity {
			return h, true
		}
	}
	return nil, false
}

func (c *Core) nacks(op uint64, canonical *wire.PrepareHeader, logViewMax uint32) int {
	n := 0
	for _, d := range c.vc.dvcs {
		if d == nil {
			continue
		}
		h, nack, _, inSuffix := d.entry(op)
		switch {
		case nack:
			n++
		case !inSuffix:
		case h != nil && d.logView < logViewMax && canonical != nil && h.Checksum != canonical.Checksum:
			// An older log's different op here: that replica never prepared ours.
			// (Where the canonical header is unknown, an older log's may be it.)
			n++
		}
	}
	return n
}

func (c *Core) bodyAvailable(op uint64, h *wire.PrepareHeader) bool {
	for _, d := range c.vc.dvcs {
		if d == nil {
			continue
		}
		if dh, _, present, _ := d.entry(op); dh != nil && present && dh.Checksum == h.Checksum {
			return true
		}
	}
	return false
}

// installLog makes merged (canonical headers, head first, down to the commit point)
// this replica's log: agreeing slots stay, disagreeing ones are discarded, ops above
// the head truncated, and the slots below are checked against the chain downward.
func (c *Core) installLog(merged []wire.PrepareHeader, head, commitMax uint64) {
	if head < c.op {
		c.truncateAbove(head)
	}
	c.op = head
	if commitMax > c.commitMax {
		c.commitMax = commitMax
	}
	low := head + 1
	for i := range merged {
		h := &merged[i]
		s := c.slotAt(h.Op)
		if s != nil && s.header.Checksum == h.Checksum {
			s.trusted = true
		} else {
			// A faulty op stays faulty under the view's header: what this replica
			// journaled there is unknown, and it may have acknowledged it.
			faulty := s != nil && s.faulty
			if s != nil {
				c.discard(h.Op)
			}
			s = &c.log.slots[h.Op%uint64(len(c.log.slots))]
			*s = slot{header: *h, trusted: true, faulty: faulty}
		}
		low = h.Op
	}
	if len(merged) == 0 {
		low = 1
		if head > 0 {
			low = head
		}
	}
	// Below the suffix nothing is known to be of this log until the chain says so
	// (only the last JournalSlots ops can have a slot).
	from := c.commitMin + 1
	if low > uint64(len(c.log.slots)) && from < low-uint64(len(c.log.slots)) {
		from = low - uint64(len(c.log.slots))
	}
	for op := from; op < low; op++ {
		if s := c.slotAt(op); s != nil {
			s.trusted = false
		}
	}
	c.log.trustLow = low
	if c.log.trustLow <= c.commitMin {
		c.log.trustLow = c.commitMin + 1
	}
	c.dropCandidates()
	c.verifyDown()
	if hs := c.slotAt(head); hs != nil {
		c.log.lastPrepareChecksum = hs.header.Checksum
		if hs.header.Timestamp > c.log.lastTimestamp {
			c.log.lastTimestamp = hs.header.Timestamp
		}
	} else if head == 0 {
		c.log.lastPrepareChecksum = wire.Uint128{}
	}
}
