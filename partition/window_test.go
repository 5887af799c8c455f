package partition

import (
	"bytes"
	"testing"

	"github.com/iggy-shard/iggy-shard/wire"
)

// sendBurst sends count one-message batches through the primary without waiting,
// as many as its pipeline takes (a refused one is sent again after a settle), then
// settles until every one is acknowledged; it returns the next sequence number.
func (c *testCluster) sendBurst(first uint64, count int, rec *sendRecorder, token uint64) uint64 {
	c.t.Helper()
	for sent := 0; sent < count; {
		err := c.stores[c.leader].Send(testKey, sendRequest(makeBatch(c.t, first, 1, 8)), 10_000+first, rec, token)
		if err == wire.ErrTransientNotAccepted {
			c.settle()
			c.tick(1)
			continue
		}
		if err != nil {
			c.t.Fatalf("send %d: %v", token, err)
		}
		first++
		token++
		sent++
	}
	for round := 0; rec.done() < int(token)-1; round++ {
		if round == 10_000 {
			c.t.Fatalf("%d sends done of %d", rec.done(), token-1)
		}
		c.settle()
		c.tick(1)
	}
	return first
}

// A partition group takes batches for ever: it crosses its header window (the core's
// JournalSlots, max(2 x pipeline, repair chunk) = 64 ops at the defaults) hundreds
// of times, with a backup restarted from its checkpoint (a power loss) midway, and
// every replica ends with the same log, every batch acknowledged.
func TestClusterGroupCrossesItsHeaderWindowForever(t *testing.T) {
	crossings := 300
	if testing.Short() {
		crossings = 40
	}
	window := headerWindow
	for _, cfg := range []Config{smallConfig(), fsyncConfig()} {
		crossWindows(t, cfg, crossings, window)
	}
}

func crossWindows(t *testing.T, cfg Config, crossings, window int) {
	c := newTestCluster(t, 71, 3, cfg)
	rec := newSendRecorder()
	next, token := uint64(0), uint64(1)
	for crossing := 0; crossing < crossings; crossing++ {
		if crossing == crossings/2 {
			c.restart(2, 99)
		}
		next = c.sendBurst(next, window, rec, token)
		token += uint64(window)
	}
	c.tick(int(partitionTiming.HeartbeatTimeoutTicks) + 1)
	if len(rec.failed) > 0 || len(rec.acked) != crossings*window {
		t.Fatalf("enforce_fsync %v: %d sends acknowledged, %d failed, of %d", cfg.EnforceFsync, len(rec.acked), len(rec.failed), crossings*window)
	}
	for i, s := range c.stores {
		p := s.partitions[testKey]
		if err := s.Err(testKey); err != nil {
			t.Fatalf("enforce_fsync %v: replica %d: %v", cfg.EnforceFsync, i, err)
		}
		if applied := p.journal.firstOp - 1; applied < uint64(crossings*window) {
			t.Fatalf("enforce_fsync %v: replica %d applied %d ops, want %d", cfg.EnforceFsync, i, applied, crossings*window)
		}
		if !bytes.Equal(c.logBytes(i), c.logBytes(0)) {
			t.Fatalf("enforce_fsync %v: replica %d's log differs from the primary's", cfg.EnforceFsync, i)
		}
	}
	_, msgs := poll(t, c.stores[2], testKey, PollRequest{Strategy: wire.PollingStrategy{Kind: wire.PollingFirst}, Count: 1 << 20})
	if len(msgs) != int(next) {
		t.Fatalf("enforce_fsync %v: the restarted backup serves %d messages, want %d", cfg.EnforceFsync, len(msgs), next)
	}
}
