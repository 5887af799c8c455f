package partition

import (
	"testing"
)

// BenchmarkCreatePartitions creates partitions of a topic in a replica of a cluster
// on the real filesystem (OSStorages under a temporary directory), one after the
// other, as a metadata commit of CreateTopic has a shard do, then syncs what the
// store defers (SyncDirs): ns/op is one partition's creation, dirfsyncs/op the
// directory fsyncs it cost (with DirSyncs: the store's, once for all).
func BenchmarkCreatePartitions(b *testing.B) {
	for _, batched := range []bool{false, true} {
		name := "each"
		if batched {
			name = "batched"
		}
		b.Run(name, func(b *testing.B) {
			provider := OSStorages{}
			if batched {
				provider.Dirs = &DirSyncs{}
			}
			s := NewReplicatedStore(b.TempDir(), provider, Replication{Cluster: testCluster3, ReplicaID: 1, ReplicaCount: 3})
			defer s.Close()
			cfg := Config{PartitionsCount: uint32(b.N)}
			b.ResetTimer()
			for i := range b.N {
				if err := s.CreateInView(Key{StreamID: 1, TopicID: 1, PartitionID: uint32(i)}, cfg, Incarnation{CreatedAtMicros: 1}, 0); err != nil {
					b.Fatal(err)
				}
			}
			if err := s.SyncDirs(); err != nil {
				b.Fatal(err)
			}
			if batched {
				b.ReportMetric(float64(provider.Dirs.Syncs)/float64(b.N), "dirfsyncs/op")
			}
		})
	}
}
