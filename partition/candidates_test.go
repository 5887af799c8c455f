package partition

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/iggy-shard/iggy-shard/vsr"
)

// A backup that missed ops in many partitions repairs them below the chain of
// headers it trusts, and its cores copy each op fetched as a repair candidate
// until the chain reaches it (vsr.CopyBudget). The candidates share the store's
// body budget: with 16 partitions repairing 10 batches each and room for three,
// the backup holds at most its budget plus one repair chunk, the repair prepares
// past it are refused (fetched again), and every partition catches up. Without:
// the candidates were not counted, and those the chain reached from the top of a
// chunk became journal copies past the budget, of ops above one still missing;
// the op each partition needed next was then refused for good (the store held
// more than its budget) and no partition caught up.
func TestRepairCandidatesShareTheStoreBudget(t *testing.T) {
	// A few orders of delivery (60 seeds ran clean).
	for seed := uint64(1); seed <= 3; seed++ {
		t.Run(fmt.Sprintf("seed %d", seed), func(t *testing.T) {
			const partitions, missed = 16, 10
			c := idleCluster(t, partitions)
			batchBytes := len(makeBatch(t, 0, 4, 500))
			const down = 2
			rec := newSendRecorder()
			sends := uint64(0)
			send := func(i int) {
				for p := range uint32(partitions) {
					k := Key{StreamID: 1, TopicID: 1, PartitionID: p}
					if err := c.stores[0].Send(k, sendRequest(makeBatch(t, uint64(i)*4, 4, 500)), 5_000+sends, rec, sends); err != nil {
						t.Fatalf("send %d to %v: %v", i, k, err)
					}
					sends++
				}
			}
			c.intercept = func(f *netFrame) bool { return f.to != down && f.from != down }
			for i := range missed {
				send(i)
				c.runTicksIntercepted(2)
			}
			for round := 0; rec.done() < int(sends); round++ {
				if round == 5_000 {
					t.Fatalf("%d of %d sends done without replica %d", rec.done(), sends, down)
				}
				c.runTicksIntercepted(1)
			}
			s := c.stores[down]
			s.bodies.budgetBytes = int64(3 * batchBytes)
			s.bodies.peakBytes = s.bodies.inUseBytes
			refusedBefore, ingressBefore := s.Drops()[vsr.DropRepairBufferFull], s.IngressDrops()[IngressBodyBudget]
			c.intercept = nil
			send(missed)
			caughtUp := func() bool {
				for _, p := range s.partitions {
					if p.log.NextOffset() != (missed+1)*4 {
						return false
					}
				}
				return true
			}
			// The frames are delivered in a shuffled order, as they may come from
			// several peers and connections: the repair prepares of many partitions
			// arrive interleaved, each group holding part of its chunk as candidates
			// while the others come. What the cores hold as candidates is checked after
			// every frame, whether the budget counts it or not.
			rng := rand.New(rand.NewPCG(seed, 2))
			candidatesPeak := 0
			for round := 0; !caughtUp() || rec.done() < int(sends); round++ {
				if round == 20_000 {
					t.Fatalf("replica %d did not catch up (%d of %d sends done; copies %+v)", down, rec.done(), sends, &s.bodies)
				}
				for _, st := range c.stores {
					st.Tick()
					st.PollIO()
				}
				for len(c.queue) > 0 {
					rng.Shuffle(len(c.queue), func(i, j int) { c.queue[i], c.queue[j] = c.queue[j], c.queue[i] })
					c.stores[c.queue[0].to].NoteLiveness(c.queue[0].from)
					c.deliverOneTo()
					held, counted := 0, 0
					for _, p := range s.partitions {
						held += p.group.core.RepairCandidateBytes()
						counted += p.copies.candidateBytes
					}
					if held != counted {
						t.Fatalf("the cores hold %d bytes of candidates, the budget counts %d", held, counted)
					}
					candidatesPeak = max(candidatesPeak, held)
				}
				for _, st := range c.stores {
					st.PollIO()
				}
			}
			for token, err := range rec.failed {
				t.Fatalf("send %d failed: %v", token, err)
			}
			chunk := int64(partitionTiming.RepairChunkMax * batchBytes)
			refused := s.Drops()[vsr.DropRepairBufferFull] - refusedBefore + s.IngressDrops()[IngressBodyBudget] - ingressBefore
			t.Logf("peak %d bytes of copies, %d of candidates (budget %d, a chunk %d), %d repair prepares refused", s.bodies.peakBytes, candidatesPeak, s.bodies.budgetBytes, chunk, refused)
			if int64(candidatesPeak) > s.bodies.budgetBytes+chunk {
				t.Fatalf("replica %d's cores held %d bytes of repair candidates, past its budget (%d) by more than a repair chunk (%d)", down, candidatesPeak, s.bodies.budgetBytes, chunk)
			}
			if s.bodies.peakBytes > s.bodies.budgetBytes+chunk {
				t.Fatalf("replica %d held %d bytes of copies, past its budget (%d) by more than a repair chunk (%d)", down, s.bodies.peakBytes, s.bodies.budgetBytes, chunk)
			}
			if candidatesPeak == 0 || refused == 0 {
				t.Fatal("no repair candidate held, or none refused: the test does not reach the budget")
			}
			c.runTicks(int(partitionTiming.CommitBroadcastIntervalTicks) + 1)
			s.WaitIdle()
			if s.bodies.inUseBytes != 0 || s.bodies.overFor != nil {
				t.Fatalf("replica %d holds %d bytes of copies with nothing in flight (over for %v)", down, s.bodies.inUseBytes, s.bodies.overFor != nil)
			}
		})
	}
}
