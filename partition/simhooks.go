package partition

import "github.com/iggy-shard/iggy-shard/vsr"

// The cluster simulator (sim/) drives stores through their API only (Send,
// StoreConsumerOffset, Step, Tick, PollIO, Poll) and checks the groups from outside,
// as a test of the whole partition plane: these two read-only hooks are all it sees
// of the inside. Nothing else may call them.

// SimCore returns the consensus core of partition k's group (nil when the store does
// not own k), for the simulator's checks of agreement (the committed headers),
// monotonicity and liveness (view, status, op and commit points). Only its read
// methods may be called: a core driven past its store would break the store.
func (s *Store) SimCore(k Key) *vsr.Core {
	p, ok := s.partitions[k]
	if !ok {
		return nil
	}
	return p.group.core
}

// SimApplied returns the highest op of partition k's group applied to its log (0
// when the store does not own k): a group is caught up once every committed op is
// applied, not only committed.
func (s *Store) SimApplied(k Key) uint64 {
	p, ok := s.partitions[k]
	if !ok {
		return 0
	}
	return p.journal.firstOp - 1
}
