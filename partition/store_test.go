package partition

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/iggy-shard/iggy-shard/wire"
)

func TestConsumerOffsets(t *testing.T) {
	s, st := newSimStore(t, 20, smallConfig())
	alice := Consumer{Kind: wire.ConsumerSingle, ID: 7}
	group := Consumer{Kind: wire.ConsumerGroup, ID: 7}

	// Empty partition: nothing stored, and nothing can be.
	if body, err := s.AppendConsumerOffsetReply(nil, testKey, alice); err != nil || len(body) != 0 {
		t.Fatalf("get on empty: %x %v", body, err)
	}
	if err := s.StoreConsumerOffset(testKey, alice, 0, wire.AckQuorum); err != wire.ErrInvalidOffset {
		t.Fatalf("store on empty: %v", err)
	}
	if err := s.DeleteConsumerOffset(testKey, alice, wire.AckQuorum); err != wire.ErrConsumerOffsetNotFound {
		t.Fatalf("delete nothing: %v", err)
	}

	mustSend(t, s, testKey, makeBatch(t, 0, 10, 10), 1)
	for _, tc := range []struct {
		name   string
		key    Key
		c      Consumer
		offset uint64
		ack    wire.AckLevel
		want   error
	}{
		{"quorum", testKey, alice, 4, wire.AckQuorum, nil},
		{"no ack", testKey, group, 9, wire.AckNoAck, nil},
		{"current offset", testKey, alice, 9, wire.AckQuorum, nil},
		{"above current", testKey, alice, 10, wire.AckQuorum, wire.ErrInvalidOffset},
		{"far above", testKey, alice, math.MaxUint64, wire.AckNoAck, wire.ErrInvalidOffset},
		{"unknown partition", Key{StreamID: 5}, alice, 1, wire.AckQuorum, wire.ErrResourceNotFound},
		{"unknown consumer kind", testKey, Consumer{Kind: 3, ID: 1}, 1, wire.AckQuorum, wire.ErrInvalidCommand},
		{"back again", testKey, alice, 3, wire.AckNoAck, nil},
	} {
		if err := s.StoreConsumerOffset(tc.key, tc.c, tc.offset, tc.ack); err != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	body, err := s.AppendConsumerOffsetReply(nil, testKey, alice)
	var o wire.ConsumerOffset
	if err != nil || len(body) != 20 || o.Decode(body) != nil || o != (wire.ConsumerOffset{PartitionID: 3, CurrentOffset: 9, StoredOffset: 3}) {
		t.Fatalf("get: %x %v %+v", body, err, o)
	}
	if _, _, err := s.ConsumerOffset(Key{StreamID: 5}, alice); err != wire.ErrPartitionNotFound {
		t.Fatalf("get unknown partition: %v", err)
	}
	// Offsets survive a clean restart.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = NewStore("local_data", st)
	if _, err := s.Open(testKey, smallConfig(), Incarnation{CreatedAtMicros: 1234}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		c    Consumer
		want uint64
	}{{alice, 3}, {group, 9}} {
		o, ok, err := s.ConsumerOffset(testKey, c.c)
		if err != nil || !ok || o.StoredOffset != c.want {
			t.Fatalf("%+v after reopen: %+v %v %v", c.c, o, ok, err)
		}
	}
	if err := s.DeleteConsumerOffset(testKey, alice, wire.AckNoAck); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteConsumerOffset(testKey, alice, wire.AckNoAck); err != wire.ErrConsumerOffsetNotFound {
		t.Fatalf("second delete: %v", err)
	}
	if err := s.DeleteConsumerOffset(Key{StreamID: 5}, alice, wire.AckNoAck); err != wire.ErrResourceNotFound {
		t.Fatalf("delete unknown partition: %v", err)
	}
	if _, ok, _ := s.ConsumerOffset(testKey, alice); ok {
		t.Fatal("deleted offset still there")
	}
}

// Offsets stored with Quorum on an enforce_fsync topic survive a power loss.
func TestConsumerOffsetQuorumSurvivesCrash(t *testing.T) {
	cfg := smallConfig()
	cfg.EnforceFsync = true
	s, st := newSimStore(t, 21, cfg)
	mustSend(t, s, testKey, makeBatch(t, 0, 10, 10), 1)
	alice := Consumer{Kind: wire.ConsumerSingle, ID: 1}
	if err := s.StoreConsumerOffset(testKey, alice, 6, wire.AckQuorum); err != nil {
		t.Fatal(err)
	}
	for seed := uint64(0); seed < 10; seed++ {
		crashed := st.crash(seed)
		s2 := NewStore("local_data", crashed)
		if _, err := s2.Open(testKey, cfg, Incarnation{CreatedAtMicros: 1234}); err != nil {
			t.Fatal(err)
		}
		o, ok, _ := s2.ConsumerOffset(testKey, alice)
		if !ok || o.StoredOffset != 6 || o.CurrentOffset != 9 {
			t.Fatalf("seed %d: %+v %v", seed, o, ok)
		}
	}
}

func TestPurge(t *testing.T) {
	st := newSimStorages(30)
	s := NewStore("local_data", st)
	other := Key{StreamID: 1, TopicID: 5, PartitionID: 0}
	second := Key{StreamID: 1, TopicID: 2, PartitionID: 4}
	for _, k := range []Key{testKey, second, other} {
		if err := s.Create(k, smallConfig(), 1); err != nil {
			t.Fatal(err)
		}
		for i := uint64(0); i < 6; i++ {
			mustSend(t, s, k, makeBatch(t, i*10, 10, 100), 1000+i)
		}
		if err := s.StoreConsumerOffset(k, Consumer{Kind: wire.ConsumerSingle, ID: 1}, 30, wire.AckQuorum); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.PurgeTopic(1, 2, 1); err != nil {
		t.Fatal(err)
	}
	for _, k := range []Key{testKey, second} {
		info, err := s.Info(k)
		if err != nil || info.MessagesCount != 0 || info.CurrentOffset != 0 || info.SizeBytes != 0 || info.SegmentsCount != 1 {
			t.Fatalf("%v after purge: %+v %v", k, info, err)
		}
		if _, ok, _ := s.ConsumerOffset(k, Consumer{Kind: wire.ConsumerSingle, ID: 1}); ok {
			t.Fatalf("%v: consumer offset survived the purge", k)
		}
		_, msgs := poll(t, s, k, PollRequest{Strategy: wire.PollingStrategy{Kind: wire.PollingFirst}, Count: 100})
		if len(msgs) != 0 {
			t.Fatalf("%v: %d messages after purge", k, len(msgs))
		}
		// Offsets restart at 0, as on the reference server.
		if base := mustSend(t, s, k, makeBatch(t, 0, 3, 10), 5000); base != 0 {
			t.Fatalf("%v: first batch after purge at offset %d", k, base)
		}
		if info.CreatedAtMicros != 1 {
			t.Fatalf("purge changed created_at: %+v", info)
		}
	}
	if info, _ := s.Info(other); info.MessagesCount != 60 {
		t.Fatalf("another topic was purged: %+v", info)
	}
	// What a purge removed stays removed across a restart.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = NewStore("local_data", st)
	if _, err := s.Open(testKey, smallConfig(), Incarnation{CreatedAtMicros: 1}); err != nil {
		t.Fatal(err)
	}
	_, msgs := poll(t, s, testKey, PollRequest{Strategy: wire.PollingStrategy{Kind: wire.PollingFirst}, Count: 100})
	if !slices.Equal(offsetsOf(msgs), span(0, 3)) {
		t.Fatalf("after restart: %v", offsetsOf(msgs))
	}
	if err := s.PurgeStream(1, 2); err != nil {
		t.Fatal(err)
	}
	if err := s.Purge(Key{StreamID: 8}, 1); err == nil {
		t.Fatal("purge of a partition the store does not own")
	}
}

func TestDeleteAndCreateAgain(t *testing.T) {
	root := t.TempDir()
	s := NewStore(root, OSStorages{})
	keys := []Key{{0, 0, 0}, {0, 0, 1}, {0, 1, 0}, {1, 0, 0}}
	for _, k := range keys {
		if err := s.Create(k, smallConfig(), 1); err != nil {
			t.Fatal(err)
		}
		mustSend(t, s, k, makeBatch(t, 0, 5, 10), 1)
	}
	if err := s.Create(keys[0], smallConfig(), 1); err == nil {
		t.Fatal("created a partition twice")
	}
	if want := filepath.Join(root, "streams", "0", "topics", "0", "partitions", "1"); s.Dir(keys[1]) != want {
		t.Fatalf("dir %s, want %s", s.Dir(keys[1]), want)
	}
	if err := s.Delete(keys[1]); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(s.Dir(keys[1])); !os.IsNotExist(err) {
		t.Fatalf("partition directory still there: %v", err)
	}
	if err := s.DeleteTopic(0, 0); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteStream(1); err != nil {
		t.Fatal(err)
	}
	if got := s.Keys(nil); !slices.Equal(got, []Key{{0, 1, 0}}) {
		t.Fatalf("left: %v", got)
	}
	if err := s.Delete(keys[0]); err == nil {
		t.Fatal("deleted a partition twice")
	}
	// A partition id used again starts empty, even if files were left behind.
	if err := os.MkdirAll(s.Dir(keys[0]), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(s.Dir(keys[0]), "00000000000000000000.log"), []byte("left over"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := s.Create(keys[0], smallConfig(), 2); err != nil {
		t.Fatal(err)
	}
	if info, _ := s.Info(keys[0]); info.MessagesCount != 0 || info.CreatedAtMicros != 2 {
		t.Fatalf("recreated partition: %+v", info)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestRetentionAndDeleteSegments(t *testing.T) {
	cfg := smallConfig()
	cfg.MessageExpiryMicros = 10_000
	s, _ := newSimStore(t, 40, cfg)
	// 12 batches of ~1.7 KiB, stamped 1000 µs apart: a segment every 3 batches.
	for i := uint64(0); i < 12; i++ {
		mustSend(t, s, testKey, makeBatch(t, i*10, 10, 100), 1000*(i+1))
	}
	before, _ := s.Info(testKey)
	if before.SegmentsCount < 4 {
		t.Fatalf("want at least 4 segments, have %+v", before)
	}
	// Nothing is old enough yet.
	if n, err := s.ApplyRetention(12_000); err != nil || n != 0 {
		t.Fatalf("early pass removed %d: %v", n, err)
	}
	// At 15_500 µs the batches stamped up to 5000 are expired.
	n, err := s.ApplyRetention(15_500)
	if err != nil || n == 0 {
		t.Fatalf("pass removed %d: %v", n, err)
	}
	_, msgs := poll(t, s, testKey, PollRequest{Strategy: wire.PollingStrategy{Kind: wire.PollingFirst}, Count: 1000})
	first := msgs[0].offset
	if first == 0 || first > 50 || msgs[len(msgs)-1].offset != 119 {
		t.Fatalf("after retention: %d..%d", first, msgs[len(msgs)-1].offset)
	}
	for _, m := range msgs {
		if m.timestamp <= 5000 && m.offset < first {
			t.Fatalf("expired message %d still served", m.offset)
		}
	}
	after, _ := s.Info(testKey)
	if after.SegmentsCount != before.SegmentsCount-uint32(n) || after.MessagesCount != 120-first || after.CurrentOffset != 119 {
		t.Fatalf("before %+v after %+v removed %d", before, after, n)
	}
	// DeleteSegments takes the oldest sealed one; never the open one.
	removed, err := s.DeleteSegments(testKey, 1)
	if err != nil || len(removed) != 1 || removed[0].BaseOffset != first {
		t.Fatalf("delete segments: %+v %v", removed, err)
	}
	removed, err = s.DeleteSegments(testKey, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if info, _ := s.Info(testKey); info.SegmentsCount != 1 || info.CurrentOffset != 119 {
		t.Fatalf("after deleting all sealed segments: %+v (%d removed)", info, len(removed))
	}
	if _, err := s.DeleteSegments(Key{StreamID: 4}, 1); err != wire.ErrPartitionNotFound {
		t.Fatalf("unknown partition: %v", err)
	}
	// The offsets go on.
	if base := mustSend(t, s, testKey, makeBatch(t, 120, 1, 10), 20_000); base != 120 {
		t.Fatalf("next offset %d", base)
	}
}

func TestReconfigure(t *testing.T) {
	s, _ := newSimStore(t, 50, smallConfig())
	for i := uint64(0); i < 9; i++ {
		mustSend(t, s, testKey, makeBatch(t, i*10, 10, 100), 1000*(i+1))
	}
	if n, _ := s.ApplyRetention(1 << 40); n != 0 {
		t.Fatalf("no expiry configured, yet %d segments removed", n)
	}
	cfg := smallConfig()
	cfg.MessageExpiryMicros = 1000
	if err := s.Reconfigure(testKey.StreamID, testKey.TopicID, cfg); err != nil {
		t.Fatal(err)
	}
	if info, _ := s.Info(testKey); info.MessagesCount != 90 || info.CreatedAtMicros != 1234 {
		t.Fatalf("reconfigure lost something: %+v", info)
	}
	if n, _ := s.ApplyRetention(1 << 40); n == 0 {
		t.Fatal("the new expiry did not apply")
	}
	if base := mustSend(t, s, testKey, makeBatch(t, 90, 1, 10), 1<<40); base != 90 {
		t.Fatalf("next offset %d", base)
	}
}

func TestConfigFromTopicOptions(t *testing.T) {
	o := wire.DefaultTopicOptions()
	cfg := ConfigFromTopicOptions(o, 4)
	sc := cfg.segmentConfig(2)
	if sc.PartitionID != 2 || sc.SegmentSizeBytes != 1<<30 || sc.MaxSizeBytes != 0 || sc.EnforceFsync ||
		sc.MessagesRequiredToSave != 1024 || sc.SizeOfMessagesRequiredToSaveBytes != 1<<20 || sc.PreallocateSegments {
		t.Fatalf("defaults: %+v", sc)
	}
	for _, tc := range []struct {
		maxTopic, segment uint64
		partitions        uint32
		want              int64
	}{
		{math.MaxUint64, 1 << 20, 4, 0},
		{0, 1 << 20, 4, 0},
		{1 << 40, 1 << 30, 4, 1 << 38},
		{100 << 20, 1 << 20, 4, 1<<20 + 64<<20}, // the share is floored at one segment + 64 MiB
		{1 << 30, 1 << 20, 0, 1 << 30},
	} {
		o.MaxTopicSizeBytes, o.SegmentSizeBytes = tc.maxTopic, tc.segment
		if got := ConfigFromTopicOptions(o, tc.partitions).segmentConfig(0).MaxSizeBytes; got != tc.want {
			t.Errorf("max topic %d, segment %d, %d partitions: share %d, want %d", tc.maxTopic, tc.segment, tc.partitions, got, tc.want)
		}
	}
	o.EnforceFsync, o.PreallocateSegments, o.MessageExpiryMicros = true, true, 77
	sc = ConfigFromTopicOptions(o, 1).segmentConfig(0)
	if !sc.EnforceFsync || !sc.PreallocateSegments || sc.MessageExpiryMicros != 77 {
		t.Fatalf("%+v", sc)
	}
}

func TestInfo(t *testing.T) {
	s, _ := newSimStore(t, 60, smallConfig())
	info, err := s.Info(testKey)
	if err != nil || info != (wire.PartitionInfo{ID: 3, CreatedAtMicros: 1234, SegmentsCount: 1}) {
		t.Fatalf("empty: %+v %v", info, err)
	}
	batch := makeBatch(t, 0, 4, 10)
	mustSend(t, s, testKey, batch, 1)
	info, _ = s.Info(testKey)
	if info.CurrentOffset != 3 || info.MessagesCount != 4 || info.SizeBytes != uint64(len(batch)) {
		t.Fatalf("%+v", info)
	}
	if _, err := s.Info(Key{StreamID: 9}); err != wire.ErrPartitionNotFound {
		t.Fatal(err)
	}
	if !s.Has(testKey) || s.Has(Key{}) || s.Len() != 1 {
		t.Fatal("Has/Len")
	}
	other := Key{StreamID: 1, TopicID: 2, PartitionID: 0}
	if err := s.Create(other, smallConfig(), 1); err != nil {
		t.Fatal(err)
	}
	mustSend(t, s, other, makeBatch(t, 0, 2, 10), 1)
	want := Totals{Partitions: 2, Segments: 2, Messages: 6, SizeBytes: uint64(len(batch) + len(makeBatch(t, 0, 2, 10)))}
	if got := s.Totals(); got != want {
		t.Fatalf("totals %+v, want %+v", got, want)
	}
}

// A log broken by a failed repair refuses sends until Recover reopens it.
func TestRecoverBrokenLog(t *testing.T) {
	for seed := uint64(0); seed < 40; seed++ {
		cfg := smallConfig()
		cfg.EnforceFsync = true
		s, st := newSimStore(t, 80+seed, cfg)
		mustSend(t, s, testKey, makeBatch(t, 0, 3, 10), 1)
		disk := st.disks[s.Dir(testKey)]
		disk.FailNextWrites(1)
		disk.FailNextSyncs(2) // the append's sync is canceled; the repair's fails
		rec := newSendRecorder()
		if err := s.Send(testKey, sendRequest(makeBatch(t, 3, 2, 10)), 2, rec, 1); err != nil {
			t.Fatal(err)
		}
		s.WaitIdle()
		if s.partitions[testKey].broken() == nil {
			continue // this seed's order spent the sync failures elsewhere
		}
		if rec.failed[1] != wire.ErrCannotSaveMessagesToSegment {
			t.Fatalf("seed %d: pending send on a broken log: %v %v", seed, rec.failed, rec.acked)
		}
		if err := s.Send(testKey, sendRequest(makeBatch(t, 3, 2, 10)), 3, rec, 2); err != wire.ErrCannotAppendMessage {
			t.Fatalf("seed %d: send to a broken log: %v", seed, err)
		}
		disk.FailNextSyncs(0)
		if _, err := s.Recover(testKey); err != nil {
			t.Fatalf("seed %d: recover: %v", seed, err)
		}
		if s.Err(testKey) != nil {
			t.Fatalf("seed %d: still failing: %v", seed, s.Err(testKey))
		}
		_, msgs := poll(t, s, testKey, PollRequest{Strategy: wire.PollingStrategy{Kind: wire.PollingFirst}, Count: 100})
		if len(msgs) < 3 {
			t.Fatalf("seed %d: acknowledged messages lost: %v", seed, offsetsOf(msgs))
		}
		mustSend(t, s, testKey, makeBatch(t, uint64(len(msgs)), 1, 10), 4)
		return
	}
	t.Fatal("no seed broke the log")
}

func TestReopenOnOSStorage(t *testing.T) {
	root := t.TempDir()
	cfg := smallConfig()
	s := NewStore(root, OSStorages{})
	if err := s.Create(testKey, cfg, 9); err != nil {
		t.Fatal(err)
	}
	for i := uint64(0); i < 8; i++ {
		mustSend(t, s, testKey, makeBatch(t, i*10, 10, 100), i+1)
	}
	alice := Consumer{Kind: wire.ConsumerSingle, ID: 1}
	poll(t, s, testKey, PollRequest{Consumer: alice, Strategy: wire.PollingStrategy{Kind: wire.PollingNext}, Count: 33, AutoCommit: true})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = NewStore(root, OSStorages{})
	report, err := s.Open(testKey, cfg, Incarnation{CreatedAtMicros: 9})
	if err != nil {
		t.Fatal(err)
	}
	if len(report.Truncations) != 0 {
		t.Fatalf("clean shutdown, yet %v", report)
	}
	_, msgs := poll(t, s, testKey, PollRequest{Consumer: alice, Strategy: wire.PollingStrategy{Kind: wire.PollingNext}, Count: 1000})
	if !slices.Equal(offsetsOf(msgs), span(33, 80)) {
		t.Fatalf("after reopen: %v", offsetsOf(msgs))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestOSStoragesOpenCreatesParents(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "local_data", "streams", "1", "topics", "2", "partitions", "3")
	if _, err := (OSStorages{}).Open(dir); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		t.Fatalf("%v %v", fi, err)
	}
	if _, err := (OSStorages{}).Open(dir); err != nil {
		t.Fatalf("existing dir: %v", err)
	}
}

func TestOSStoragesRemove(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "partitions", "0")
	if err := (OSStorages{}).Remove(dir); err != nil {
		t.Fatalf("missing dir: %v", err)
	}
	// A tombstone left by a crash is cleared by the next removal.
	if err := os.MkdirAll(filepath.Join(dir+".removing", "offsets"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "offsets", "consumers"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "00000000000000000000.log"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := (OSStorages{}).Remove(dir); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(filepath.Join(root, "partitions"))
	if err != nil || len(entries) != 0 {
		t.Fatalf("left behind: %v %v", entries, err)
	}
}

// PollIO reports work while any remains, so a loop that stops at 0 leaves nothing
// queued: here a full window whose save is submitted from PollIO itself.
func TestPollIOUntilQuiet(t *testing.T) {
	cfg := noSaveConfig()
	cfg.InflightBatchesMax = 2
	s := NewStore(t.TempDir(), OSStorages{})
	if err := s.Create(testKey, cfg, 1); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rec := newSendRecorder()
	for i := uint64(0); i < 3; i++ {
		err := s.Send(testKey, sendRequest(makeBatch(t, i, 1, 10)), 1, rec, i)
		if i < 2 && err != nil || i == 2 && err != wire.ErrTransientNotAccepted {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	for passes := 0; s.PollIO() != 0; passes++ {
		if passes > 100 {
			t.Fatal("PollIO never quiet")
		}
	}
	if s.Busy() {
		t.Fatal("quiet store is busy")
	}
	if err := s.Send(testKey, sendRequest(makeBatch(t, 2, 1, 10)), 1, rec, 2); err != nil {
		t.Fatalf("the window did not drain: %v", err)
	}
}
