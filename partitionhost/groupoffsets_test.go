package partitionhost

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/iggy-shard/iggy-shard/metadata"
	"github.com/iggy-shard/iggy-shard/partition"
	"github.com/iggy-shard/iggy-shard/request"
	"github.com/iggy-shard/iggy-shard/wire"
)

// stillShard is a Shard whose clock moves only when the test moves it.
type stillShard struct{ nowNs int64 }

func (s *stillShard) Reply(*request.Job)         {}
func (s *stillShard) NowNs() int64               { return s.nowNs }
func (s *stillShard) NowMicros() uint64          { return uint64(s.nowNs / 1000) }
func (s *stillShard) WakeAt(int64)               {}
func (s *stillShard) ViewState() *metadata.State { return nil }

// A deleted group's offset deletion that the store answers 57 (its proposal's
// outcome unknown: its partition closed under it, as a DeleteTopic right after the
// DeleteConsumerGroup does, or a view change cancelled it) is asked again, not
// logged as an error; asked again after its partition went, it is over, quietly.
// A failure of another kind is still an error.
func TestGroupOffsetDeleteOfUnknownOutcomeIsAskedAgain(t *testing.T) {
	var logged bytes.Buffer
	sh := &stillShard{nowNs: 1_000_000_000}
	h := New(Config{Shard: sh, Log: slog.New(slog.NewTextHandler(&logged, nil)),
		Replication: partition.Replication{ReplicaCount: 3}})
	k := partition.Key{StreamID: 1, TopicID: 1, PartitionID: 0}

	(&groupOffsetDelete{h: h, key: k, group: 1, revision: 5, attempts: 1}).settle(wire.ErrTransientNotCommitted)
	if h.GroupOffsetDeletes() != 1 {
		t.Fatalf("%d deletions to ask again after a 57, want 1", h.GroupOffsetDeletes())
	}
	sh.nowNs += int64(groupOffsetDeleteRetry)
	h.RetryGroupOffsetDeletes() // the partition is not open here: gone
	if h.GroupOffsetDeletes() != 0 {
		t.Fatalf("%d deletions left once their partition went, want 0", h.GroupOffsetDeletes())
	}
	if logged.Len() != 0 {
		t.Fatalf("a deletion of unknown outcome logged: %s", logged.String())
	}

	(&groupOffsetDelete{h: h, key: k, group: 1, revision: 5, attempts: 1}).settle(wire.ErrCannotWriteToFile)
	if !strings.Contains(logged.String(), "level=ERROR") {
		t.Fatalf("a deletion the partition's files refused logged %q, want an error", logged.String())
	}
}
