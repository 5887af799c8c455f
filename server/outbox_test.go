package server

import (
	"testing"
	"time"

	"github.com/iggy-shard/iggy-shard/shard"
)

// A shard whose messages find another shard's queue full keeps them and posts
// them again a millisecond later, in order, until they are all through: it does not
// take turn after turn to retry (which the runtime throttles as a spin), and loses
// none.
func TestOutboxWaitsForAFullQueue(t *testing.T) {
	const posts = 6000 // beyond the 4,096 of an inter-shard queue
	s := testServer(t, t.TempDir(), 2)
	var before shard.Stats
	kept := 0
	blocked := make(chan struct{})
	err := s.rt.Inspect(testContext(t), func(sh *shard.Shard) {
		h := s.handlers[sh.Index()]
		if sh.Index() == 1 {
			close(blocked)
			time.Sleep(200 * time.Millisecond) // the target serves nothing meanwhile
			return
		}
		<-blocked
		before = sh.Stats()
		for range posts {
			h.post(1, shard.Message{Kind: msgViewAdvanced})
		}
		kept = len(h.outbox)
	})
	mustOK(t, "Inspect", err)
	if kept == 0 {
		t.Fatalf("%d posts found room in a queue of 4,096: the test needs a full one", posts)
	}
	var after shard.Stats
	waitUntil(t, "the outbox is flushed", func() bool {
		left := 0
		mustOK(t, "Inspect", s.rt.Inspect(testContext(t), func(sh *shard.Shard) {
			if sh.Index() == 0 {
				left, after = len(s.handlers[0].outbox), sh.Stats()
			}
		}))
		return left == 0
	})
	if throttled := after.ThrottledWaits - before.ThrottledWaits; throttled != 0 {
		t.Fatalf("shard 0 took turns without progress while its target was full: %d throttled waits", throttled)
	}
}
