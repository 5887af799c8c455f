package partition

import (
	"testing"

	"github.com/iggy-shard/iggy-shard/vsr"
)

// A backup whose disk stalls does not stall its group: the primary commits with
// the other backup, a pipeline's worth of sends at a time. The stalled backup is
// the primary's next hop in the chain (replica 1 of primary 0), the worst place:
// its prepares go down the chain before its own write (vsr.Ready.SendableEarly),
// and once an op commits without its acknowledgement the primary sends every
// prepare to each backup itself (the hop is silent) rather than wait for it. With
// enforce_fsync the backup's journal file sync never completes, so it holds every
// later prepare behind its Ready; without, its log never writes, so it journals
// and acknowledges and cannot apply. When its disk comes back it catches up, and
// every replica holds the same log.
func TestClusterCommitsPastABackupWithAStalledDisk(t *testing.T) {
	for _, cfg := range []Config{{PartitionsCount: 1}, fsyncConfig()} {
		c := newTestCluster(t, 67, 3, cfg)
		const stalled = 1
		rec := newSendRecorder()
		const rounds, inFlight = 8, vsr.PipelineDepthDefault
		token := uint64(0)
		for r := range rounds {
			first, ticks := token+1, 0
			for range inFlight {
				token++
				c.send(makeBatch(t, (token-1)*3, 3, 100), 10_000+token, rec, token)
			}
			for round := 0; rec.done() < int(token); round++ {
				if round == 100_000 {
					t.Fatalf("enforce_fsync %v: round %d: %d of sends %d..%d done with replica %d's disk stalled",
						cfg.EnforceFsync, r, rec.done()-int(first-1), first, token, stalled)
				}
				if r > 0 && ticks > 0 {
					t.Fatalf("enforce_fsync %v: round %d waited for a tick: the primary waits on the stalled backup", cfg.EnforceFsync, r)
				}
				moved := c.deliverOne()
				for i, s := range c.stores {
					if i != stalled && s.PollIO() > 0 {
						moved = true
					}
				}
				if !moved {
					ticks++
					for i, s := range c.stores {
						if i != stalled {
							s.Tick()
						}
					}
				}
			}
			if r == 0 {
				t.Logf("enforce_fsync %v: the first %d sends waited %d ticks", cfg.EnforceFsync, inFlight, ticks)
			}
		}
		if len(rec.acked) != int(token) {
			t.Fatalf("enforce_fsync %v: %d of %d sends acknowledged (failed: %v)", cfg.EnforceFsync, len(rec.acked), token, rec.failed)
		}
		if got := c.stores[stalled].partitions[testKey].log.WrittenEnd(); got != 0 {
			t.Fatalf("enforce_fsync %v: the stalled backup's log wrote %d messages: its disk was not stalled", cfg.EnforceFsync, got)
		}
		// The disk comes back: the backup catches up (ticks for its repair).
		for round := 0; c.stores[stalled].partitions[testKey].log.NextOffset() < token*3; round++ {
			if round == 1000 {
				t.Fatalf("enforce_fsync %v: the backup never caught up (%d of %d messages)", cfg.EnforceFsync,
					c.stores[stalled].partitions[testKey].log.NextOffset(), token*3)
			}
			c.tick(1)
			for _, s := range c.stores {
				s.WaitIdle()
			}
		}
		c.checkBodiesGiven()
		want := c.logBytes(c.leader)
		for i := range c.stores {
			if got := c.logBytes(i); string(got) != string(want) {
				t.Fatalf("enforce_fsync %v: replica %d's log differs from the primary's", cfg.EnforceFsync, i)
			}
		}
	}
}
