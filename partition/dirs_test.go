package partition

import (
	"os"
	"testing"

	"github.com/iggy-shard/iggy-shard/wire"
)

// Partitions created together cost one fsync of their parent directory, not one
// each, and it is done before anything is written in any of them: a send to one
// syncs the directories first. A created partition holds no file until written.
func TestCreatedPartitionsShareTheirDirectoryFsync(t *testing.T) {
	dirs := &DirSyncs{}
	s := NewStore(t.TempDir(), OSStorages{Dirs: dirs})
	defer s.Close()
	cfg := Config{PartitionsCount: 100}
	for i := range 100 {
		if err := s.CreateInView(Key{StreamID: 1, TopicID: 1, PartitionID: uint32(i)}, cfg, Incarnation{CreatedAtMicros: 1}, 0); err != nil {
			t.Fatal(err)
		}
	}
	if dirs.Syncs != 0 || dirs.Pending() == 0 {
		t.Fatalf("after the creations: %d directory fsyncs, %d pending; want none done, some pending", dirs.Syncs, dirs.Pending())
	}
	k := Key{StreamID: 1, TopicID: 1, PartitionID: 7}
	if names, err := os.ReadDir(s.Dir(k)); err != nil || len(names) != 0 {
		t.Fatalf("a created partition holds %d files (%v), want none", len(names), err)
	}
	if err := s.Send(k, sendRequest(makeBatch(t, 0, 2, 10)), 1000, newSendRecorder(), 1); err != nil {
		t.Fatal(err)
	}
	// streams/, streams/1, topics/, topics/1, partitions/: one each, for 100 partitions.
	if dirs.Pending() != 0 || dirs.Syncs > 6 {
		t.Fatalf("after a send: %d directory fsyncs, %d pending", dirs.Syncs, dirs.Pending())
	}
	s.WaitIdle()
	_, msgs := poll(t, s, k, PollRequest{Strategy: wire.PollingStrategy{Kind: wire.PollingFirst}, Count: 10})
	if len(msgs) != 2 {
		t.Fatalf("the partition serves %d messages, want 2", len(msgs))
	}
}
