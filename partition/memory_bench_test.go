package partition

import (
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
)

// BenchmarkIdlePartitionMemory measures the live heap an idle partition costs one
// replica of a three-node cluster (the per-partition term of the documented sum,
// doc.go): three stores on the real filesystem (OSStorages) hold b.N partitions
// each, created in view 0 and, written, each given one batch of one 100-byte
// message through its primary, then left idle past a heartbeat timeout (groups
// parked). bytes/partition is the heap in use after a collection, per partition
// per replica; resident-bytes/partition what of it the process holds resident
// once its free pages went back to the system (debug.FreeOSMemory before and
// after): less than the heap, as memory the runtime got zeroed from the system and
// nothing wrote since (the consensus core's journal slots of an idle group) takes
// no page. Run with -benchtime 1000x.
func BenchmarkIdlePartitionMemory(b *testing.B) {
	for _, written := range []bool{false, true} {
		name := "created"
		if written {
			name = "written"
		}
		b.Run(name, func(b *testing.B) {
			before, residentBefore := liveHeapBytes(), residentBytes(b)
			c := &testCluster{t: b, cfg: Config{PartitionsCount: uint32(b.N)}}
			for i := 0; i < 3; i++ {
				s := NewReplicatedStore(b.TempDir(), OSStorages{Dirs: &DirSyncs{}}, Replication{Cluster: testCluster3, ReplicaID: uint8(i), ReplicaCount: 3, Outbox: clusterOutbox{c: c, from: uint8(i)}})
				c.stores = append(c.stores, s)
			}
			for p := 0; p < b.N; p++ {
				for _, s := range c.stores {
					if err := s.CreateInView(Key{StreamID: 1, TopicID: 1, PartitionID: uint32(p)}, c.cfg, Incarnation{CreatedAtMicros: 1}, 0); err != nil {
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
			after, residentAfter := liveHeapBytes(), residentBytes(b)
			b.ReportMetric(float64(after-before)/float64(3*b.N), "bytes/partition")
			b.ReportMetric(float64(residentAfter-residentBefore)/float64(3*b.N), "resident-bytes/partition")
			for _, s := range c.stores {
				if err := s.Close(); err != nil {
					b.Fatal(err)
				}
			}
			runtime.KeepAlive(c)
		})
	}
}

// residentBytes is the process's anonymous resident memory (RssAnon) once its
// garbage is collected and its free pages returned to the system.
func residentBytes(b *testing.B) int64 {
	debug.FreeOSMemory()
	raw, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Fatal(err)
	}
	for line := range strings.Lines(string(raw)) {
		if value, ok := strings.CutPrefix(line, "RssAnon:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 10, 64)
			if err != nil {
				b.Fatalf("/proc/self/status: %q", line)
			}
			return kb << 10
		}
	}
	b.Fatal("/proc/self/status has no RssAnon")
	return 0
}

func liveHeapBytes() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}
