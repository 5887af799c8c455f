package metadata

import (
	"encoding/binary"
	"testing"

	"github.com/iggy-shard/iggy-shard/wire"
)

const alice = 1 // a user without permissions, created by setupUsers

// setupUsers creates alice (id 1) without permissions.
func setupUsers(f *fixture) {
	f.t.Helper()
	f.must(wire.OperationCreateUser, root, createUser("alice", nil))
}

// grant replaces alice's permissions.
func grant(f *fixture, p wire.Permissions) {
	f.t.Helper()
	f.must(wire.OperationUpdatePermissions, root, updatePermissions(num(alice), &p))
}

func TestCreateStream(t *testing.T) {
	f := newFixture(t)
	setupUsers(f)
	payload := f.must(wire.OperationCreateStream, root, createStream("orders"))
	var d wire.StreamDetails
	if err := d.Decode(payload); err != nil {
		t.Fatal(err)
	}
	if d.ID != 0 || string(d.Name) != "orders" || d.TopicsCount != 0 || d.CreatedAtMicros != f.ts {
		t.Fatalf("reply %+v", d.StreamHeader)
	}
	if f.out.Operation != wire.OperationCreateStream {
		t.Fatalf("reply operation %v", f.out.Operation)
	}
	withOption := body((&wire.CreateStream{Name: []byte("x"), Options: option("k", wire.HeaderString, []byte("v"))}).Append(nil))
	for _, tc := range []struct {
		name string
		user uint32
		body []byte
		want wire.ErrorCode
	}{
		{"duplicate name", root, createStream("orders"), wire.ErrStreamNameAlreadyExists},
		{"names are case-sensitive", root, createStream("Orders"), 0},
		{"no manage_streams", alice, createStream("a"), wire.ErrUnauthorized},
		{"unknown user", 77, createStream("a"), wire.ErrUnauthorized},
		{"option at apply", root, withOption, wire.ErrInvalidOptionValue},
		{"malformed body", root, []byte{0}, wire.ErrInvalidCommand},
	} {
		if got := f.apply(wire.OperationCreateStream, tc.user, tc.body); got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
	grant(f, wire.Permissions{Global: wire.GlobalPermissions{ManageStreams: true}})
	f.must(wire.OperationCreateStream, alice, createStream("alices"))
	if st := f.s.resolveStream(str("alices")); st == nil || st.ID != 2 {
		t.Fatalf("alice's stream: %+v", st)
	}
}

func TestStreamIDsReuseLowestFree(t *testing.T) {
	f := newFixture(t)
	for _, n := range []string{"a", "b", "c"} {
		f.must(wire.OperationCreateStream, root, createStream(n))
	}
	f.must(wire.OperationDeleteStream, root, body(num(1).Append(nil)))
	var d wire.StreamDetails
	if err := d.Decode(f.must(wire.OperationCreateStream, root, createStream("d"))); err != nil || d.ID != 1 {
		t.Fatalf("new stream id %d (%v), want the freed 1", d.ID, err)
	}
}

func TestTooManyStreams(t *testing.T) {
	f := newFixture(t)
	full := &Stream{}
	for i := range StreamIDLimit {
		f.s.streams.put(uint32(i), full)
	}
	if code := f.s.applyCreateStream(f.s.access(root), &Header{}, createStream("x"), &f.out); code != wire.ErrTooManyStreams {
		t.Fatalf("got %v", code)
	}
}

func TestUpdateDeletePurgeStream(t *testing.T) {
	f := newFixture(t)
	setupUsers(f)
	f.must(wire.OperationCreateStream, root, createStream("a"))
	f.must(wire.OperationCreateStream, root, createStream("b"))
	f.must(wire.OperationCreateTopic, root, createTopic(num(0), 1, "t0", nil))
	f.must(wire.OperationCreateTopic, root, createTopic(num(0), 1, "t1", nil))
	update := func(id wire.Identifier, name string) []byte {
		return body((&wire.UpdateStream{StreamID: id, Name: []byte(name)}).Append(nil))
	}
	purge := body(num(0).Append(nil))
	for _, tc := range []struct {
		name string
		op   wire.Operation
		user uint32
		body []byte
		want wire.ErrorCode
	}{
		{"update missing", wire.OperationUpdateStream, root, update(num(9), "z"), wire.ErrStreamIdNotFound},
		{"update to taken name", wire.OperationUpdateStream, root, update(num(0), "b"), wire.ErrStreamNameAlreadyExists},
		{"update to own name", wire.OperationUpdateStream, root, update(num(0), "a"), 0},
		{"update unauthorized", wire.OperationUpdateStream, alice, update(num(0), "q"), wire.ErrUnauthorized},
		{"update with option", wire.OperationUpdateStream, root, body((&wire.UpdateStream{StreamID: num(0), Name: []byte("a"), Options: option("k", wire.HeaderString, []byte("v"))}).Append(nil)), wire.ErrInvalidOptionValue},
		{"missing before permission", wire.OperationUpdateStream, alice, update(num(9), "q"), wire.ErrStreamIdNotFound},
		{"rename", wire.OperationUpdateStream, root, update(str("a"), "a2"), 0},
		{"purge missing", wire.OperationPurgeStream, root, body(num(9).Append(nil)), wire.ErrStreamIdNotFound},
		{"purge unauthorized", wire.OperationPurgeStream, alice, purge, wire.ErrUnauthorized},
		{"delete missing", wire.OperationDeleteStream, root, body(str("zz").Append(nil)), wire.ErrStreamIdNotFound},
		{"delete unauthorized", wire.OperationDeleteStream, alice, body(num(1).Append(nil)), wire.ErrUnauthorized},
	} {
		if got := f.apply(tc.op, tc.user, tc.body); got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
	if f.s.resolveStream(str("a2")) == nil || f.s.resolveStream(str("a")) != nil {
		t.Fatal("rename not visible")
	}

	// A per-stream manage_stream grant covers that stream only.
	grant(f, wire.Permissions{Streams: []wire.StreamPermissions{{StreamID: 0, ManageStream: true}}})
	f.must(wire.OperationPurgeStream, alice, purge)
	want := []Effect{
		{Kind: EffectPurgeTopic, Stream: 0, Topic: 0, Generation: 1},
		{Kind: EffectPurgeTopic, Stream: 0, Topic: 1, Generation: 1},
	}
	if len(f.out.Effects) != 2 || f.out.Effects[0] != want[0] || f.out.Effects[1] != want[1] {
		t.Fatalf("purge effects %+v", f.out.Effects)
	}
	if got := f.apply(wire.OperationDeleteStream, alice, body(num(1).Append(nil))); got != wire.ErrUnauthorized {
		t.Fatalf("delete of another stream: %v", got)
	}
	f.must(wire.OperationDeleteStream, alice, body(num(0).Append(nil)))
	if len(f.out.Effects) != 1 || f.out.Effects[0] != (Effect{Kind: EffectDeleteStream, Stream: 0}) {
		t.Fatalf("delete effects %+v", f.out.Effects)
	}
}

func TestCreateTopic(t *testing.T) {
	f := newFixture(t)
	setupUsers(f)
	f.must(wire.OperationCreateStream, root, createStream("s"))
	payload := f.must(wire.OperationCreateTopic, root, createTopic(num(0), 3, "t", nil))
	if f.out.Operation != wire.OperationCreateTopicWithAssignments {
		t.Fatalf("reply operation %v", f.out.Operation)
	}
	var d wire.TopicDetails
	if err := d.Decode(payload); err != nil {
		t.Fatal(err)
	}
	if d.ID != 0 || d.PartitionsCount != 3 || d.MessageExpiryMicros != wire.DefaultMessageExpiryMicros ||
		d.CompressionAlgorithm != wire.TopicCompressionNone || d.MaxTopicSizeBytes != wire.DefaultMaxTopicSizeBytes ||
		len(d.ExplicitOptions) != 0 || d.CreatedAtMicros != f.ts {
		t.Fatalf("reply %+v", d.TopicHeader)
	}
	if n, err := wire.ValidateOptions(d.DerivedOptions); err != nil || n != 8 {
		t.Fatalf("derived block: %d entries, %v", n, err)
	}
	for i, p := range d.Partitions {
		if p.ID != uint32(i) || p.SegmentsCount != 0 || p.CreatedAtMicros != f.ts {
			t.Fatalf("partition %d: %+v", i, p)
		}
	}
	if len(f.out.Effects) != 1 || f.out.Effects[0] != (Effect{Kind: EffectCreatePartitions, Stream: 0, Topic: 0, First: 0, Count: 3}) {
		t.Fatalf("effects %+v", f.out.Effects)
	}

	// An explicit option is re-encoded canonically and leaves the derived block.
	payload = f.must(wire.OperationCreateTopic, root, createTopic(num(0), 0, "fsync", option("enforce_fsync", wire.HeaderString, []byte("true"))))
	if err := d.Decode(payload); err != nil {
		t.Fatal(err)
	}
	if want := option("enforce_fsync", wire.HeaderBool, []byte{1}); string(d.ExplicitOptions) != string(want) {
		t.Fatalf("explicit block %x, want %x", d.ExplicitOptions, want)
	}
	if len(f.out.Effects) != 0 {
		t.Fatalf("a topic without partitions asks for %+v", f.out.Effects)
	}

	for _, tc := range []struct {
		name string
		user uint32
		body []byte
		want wire.ErrorCode
	}{
		{"missing stream", root, createTopic(num(5), 1, "x", nil), wire.ErrStreamIdNotFound},
		{"duplicate name", root, createTopic(str("s"), 1, "t", nil), wire.ErrTopicNameAlreadyExists},
		{"unauthorized", alice, createTopic(num(0), 1, "x", nil), wire.ErrUnauthorized},
		{"missing stream before permission", alice, createTopic(num(5), 1, "x", nil), wire.ErrStreamIdNotFound},
		{"bad option at apply", root, createTopic(num(0), 1, "x", option("segment_size", wire.HeaderUint64, u64le(3))), wire.ErrInvalidOptionValue},
		{"too many partitions at apply", root, createTopic(num(0), 1001, "x", nil), wire.ErrInvalidOptionValue},
	} {
		if got := f.apply(wire.OperationCreateTopic, tc.user, tc.body); got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
	for _, p := range []wire.Permissions{
		{Global: wire.GlobalPermissions{ManageTopics: true}},
		{Streams: []wire.StreamPermissions{{StreamID: 0, ManageTopics: true}}},
		{Streams: []wire.StreamPermissions{{StreamID: 0, ManageStream: true}}},
	} {
		grant(f, p)
		name := "by-" + string(rune('a'+f.s.Stream(0).topics.count))
		if got := f.apply(wire.OperationCreateTopic, alice, createTopic(num(0), 0, name, nil)); got != 0 {
			t.Errorf("grant %+v: %v", p, got)
		}
	}
	grant(f, wire.Permissions{Streams: []wire.StreamPermissions{{StreamID: 0, ReadStream: true, Topics: []wire.TopicPermissions{{TopicID: 0, ManageTopic: true}}}}})
	if got := f.apply(wire.OperationCreateTopic, alice, createTopic(num(0), 0, "no", nil)); got != wire.ErrUnauthorized {
		t.Errorf("topic-level grant creates topics: %v", got)
	}
}

func u64le(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }

func TestTooManyTopics(t *testing.T) {
	f := newFixture(t)
	f.must(wire.OperationCreateStream, root, createStream("s"))
	st := f.s.Stream(0)
	for i := range TopicIDLimit {
		st.insertTopic(&Topic{ID: uint32(i), Name: "t" + string(rune(i)), groupByName: map[string]uint32{}})
	}
	if got := f.apply(wire.OperationCreateTopic, root, createTopic(num(0), 1, "one-more", nil)); got != wire.ErrTooManyTopics {
		t.Fatalf("got %v", got)
	}
}

func TestUpdateDeletePurgeTopic(t *testing.T) {
	f := newFixture(t)
	setupUsers(f)
	f.must(wire.OperationCreateStream, root, createStream("s"))
	f.must(wire.OperationCreateTopic, root, createTopic(num(0), 2, "t0", option("segment_size", wire.HeaderUint64, u64le(1<<20))))
	f.must(wire.OperationCreateTopic, root, createTopic(num(0), 1, "t1", nil))
	update := func(topic wire.Identifier, name string, options []byte) []byte {
		return body((&wire.UpdateTopic{StreamID: num(0), TopicID: topic, Name: []byte(name), Options: options}).Append(nil))
	}
	gzip := option("compression_algorithm", wire.HeaderString, []byte("gzip"))
	for _, tc := range []struct {
		name string
		op   wire.Operation
		user uint32
		body []byte
		want wire.ErrorCode
	}{
		{"update missing stream", wire.OperationUpdateTopic, root, body((&wire.UpdateTopic{StreamID: num(3), TopicID: num(0), Name: []byte("x")}).Append(nil)), wire.ErrStreamIdNotFound},
		{"update missing topic", wire.OperationUpdateTopic, root, update(num(7), "x", nil), wire.ErrTopicIdNotFound},
		{"update taken name", wire.OperationUpdateTopic, root, update(num(0), "t1", nil), wire.ErrTopicNameAlreadyExists},
		{"update create-only key", wire.OperationUpdateTopic, root, update(num(0), "t0", option("segment_size", wire.HeaderUint64, u64le(1<<20))), wire.ErrInvalidOptionValue},
		{"update unauthorized", wire.OperationUpdateTopic, alice, update(num(0), "t0", nil), wire.ErrUnauthorized},
		{"update gzip", wire.OperationUpdateTopic, root, update(num(0), "t0", gzip), 0},
		{"purge missing", wire.OperationPurgeTopic, root, topicBody(num(0), num(9)), wire.ErrTopicIdNotFound},
		{"purge missing stream", wire.OperationPurgeTopic, root, topicBody(num(9), num(0)), wire.ErrStreamIdNotFound},
		{"purge unauthorized", wire.OperationPurgeTopic, alice, topicBody(num(0), num(0)), wire.ErrUnauthorized},
		{"purge", wire.OperationPurgeTopic, root, topicBody(num(0), num(0)), 0},
		{"delete missing", wire.OperationDeleteTopic, root, topicBody(num(0), str("nope")), wire.ErrTopicIdNotFound},
		{"delete missing stream", wire.OperationDeleteTopic, root, topicBody(num(4), num(0)), wire.ErrStreamIdNotFound},
		{"delete unauthorized", wire.OperationDeleteTopic, alice, topicBody(num(0), num(1)), wire.ErrUnauthorized},
	} {
		if got := f.apply(tc.op, tc.user, tc.body); got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
	tp := f.s.Stream(0).Topic(0)
	if tp.Options.CompressionAlgorithm != wire.TopicCompressionGzip || tp.PurgeGeneration != 1 {
		t.Fatalf("after update and purge: %+v, generation %d", tp.Options, tp.PurgeGeneration)
	}
	if n, _ := wire.ValidateOptions(tp.DerivedOptions); n != 6 {
		t.Fatalf("derived keys after update: %d, want 6 (segment_size explicit, compression moved)", n)
	}
	// A topic-level manage_topic grant covers that topic.
	grant(f, wire.Permissions{Streams: []wire.StreamPermissions{{StreamID: 0, Topics: []wire.TopicPermissions{{TopicID: 1, ManageTopic: true}}}}})
	f.must(wire.OperationPurgeTopic, alice, topicBody(num(0), num(1)))
	if len(f.out.Effects) != 1 || f.out.Effects[0] != (Effect{Kind: EffectPurgeTopic, Stream: 0, Topic: 1, Generation: 1}) {
		t.Fatalf("purge effects %+v", f.out.Effects)
	}
	f.must(wire.OperationDeleteTopic, alice, topicBody(num(0), str("t1")))
	if len(f.out.Effects) != 1 || f.out.Effects[0] != (Effect{Kind: EffectDeleteTopic, Stream: 0, Topic: 1, Count: 1}) {
		t.Fatalf("delete effects %+v", f.out.Effects)
	}
}

func TestPartitions(t *testing.T) {
	f := newFixture(t)
	setupUsers(f)
	f.must(wire.OperationCreateStream, root, createStream("s"))
	f.must(wire.OperationCreateTopic, root, createTopic(num(0), 2, "t", nil))
	f.must(wire.OperationCreatePartitions, root, partitionsBody(num(0), num(0), 3))
	if f.out.Operation != wire.OperationCreatePartitionsWithAssignments {
		t.Fatalf("reply operation %v", f.out.Operation)
	}
	if f.out.Effects[0] != (Effect{Kind: EffectCreatePartitions, Stream: 0, Topic: 0, First: 2, Count: 3}) {
		t.Fatalf("effects %+v", f.out.Effects)
	}
	f.must(wire.OperationDeletePartitions, root, partitionsBody(num(0), num(0), 2))
	if f.out.Effects[0] != (Effect{Kind: EffectDeletePartitions, Stream: 0, Topic: 0, First: 3, Count: 2}) {
		t.Fatalf("effects %+v", f.out.Effects)
	}
	if got := f.s.Stream(0).Topic(0).PartitionsCount(); got != 3 {
		t.Fatalf("partitions %d", got)
	}
	for _, tc := range []struct {
		name string
		op   wire.Operation
		user uint32
		body []byte
		want wire.ErrorCode
	}{
		{"create missing stream", wire.OperationCreatePartitions, root, partitionsBody(num(1), num(0), 1), wire.ErrStreamIdNotFound},
		{"create missing topic", wire.OperationCreatePartitions, root, partitionsBody(num(0), num(1), 1), wire.ErrTopicIdNotFound},
		{"create unauthorized", wire.OperationCreatePartitions, alice, partitionsBody(num(0), num(0), 1), wire.ErrUnauthorized},
		{"create zero", wire.OperationCreatePartitions, root, partitionsBody(num(0), num(0), 0), wire.ErrInvalidCommand},
		{"delete more than exist", wire.OperationDeletePartitions, root, partitionsBody(num(0), num(0), 4), wire.ErrInvalidPartitionsCount},
		{"delete missing topic", wire.OperationDeletePartitions, root, partitionsBody(num(0), num(1), 1), wire.ErrTopicIdNotFound},
		{"delete missing stream", wire.OperationDeletePartitions, root, partitionsBody(num(1), num(0), 1), wire.ErrStreamIdNotFound},
		{"delete unauthorized", wire.OperationDeletePartitions, alice, partitionsBody(num(0), num(0), 1), wire.ErrUnauthorized},
		{"delete all", wire.OperationDeletePartitions, root, partitionsBody(num(0), num(0), 3), 0},
	} {
		if got := f.apply(tc.op, tc.user, tc.body); got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
	tp := f.s.Stream(0).Topic(0)
	tp.Partitions = make([]Partition, PartitionIDLimit-1)
	for i := range tp.Partitions {
		tp.Partitions[i].ID = uint32(i)
	}
	if got := f.apply(wire.OperationCreatePartitions, root, partitionsBody(num(0), num(0), 2)); got != wire.ErrPartitionIdSpaceExhausted {
		t.Fatalf("id space: %v", got)
	}
	f.must(wire.OperationCreatePartitions, root, partitionsBody(num(0), num(0), 1))
}

func TestDeleteSegments(t *testing.T) {
	f := newFixture(t)
	setupUsers(f)
	f.must(wire.OperationCreateStream, root, createStream("s"))
	f.must(wire.OperationCreateTopic, root, createTopic(num(0), 2, "t", nil))
	seg := func(stream, topic wire.Identifier, partition, count uint32) []byte {
		return body((&wire.DeleteSegments{StreamID: stream, TopicID: topic, PartitionID: partition, SegmentsCount: count}).Append(nil))
	}
	for _, tc := range []struct {
		name string
		user uint32
		body []byte
		want wire.ErrorCode
	}{
		{"missing stream", root, seg(num(2), num(0), 0, 1), wire.ErrStreamIdNotFound},
		{"missing topic", root, seg(num(0), num(2), 0, 1), wire.ErrTopicIdNotFound},
		{"missing partition", root, seg(num(0), num(0), 2, 1), wire.ErrPartitionNotFound},
		{"unauthorized", alice, seg(num(0), num(0), 1, 1), wire.ErrUnauthorized},
	} {
		if got := f.apply(wire.OperationDeleteSegments, tc.user, tc.body); got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
		if f.out.Operation != wire.OperationTruncatePartition {
			t.Errorf("%s: reply operation %v", tc.name, f.out.Operation)
		}
	}
	f.must(wire.OperationDeleteSegments, root, seg(num(0), str("t"), 1, 5))
	if f.out.Effects[0] != (Effect{Kind: EffectDeleteSegments, Stream: 0, Topic: 0, First: 1, Count: 5}) {
		t.Fatalf("effects %+v", f.out.Effects)
	}
	if string(f.out.Reply) != "\x00\x00\x00\x00" {
		t.Fatalf("reply %x", f.out.Reply)
	}
}

func TestUnknownOperationCommitsAsRejection(t *testing.T) {
	f := newFixture(t)
	for _, op := range []wire.Operation{wire.OperationReserved, wire.OperationRegister, wire.OperationNonReplicated, wire.OperationSendMessages, 200} {
		if got := f.apply(op, root, nil); got != wire.ErrInvalidCommand {
			t.Errorf("%v: %v", op, got)
		}
	}
}

func TestInternalOperationAliases(t *testing.T) {
	f := newFixture(t)
	f.must(wire.OperationCreateStream, root, createStream("s"))
	f.must(wire.OperationCreateTopicWithAssignments, root, createTopic(num(0), 1, "t", nil))
	if f.out.Operation != wire.OperationCreateTopicWithAssignments {
		t.Fatalf("reply operation %v", f.out.Operation)
	}
	f.must(wire.OperationCreatePartitionsWithAssignments, root, partitionsBody(num(0), num(0), 2))
	seg := body((&wire.DeleteSegments{StreamID: num(0), TopicID: num(0), PartitionID: 2, SegmentsCount: 1}).Append(nil))
	f.must(wire.OperationTruncatePartition, root, seg)
	if got := f.s.Stream(0).Topic(0).PartitionsCount(); got != 3 || f.out.Effects[0].Kind != EffectDeleteSegments {
		t.Fatalf("partitions %d, effects %+v", got, f.out.Effects)
	}
}
