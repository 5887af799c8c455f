package partition

import (
	"runtime"
	"testing"
)

// BenchmarkIdlePartitionMemory measures the live heap an idle partition costs one
// replica of a three-node cluster (the per-partition term of the documented sum,
// doc.go): three stores on the real filesystem (OSStorages) hold b.N partitions
// each, created in view 0 and, written, each given one batch of one 100-byte
// message through its primary, then left idle past a heartbeat timeout (groups
// parked). bytes/partition is the heap in use after a collection, per partition
// per replica. Run with -benchtime 1000x.
func BenchmarkIdlePartitionMemory(b *testing.B) {
	for _, written := range []bool{false, true} {
		name := "created"
		if written {
			name = "written"
		}
		b.Run(name, func(b *testing.B) {
			before := liveHeapBytes()
			c := &testCluster{t: b, cfg: Config{PartitionsCount: uint32(b.N)}}
			for i := 0; i < 3; i++ {
				s := NewReplicatedStore(b.TempDir(), OSStorages{Dirs: &DirSyncs{}}, Replication{Cluster: testCluster3, ReplicaID: uint8(i), ReplicaCount: 3, Outbox: clusterOutbox{c: c, from: uint8(i)}})
				c.stores = append(c.stores, s)
			}
			for p := 0; p < b.N; p++ {
				for _, s := range c.stores {
					if err := s.CreateInView(Key{StreamID: 1, TopicID: 1, PartitionID: uint32(p)}, c.cfg, 1, 0); err != nil {
						b.Fatal(err)
					}
				}
			}
			if written {
				rec := newSendRecorder()
				for p := 0; p < b.N; p++ {
					k := Key{StreamID: 1, TopicID: 1, PartitionID: uint32(p)}
					if err := c.stores[0].Send(k, sendRequest(makeBatch(b, 0, 1, 100)), 1000, rec, uint64(p)); err != nil {
						b.Fatal(err)
					}
					c.runTicks(1)
				}
			}
			c.runTicks(int(partitionTiming.HeartbeatTimeoutTicks + 2*partitionTiming.CommitBroadcastIntervalTicks))
			after := liveHeapBytes()
			b.ReportMetric(float64(after-before)/float64(3*b.N), "bytes/partition")
			for _, s := range c.stores {
				if err := s.Close(); err != nil {
					b.Fatal(err)
				}
			}
			runtime.KeepAlive(c)
		})
	}
}

func liveHeapBytes() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}
