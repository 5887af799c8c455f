package sim

import (
	"fmt"

	"github.com/zeebo/xxh3"

	"github.com/iggy-shard/iggy-shard/metadata"
	"github.com/iggy-shard/iggy-shard/wire"
)

// The metadata plane's partition effects, carried out on the partition stores.
//
// The partition groups are the partitions of stream 1 topic 1 (simStreamID,
// simTopicID: partitionKey), the one incarnation every store creates at boot. The
// workload never deletes that stream or topic (workload.go), and the metadata
// creates them at some op like any other, with its own partitions count and
// created_at: the stores' partitions stand for them whatever the metadata says
// of their number. Of the effects a committed op asks (metadata.Effect), each node
// carries out, when it applies the op, the ones that touch them, as the server's
// partitionhost does:
//
//   - PurgeTopic of their topic (PurgeStream of their stream asks one per topic):
//     every partition is emptied and its group starts a new life under the
//     topic's new purge generation, Store.Purge(k, generation), unless the
//     partition's record reaches the generation already (the op applied again,
//     after a restart of the metadata plane from an older checkpoint). The record
//     (lives) is the durable purge.gen of partitionhost/record.go: written with
//     the purge, kept across a crash; a crashed store reopens each partition in
//     the life its record names (openedLife), and is then brought to the purge
//     generation of the metadata checkpoint the node recovers (settle), as is a
//     node whose metadata took a transferred state (FollowReplacedView).
//   - CreatePartitions, DeletePartitions, DeleteTopic, DeleteStream do not touch
//     them: the workload deletes no partition of theirs (DeletePartitions of
//     their topic drops the metadata's count only), and creates none anew.
//   - DeleteSegments: the workload sends none (a cluster deletes segments by an
//     op of the partition's own group, partition/deletesegments.go).
//   - DeleteConsumerGroup drops a group's stored offsets: the clients store
//     single consumers' offsets only. UpdateTopic: the stores keep their Config.
//
// What the checks hold to across a purge: every replica's log is empty and its
// group at op 0 once it purged; agreement is checked within each life (each
// numbers its ops from 1: groupCheck.committedIn); at the end every replica is
// in the same life, and every batch its log holds was admitted by a store in
// that life (none of a purged life came back); a send acknowledged in a life
// since purged is no longer required anywhere (counted, AcksPurged), and those
// acknowledged in the last life are checked as before: on every replica that
// reaches their offset, byte for byte.
//
// What -purge (PurgeConfig) found: Store.Purge started the new life's group in the
// view each replica's old one had, and replicas purge in different views (or mid
// view change). A replica then ran the new life Normal in a view no view change
// made, as its primary with an empty log or as a backup of a primary in another
// view. Seeds 1..1000: 67 failed; 5 committed two prepares at op 1 of a life (277,
// 591, 799, 983 of two replicas, 989 of three), 62 waited for ever. A life then
// started in the view of the metadata op that committed the purge (9881041),
// which is not the same on every node: a prepare's view is outside its checksum,
// and a node that learned the op's header from a view change holds it as view 0.
// Seed 927 (two replicas, at 0fd74d4: SimDisk's reservations, 75b41f5, have
// moved its schedule since) ended with one replica Normal in view 0 of the last
// life, having committed two ops alone (replication quorum 1), and the other
// Normal in view 39 of it, its primary too. A life now starts in view 0 on every
// node (Store.Purge), and a node that carries out a purge it missed (settles)
// probes for the life's view (Store.PurgeMissed). With the purge's tag change
// (5d9ade6) undone, 160 failed, 15 of them with a batch of a purged life in the
// last one. Seeds 1..2000 pass; CI runs seeds 1..300 (TestSimPurge, about 2 s:
// 98 of them purge, some 5,000 partitions).

const (
	simStreamID = 1
	simTopicID  = 1
)

// simTopicGeneration is the purge generation of the partition groups' topic in
// state (0 while it has no such topic).
func simTopicGeneration(st *metadata.State) uint64 {
	if s := st.Stream(simStreamID); s != nil {
		if t := s.Topic(simTopicID); t != nil {
			return t.PurgeGeneration
		}
	}
	return 0
}

// carryOutEffects carries out, on nd's stores, what the op nd just applied asks of
// the partition groups.
func (c *cluster) carryOutEffects(nd *node, effects []metadata.Effect) {
	for _, e := range effects {
		if e.Kind == metadata.EffectPurgeTopic && e.Stream == simStreamID && e.Topic == simTopicID {
			c.purgeStores(nd, e.Generation, false)
		}
	}
}

// settleStores brings nd's partitions to the purge generation of the metadata
// state st, which the node recovered or took by transfer: a purge committed
// before it and not carried out here (a crash cut it, or the node was behind).
func (c *cluster) settleStores(nd *node, st *metadata.State) {
	c.purgeStores(nd, simTopicGeneration(st), true)
}

// purgeStores purges every partition of nd's store whose record is below purge
// generation generation and checks that it restarts empty. missed: the node
// carries out a purge whose op is behind it (settleStores), whose life may be past
// view 0 (Store.PurgeMissed); otherwise it applies the op now.
func (c *cluster) purgeStores(nd *node, generation uint64, missed bool) {
	s := nd.part.store
	if s == nil || c.opts.PartitionGroups == 0 {
		return
	}
	for g := 1; g < len(c.groups); g++ {
		if nd.part.lives[g] >= generation {
			if !missed {
				c.result.Partitions.PurgesSkipped++
			}
			continue
		}
		k := partitionKey(g)
		purge, why := s.Purge, "applies the purge"
		if missed {
			purge, why = s.PurgeMissed, "settles"
		}
		if err := purge(k, generation); err != nil {
			c.fail("replica %d group %d: the purge to generation %d fails: %v", nd.id, g, generation, err)
			return
		}
		nd.part.lives[g] = generation
		c.result.Partitions.Purges++
		c.trace("r%d g%d %s: life %d", nd.id, g, why, generation)
		info, err := s.Info(k)
		core := s.SimCore(k)
		if err != nil || info.MessagesCount != 0 || core.Op() != 0 || core.CommitMax() != 0 {
			c.fail("replica %d group %d: purged to generation %d, it holds %d messages, op %d, commit %d (%v)", nd.id, g, generation, info.MessagesCount, core.Op(), core.CommitMax(), err)
			return
		}
		// Views and commit points go forward within a life; the new one starts
		// where its group does.
		nd.part.observed[g] = observedCore{view: core.View()}
	}
}

// ofOtherLife reports whether a frame of partition group g, under group id group,
// is tagged with another life of the group than nd's.
func (c *cluster) ofOtherLife(nd *node, g int, group uint64) bool {
	own := wire.PurgedIncarnationTag(wire.IncarnationTag(stateCreatedAtMicros), nd.part.lives[g])
	return !wire.GroupUntagged(group) && wire.GroupIncarnationTag(group) != own
}

// admittedBatch names a batch a store admitted: its group, the life of the
// admitting replica, and its frames (stamping writes the batch header only).
type admittedBatch struct {
	group  int
	life   uint64
	frames uint64
}

// admittedElsewhere says where a batch no store of the life admitted came from,
// when the run knows: another life, or the other incarnation (foreign.go).
func (c *cluster) admittedElsewhere(key admittedBatch) string {
	if c.paired != nil && c.paired.admitted[key] {
		return "the other incarnation's"
	}
	for k := range c.admitted {
		if k.group == key.group && k.frames == key.frames {
			return fmt.Sprintf("of life %d", k.life)
		}
	}
	return "admitted nowhere"
}

func batchFrames(batch []byte) uint64 { return xxh3.Hash(batch[wire.BatchHeaderSize:]) }
