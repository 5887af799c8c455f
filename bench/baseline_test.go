package bench

import (
	"context"
	"os"
	"testing"
)

func TestSequentialWrite(t *testing.T) {
	dir := t.TempDir()
	for _, syncEvery := range []int{0, SyncEveryBytes} {
		d, err := SequentialWrite(context.Background(), dir, 100_000, 3_000_000, syncEvery)
		if err != nil {
			t.Fatal(err)
		}
		if d.Bytes != 3_000_000 || d.MBPerSec <= 0 || d.ElapsedSeconds <= 0 || d.Dir != dir {
			t.Errorf("sync every %d: %+v", syncEvery, d)
		}
	}
	if entries, err := os.ReadDir(dir); err != nil || len(entries) != 0 {
		t.Errorf("left behind %v (%v)", entries, err)
	}
	if _, err := SequentialWrite(context.Background(), dir+"/missing", 100, 100, 0); err == nil {
		t.Error("a directory that does not exist gave no error")
	}
}

// The baseline has the run's shape: as many loopback connections as the run's
// busiest role has actors, each writing the run's batches.
func TestMeasureBaseline(t *testing.T) {
	cfg := Config{Kind: PinnedConsumer, Consumers: 3, MessagesPerBatch: 100, MessageSizeBytes: 100, Batches: 20}
	b, err := MeasureBaseline(testContext(t), cfg, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if b.Loopback.Actors != 3 || b.Loopback.Batches != 60 || b.Loopback.WireMBPerSec <= 0 {
		t.Errorf("loopback %+v", b.Loopback)
	}
	if len(b.SequentialWrite) != 2 || b.SequentialWrite[0].Name != DiskWritePageCache || b.SequentialWrite[1].Name != DiskWriteSynced ||
		b.SequentialWrite[0].Bytes != b.Loopback.WireBytes || b.SequentialWrite[1].MBPerSec <= 0 {
		t.Errorf("sequential writes %+v for %d loopback bytes", b.SequentialWrite, b.Loopback.WireBytes)
	}
}
