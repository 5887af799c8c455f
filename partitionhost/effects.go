package partitionhost

import (
	"time"

	"github.com/iggy-shard/iggy-shard/metadata"
	"github.com/iggy-shard/iggy-shard/partition"
)

// A metadata commit's partition effects are carried out on the owner shards in
// slices, not all at once when the shard's view takes the commit: a topic of 1,000
// partitions is 1,000 creations, which held a shard for hundreds of milliseconds
// (its clients, its replica frames, the metadata core on shard 0 all waited). The
// view queues them (viewEffects) and each loop turn runs at most
// EffectsPerTurnMax, in commit order, asking for the next turn at once while some
// wait.
//
// A partition whose creation waits is created first when something needs it (a send,
// a poll, an offset, a frame of its group: EnsureCreated), unless an earlier effect
// still waiting concerns it too (its topic's options, a deletion of an older
// incarnation): then the effects are run in order up to its creation, in one go
// (a topic deleted and created again while its first creation was still sliced).
// Creations of distinct partitions commute, so taking one ahead changes nothing
// else.

// EffectsPerTurnMax and EffectsTurnBudget bound the effects a loop turn carries
// out: 64 creations take about a millisecond (some 15 µs each: no file is made,
// partitiondir/storages.go), so 1,000 take 16 turns and the shard serves in between; effects that
// touch the disk (a deletion's tombstone rename and fsync, a purge) stop a turn's
// slice after 2 ms.
const (
	EffectsPerTurnMax = 64
	EffectsTurnBudget = 2 * time.Millisecond
)

// effectQueue holds the effects the view queued and the shard has not carried out,
// from head on.
type effectQueue struct {
	entries []queuedEffect
	head    int
	// creates maps a partition to the index of its last creation waiting.
	creates map[partition.Key]int
	// turnNs is the loop turn (its clock reading) of the last effect carried out,
	// inTurn how many that turn carried out, peak the most any turn did: tests
	// hold it to a slice.
	turnNs       int64
	inTurn, peak int
}

type queuedEffect struct {
	effect
	done bool // carried out ahead of its turn (EnsureCreated)
}

func (q *effectQueue) pending() bool { return q.head < len(q.entries) }

// push queues e behind the others.
func (q *effectQueue) push(e effect) {
	if !e.reconfig && e.kind == metadata.EffectCreatePartitions {
		if q.creates == nil {
			q.creates = make(map[partition.Key]int)
		}
		q.creates[e.key] = len(q.entries)
	}
	q.entries = append(q.entries, queuedEffect{effect: e})
}

// counted notes one effect carried out in the turn of nowNs.
func (q *effectQueue) counted(nowNs int64) {
	if nowNs != q.turnNs {
		q.turnNs, q.inTurn = nowNs, 0
	}
	q.inTurn++
	q.peak = max(q.peak, q.inTurn)
}

// take marks entry i carried out and returns it.
func (q *effectQueue) take(i int) *effect {
	qe := &q.entries[i]
	qe.done = true
	if !qe.reconfig && qe.kind == metadata.EffectCreatePartitions && q.creates[qe.key] == i {
		delete(q.creates, qe.key)
	}
	return &qe.effect
}

// advance moves head past the entries carried out, and empties the queue once all
// are.
func (q *effectQueue) advance() {
	for q.head < len(q.entries) && q.entries[q.head].done {
		q.head++
	}
	if q.head == len(q.entries) {
		clear(q.entries)
		q.entries, q.head = q.entries[:0], 0
	}
}

// concerns reports whether e acts on partition k (or would, once k exists).
func (e *effect) concerns(k partition.Key) bool {
	sameTopic := e.key.StreamID == k.StreamID && e.key.TopicID == k.TopicID
	switch {
	case e.reconfig:
		return sameTopic
	case e.kind == metadata.EffectDeleteStream:
		return e.key.StreamID == k.StreamID
	case e.kind == metadata.EffectDeleteTopic, e.kind == metadata.EffectPurgeTopic, e.kind == metadata.EffectDeleteConsumerGroup:
		return sameTopic
	}
	return e.key == k
}

// queueEffect queues one of a commit's effects for this shard's partitions.
func (h *Host) queueEffect(e effect) { h.effects.push(e) }

// RunEffects carries out at most limit waiting effects, in order, and reports
// whether some still wait.
func (h *Host) RunEffects(limit int, budget time.Duration) bool {
	q := &h.effects
	start := time.Now()
	for n := 0; n < limit && q.pending() && (n == 0 || time.Since(start) < budget); n++ {
		h.applyEffect(q.take(q.head)) // advance leaves head on an entry not done
		q.advance()
	}
	return q.pending()
}

// RunAllEffects carries out every waiting effect: before a transferred state
// replaces the view, and when the shard stops.
func (h *Host) RunAllEffects() {
	for h.effects.pending() {
		h.RunEffects(len(h.effects.entries), time.Hour)
	}
}

// EnsureCreated carries out the waiting creation of k now, with the effects
// before it that concern k (in order), if any: k is about to be used.
func (h *Host) EnsureCreated(k partition.Key) {
	q := &h.effects
	i, ok := q.creates[k]
	if !ok {
		return
	}
	for j := q.head; j < i; j++ {
		if e := &q.entries[j]; !e.done && e.concerns(k) {
			for q.pending() && q.head <= i {
				h.RunEffects(1, 0)
			}
			return
		}
	}
	h.applyEffect(q.take(i))
	q.advance()
}
