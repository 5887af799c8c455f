package vsr

// TakeOver starts a view change to the next view this replica leads, on a backup
// in normal status, and reports whether it did. The caller moves a group's
// primaryship to its node: a partition group to the node that leads the metadata
// group, which is where clients write (they follow GetClusterMetadata's leader),
// when the two parted (the partition group changed view without the metadata group,
// or the other way round). It is the ordinary view change, started early: the new
// primary's log is the one a view-change quorum holds, so nothing committed is
// lost, and a peer that joins an older view change is carried along by the higher
// view.
func (c *Core) TakeOver() bool {
	c.checkNoReadyOut("TakeOver")
	if c.status != StatusNormal || c.IsPrimary() || c.n() == 1 || c.transfer.phase != transferIdle {
		return false
	}
	view := c.view + 1
	for c.PrimaryOf(view) != c.cfg.ReplicaID {
		view++
	}
	c.startViewChange(view)
	return true
}
