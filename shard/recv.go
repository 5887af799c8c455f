package shard

import (
	"fmt"

	"github.com/iggy-shard/iggy-shard/arena"
	"github.com/iggy-shard/iggy-shard/ring"
)

// recvPool is the provided-buffer ring every client connection's multishot recv draws
// from: one arena class lent to the kernel whole.
type recvPool struct {
	ring  *ring.BufferRing
	class int // the arena class lent to ring
	// backlogBytesMax bounds a throttled connection's receive backlog: the bytes
	// the receive ring holds (Conn.stash).
	backlogBytesMax int
}

// setUp lends the receive class of a (configured as cfg) to a buffer ring of r.
func (p *recvPool) setUp(r *ring.Ring, a *arena.Arena, cfg arena.Config) error {
	class, err := recvClass(cfg)
	if err != nil {
		return err
	}
	mem, err := a.LendClass(class)
	if err != nil {
		return fmt.Errorf("lend the receive class: %w", err)
	}
	count := cfg.Classes[class].BufferCount
	p.ring, err = ring.NewBufferRing(r, ring.BufferRingOptions{
		GroupID:    recvBufferGroup,
		Entries:    uint32(count),
		BufferSize: recvBufferBytes,
		Memory:     mem,
	})
	if err != nil {
		a.ReturnClass(class)
		return err
	}
	p.class, p.backlogBytesMax = class, count*recvBufferBytes
	return nil
}
