package shard

import (
	"net/netip"
)

// clientTable is a shard's client connections: their slots, the ones with replies
// to send this turn, and the ones waiting to read again. Its methods are the
// Shard's, which owns it.
type clientTable struct {
	conns slotTable[Conn]
	dirty []*Conn // connections with replies queued in this iteration
	req   Request // reused for every ServeRequest
	// bufferWaiters are the connections waiting, in arrival order, for the arena to
	// have a buffer for their frame (Conn.waitForBuffer); resumable are throttled
	// connections whose retained requests were released meanwhile. Both are served
	// at the top of a turn, never from inside a handler call.
	bufferWaiters []ConnID
	resumable     []ConnID
	tls           *tlsScratch // once a TLS connection came
}

// Conn returns the live connection id names on this shard, or nil when it is closed or
// lives on another shard.
func (s *Shard) Conn(id ConnID) *Conn {
	if id.Shard() != s.index {
		return nil
	}
	c := s.clients.conns.at(id.slot())
	if c == nil || c.id != id || c.state == linkFree {
		return nil
	}
	return c
}

// resumeInputs lets connections read again that were throttled for their retained
// requests or waited for a frame buffer. Every buffer waiter is tried, in arrival
// order, and one that still finds no buffer keeps its place: waiters for buffers of
// one size are served first come, first served, but one does not hold up those
// waiting for another size, whose frames may hold the very buffer it waits for.
func (s *Shard) resumeInputs() {
	for len(s.clients.resumable) > 0 {
		id := s.clients.resumable[len(s.clients.resumable)-1]
		s.clients.resumable = s.clients.resumable[:len(s.clients.resumable)-1]
		if c := s.Conn(id); c != nil {
			c.resumePending = false
			c.resumeInput()
		}
	}
	kept := 0
	for i := range len(s.clients.bufferWaiters) { // a resumed one queued again is taken back at once
		id := s.clients.bufferWaiters[i]
		c := s.Conn(id)
		if c == nil || !c.waitingForBuffer {
			continue
		}
		c.waitingForBuffer = false
		c.resumeInput()
		if c.waitingForBuffer {
			// Still none: waitForBuffer queued it again at the back; it keeps its place.
			last := len(s.clients.bufferWaiters) - 1
			if s.clients.bufferWaiters[last] != id {
				panic("shard: a buffer waiter queued another connection as it resumed")
			}
			s.clients.bufferWaiters = s.clients.bufferWaiters[:last]
			s.clients.bufferWaiters[kept] = id
			kept++
		}
	}
	s.clients.bufferWaiters = s.clients.bufferWaiters[:kept]
}

func (s *Shard) flushSends() {
	for i, c := range s.clients.dirty {
		c.inDirty = false
		c.flush()
		if c.state == linkDraining {
			c.maybeFinish() // its last owed reply may have been empty
		}
		s.clients.dirty[i] = nil
	}
	s.clients.dirty = s.clients.dirty[:0]
}

// adopt installs an accepted socket as a connection of this shard: a plain descriptor,
// or (direct) a slot of the ring's registered-file table.
// A TLS session (h, else nil) is attached to the connection.
func (s *Shard) adopt(fd int, direct bool, peer netip.AddrPort, h *tlsHandover) {
	refuse := func() {
		s.closeSocket(fd, direct)
		if h != nil {
			h.transport.Close()
		}
	}
	if s.stopping {
		refuse()
		return
	}
	t := &s.clients.conns
	if t.live >= s.cfg.ConnectionsPerShardMax {
		s.log.Warn("connection refused: shard connection table full", "max", s.cfg.ConnectionsPerShardMax)
		refuse()
		return
	}
	slot, c := t.take(func() *Conn {
		return &Conn{link: link{shard: s}, framer: NewFramer(s.arena, s.cfg.FrameSizeMax, standingFrameBytes)}
	})
	if err := c.open(fd, direct, slot, peer); err != nil {
		s.log.Warn("connection refused", "err", err)
		refuse()
		t.put(slot)
		return
	}
	s.rt.connCounts[s.index].Add(1)
	if o, ok := s.handler.Handler.(Opener); ok {
		o.ConnOpened(c)
	}
	if h != nil {
		c.startTLS(h)
	}
}

// release returns a finished connection's slot to the free list.
func (s *Shard) release(c *Conn) {
	s.clients.conns.put(c.id.slot())
	s.rt.connCounts[s.index].Add(-1)
}

func (s *Shard) markDirty(c *Conn) {
	if !c.inDirty {
		c.inDirty = true
		s.clients.dirty = append(s.clients.dirty, c)
	}
}
