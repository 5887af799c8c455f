package partition

import (
	"errors"
	"testing"

	"github.com/iggy-shard/iggy-shard/wire"
)

// dirsFailing is a storage provider whose directories cannot be made durable.
type dirsFailing struct{ *SimStorages }

func (dirsFailing) SyncDirs() error { return errors.New("disk failing") }

// Every frame Step refuses before its group sees it is counted by reason
// (IngressDrops), beside the inputs the cores ignore (Drops): a frame for a
// partition the store does not hold, one while its directories cannot be made
// durable, one for a partition that refuses everything until Recover. (A prepare
// refused for its binding, its stamp or the body budget: the tests of each.)
func TestStepCountsTheFramesItRefuses(t *testing.T) {
	c := newTestCluster(t, 9, 3, Config{PartitionsCount: 1})
	var prepare *netFrame
	c.intercept = func(f *netFrame) bool {
		if prepare == nil && f.to == 1 && f.header().Command == wire.CommandPrepare {
			cp := *f
			cp.buf = append([]byte(nil), f.buf...)
			prepare = &cp
			return false
		}
		return true
	}
	c.send(makeBatch(t, 0, 2, 40), 7000, newSendRecorder(), 1)
	c.settle()
	if prepare == nil {
		t.Fatal("no prepare went to replica 1")
	}
	backup := c.stores[1]
	h, err := wire.DecodeReplicaHeader(prepare.buf, 64<<20)
	if err != nil {
		t.Fatal(err)
	}
	body := prepare.buf[wire.HeaderSize:]
	want := IngressDrops{}
	check := func(step string) {
		t.Helper()
		if got := backup.IngressDrops(); got != want {
			t.Fatalf("%s: counted %v, want %v", step, got, want)
		}
	}
	if err := backup.Step(Key{StreamID: 9, TopicID: 9, PartitionID: 9}, h, body); !errors.Is(err, wire.ErrResourceNotFound) {
		t.Fatalf("a frame for a partition not held: %v", err)
	}
	want[IngressUnknownPartition]++
	check("unknown partition")

	p := backup.partitions[testKey]
	p.diverged = errors.New("diverged")
	if err := backup.Step(testKey, h, body); err == nil {
		t.Fatal("a partition that refuses everything took a frame")
	}
	want[IngressBroken]++
	check("broken partition")
	p.diverged = nil
	if err := backup.Step(testKey, h, body); err != nil {
		t.Fatalf("the prepare, once the partition serves again: %v", err)
	}
	check("the prepare taken")

	failing := NewReplicatedStore("local_data", dirsFailing{NewSimStorages(1)}, Replication{Cluster: testCluster3, ReplicaID: 1, ReplicaCount: 3})
	if err := failing.Create(testKey, Config{PartitionsCount: 1}, 1); err != nil {
		t.Fatal(err)
	}
	if err := failing.Step(testKey, h, body); err == nil {
		t.Fatal("a store whose directories are not durable took a frame")
	}
	if got := failing.IngressDrops()[IngressStorageFailing]; got != 1 {
		t.Fatalf("%d frames counted as refused for the failing storage, want 1", got)
	}
	for r := range IngressDropCount {
		if r.String() == "" || r.String() == IngressDrop(IngressDropCount).String() {
			t.Fatalf("reason %d has no name", r)
		}
	}
}
