package metadata

import (
	"testing"

	"github.com/iggy-shard/iggy-shard/wire"
)

func readFixture(t *testing.T) *fixture {
	f := newFixture(t)
	setupUsers(f)
	f.must(wire.OperationCreateStream, root, createStream("s0"))
	f.must(wire.OperationCreateStream, root, createStream("s1"))
	f.must(wire.OperationCreateTopic, root, createTopic(num(0), 2, "t0", nil))
	f.must(wire.OperationCreateTopic, root, createTopic(num(0), 1, "t1", nil))
	f.must(wire.OperationCreateConsumerGroup, root, createGroup(num(0), num(0), "g"))
	f.applyAs(wire.OperationJoinConsumerGroup, root, 10, groupBody(num(0), num(0), num(0)))
	return f
}

// stats reports every partition with 10 messages of 100 bytes and 2 segments.
func stats(stream, topic, partition uint32) PartitionStats {
	return PartitionStats{SegmentsCount: 2, CurrentOffset: 9, SizeBytes: 100, MessagesCount: 10}
}

func TestReadStreamsAndTopics(t *testing.T) {
	f := readFixture(t)
	s := f.s
	b, err := s.AppendStream(nil, root, num(0), stats)
	var sd wire.StreamDetails
	if err != nil || sd.Decode(b) != nil || sd.TopicsCount != 2 || len(sd.Topics) != 2 ||
		sd.MessagesCount != 30 || sd.SizeBytes != 300 || sd.Topics[0].MessagesCount != 20 {
		t.Fatalf("GetStream: %+v (%v)", sd, err)
	}
	if b, err := s.AppendStream(nil, alice, num(9), stats); err != nil || len(b) != 0 {
		t.Fatalf("missing stream: %x %v", b, err)
	}
	if _, err := s.AppendStream(nil, alice, num(0), stats); err != wire.ErrUnauthorized {
		t.Fatalf("GetStream unauthorized: %v", err)
	}
	b, err = s.AppendStreams(nil, root, nil)
	if list, derr := wire.AppendStreams(nil, b); err != nil || derr != nil || len(list) != 2 || list[1].ID != 1 {
		t.Fatalf("GetStreams: %+v %v %v", list, err, derr)
	}
	if _, err := s.AppendStreams(nil, alice, nil); err != wire.ErrUnauthorized {
		t.Fatalf("GetStreams unauthorized: %v", err)
	}
	b, err = s.AppendTopic(nil, root, num(0), str("t0"), stats)
	var td wire.TopicDetails
	if err != nil || td.Decode(b) != nil || len(td.Partitions) != 2 || td.Partitions[1].SegmentsCount != 2 || td.MessagesCount != 20 {
		t.Fatalf("GetTopic: %+v (%v)", td, err)
	}
	b, _ = s.AppendTopic(nil, root, num(0), num(1), nil)
	if td.Decode(b) != nil || td.Partitions[0].SegmentsCount != 1 {
		t.Fatalf("GetTopic reports at least one segment: %+v", td.Partitions)
	}
	for _, target := range [][2]wire.Identifier{{num(0), num(5)}, {num(5), num(0)}} {
		if b, err := s.AppendTopic(nil, alice, target[0], target[1], nil); err != nil || len(b) != 0 {
			t.Fatalf("missing topic %v: %x %v", target, b, err)
		}
	}
	b, err = s.AppendTopics(nil, root, num(0), nil)
	if list, derr := wire.AppendTopics(nil, b); err != nil || derr != nil || len(list) != 2 {
		t.Fatalf("GetTopics: %v %v %v", list, err, derr)
	}
	if b, err := s.AppendTopics(nil, alice, num(7), nil); err != nil || string(b) != "\x00\x00\x00\x00" {
		t.Fatalf("GetTopics of a missing stream: %x %v", b, err)
	}
	if _, err := s.AppendTopics(nil, alice, num(0), nil); err != wire.ErrUnauthorized {
		t.Fatalf("GetTopics unauthorized: %v", err)
	}
	// Stream-level read grants reach the stream's topics but not the stream list.
	grant(f, wire.Permissions{Streams: []wire.StreamPermissions{{StreamID: 0, ReadStream: true}}})
	for name, err := range map[string]error{
		"stream": second(s.AppendStream(nil, alice, num(0), nil)),
		"topics": second(s.AppendTopics(nil, alice, num(0), nil)),
		"topic":  second(s.AppendTopic(nil, alice, num(0), num(1), nil)),
	} {
		if err != nil {
			t.Errorf("read %s with read_stream: %v", name, err)
		}
	}
	if _, err := s.AppendStreams(nil, alice, nil); err != wire.ErrUnauthorized {
		t.Fatalf("GetStreams with a stream grant: %v", err)
	}
	if _, err := s.AppendStream(nil, alice, num(1), nil); err != wire.ErrUnauthorized {
		t.Fatalf("GetStream of another stream: %v", err)
	}
	// A topic-level grant reaches that topic only.
	grant(f, wire.Permissions{Streams: []wire.StreamPermissions{{StreamID: 0, Topics: []wire.TopicPermissions{{TopicID: 1, ReadTopic: true}}}}})
	if _, err := s.AppendTopic(nil, alice, num(0), num(1), nil); err != nil {
		t.Fatalf("GetTopic with read_topic: %v", err)
	}
	if _, err := s.AppendTopic(nil, alice, num(0), num(0), nil); err != wire.ErrUnauthorized {
		t.Fatalf("GetTopic of another topic: %v", err)
	}
}

func second(_ []byte, err error) error { return err }

func TestReadUsersAndGroups(t *testing.T) {
	f := readFixture(t)
	s := f.s
	var ud wire.UserDetails
	if b, err := s.AppendUser(nil, alice, num(alice)); err != nil || ud.Decode(b) != nil || string(ud.Username) != "alice" {
		t.Fatalf("GetUser of oneself: %v", err)
	}
	if _, err := s.AppendUser(nil, alice, num(0)); err != wire.ErrUnauthorized {
		t.Fatalf("GetUser of root by alice: %v", err)
	}
	if b, err := s.AppendUser(nil, alice, str("ghost")); err != nil || len(b) != 0 {
		t.Fatalf("GetUser of a missing user: %x %v", b, err)
	}
	if _, err := s.AppendUsers(nil, alice); err != wire.ErrUnauthorized {
		t.Fatalf("GetUsers: %v", err)
	}
	b, err := s.AppendUsers(nil, root)
	if list, derr := wire.AppendUsers(nil, b); err != nil || derr != nil || len(list) != 2 {
		t.Fatalf("GetUsers: %v %v %v", list, err, derr)
	}
	grant(f, wire.Permissions{Global: wire.GlobalPermissions{ReadUsers: true}})
	if b, err := s.AppendUser(nil, alice, num(0)); err != nil || ud.Decode(b) != nil || ud.ID != 0 {
		t.Fatalf("GetUser with read_users: %v", err)
	}
	if b, _ := s.AppendUser(nil, alice, num(alice)); ud.Decode(b) != nil || !ud.HasPermissions || !ud.Permissions.Global.ReadUsers {
		t.Fatalf("permissions in GetUser: %+v", ud)
	}

	g := groupTarget(num(0), num(0), num(0))
	var gd wire.ConsumerGroupDetails
	if b, err := s.AppendConsumerGroup(nil, root, g); err != nil || gd.Decode(b) != nil || gd.MembersCount != 1 || len(gd.Members[0].PartitionIDs) != 2 {
		t.Fatalf("GetConsumerGroup: %+v %v", gd, err)
	}
	for _, tc := range []struct {
		target *wire.GroupTarget
		want   error
	}{
		{groupTarget(num(3), num(0), num(0)), wire.ErrStreamIdNotFound},
		{groupTarget(num(0), num(3), num(0)), wire.ErrTopicIdNotFound},
		{groupTarget(num(0), num(0), num(3)), nil},
		{g, wire.ErrUnauthorized},
	} {
		b, err := s.AppendConsumerGroup(nil, alice, tc.target)
		if err != tc.want || len(b) != 0 {
			t.Errorf("GetConsumerGroup %+v: %x %v, want %v", tc.target, b, err, tc.want)
		}
	}
	if _, err := s.AppendConsumerGroups(nil, alice, num(0), num(9)); err != wire.ErrTopicIdNotFound {
		t.Fatalf("GetConsumerGroups of a missing topic: %v", err)
	}
	if _, err := s.AppendConsumerGroups(nil, alice, num(0), num(0)); err != wire.ErrUnauthorized {
		t.Fatalf("GetConsumerGroups unauthorized: %v", err)
	}
	b, err = s.AppendConsumerGroups(nil, root, num(0), num(0))
	if list, derr := wire.AppendConsumerGroups(nil, b); err != nil || derr != nil || len(list) != 1 {
		t.Fatalf("GetConsumerGroups: %v %v %v", list, err, derr)
	}

	// SyncConsumerGroup: the member's assignment; anyone else an empty body.
	var a wire.Assignment
	if b := s.AppendSyncConsumerGroup(nil, wire.Uint128{Lo: 10}, g); a.Decode(b) != nil || a.Generation != 1 || len(a.PartitionIDs) != 2 {
		t.Fatalf("sync: %+v", a)
	}
	if b := s.AppendSyncConsumerGroup(nil, wire.Uint128{Lo: 11}, g); len(b) != 0 {
		t.Fatalf("sync of a non-member: %x", b)
	}

	// GetMe / GetClient: the connection plus its groups.
	var cd wire.ClientDetails
	hdr := wire.ClientHeader{ClientID: 5, UserID: 0, Transport: wire.ClientTransportTCP, Address: []byte("127.0.0.1:1")}
	if b := s.AppendClientDetails(nil, hdr, wire.Uint128{Lo: 10}); cd.Decode(b) != nil || len(cd.Groups) != 1 || cd.Groups[0] != (wire.ClientGroup{}) {
		t.Fatalf("client details: %+v", cd)
	}
	if c := s.Counts(); c != (Counts{Streams: 2, Topics: 2, Partitions: 3, ConsumerGroups: 1}) {
		t.Fatalf("counts %+v", c)
	}
	if !s.CanReadServers(root) || s.CanReadServers(alice) {
		t.Fatal("CanReadServers")
	}
	if id, topic, n, err := s.ResolveTopic(str("s0"), str("t1")); err != nil || id != 0 || topic != 1 || n != 1 {
		t.Fatalf("ResolveTopic: %d %d %d %v", id, topic, n, err)
	}
	if o, ok := s.TopicOptions(0, 0); !ok || o.SegmentSizeBytes != wire.DefaultSegmentSizeBytes {
		t.Fatalf("TopicOptions: %+v", o)
	}
}

func TestReadDispatch(t *testing.T) {
	f := readFixture(t)
	s := f.s
	g := body((&wire.GetConsumerGroup{GroupTarget: *groupTarget(num(0), num(0), num(0))}).Append(nil))
	for _, tc := range []struct {
		name    string
		code    wire.CommandCode
		body    []byte
		empty   bool
		wantErr error
	}{
		{"stream", wire.CodeGetStream, body(num(0).Append(nil)), false, nil},
		{"stream undecodable", wire.CodeGetStream, []byte{1, 4}, true, wire.ErrInvalidCommand},
		{"streams with a body (ignored, as the reference does)", wire.CodeGetStreams, []byte{0, 0, 0, 0}, false, nil},
		{"streams", wire.CodeGetStreams, nil, false, nil},
		{"topic", wire.CodeGetTopic, topicBody(num(0), num(0)), false, nil},
		{"topics", wire.CodeGetTopics, body(num(1).Append(nil)), false, nil},
		{"user", wire.CodeGetUser, body(num(0).Append(nil)), false, nil},
		{"users", wire.CodeGetUsers, nil, false, nil},
		{"tokens", wire.CodeGetPersonalAccessTokens, nil, true, nil},
		{"group", wire.CodeGetConsumerGroup, g, false, nil},
		{"groups", wire.CodeGetConsumerGroups, topicBody(num(0), num(0)), false, nil},
		{"sync non-member", wire.CodeSyncConsumerGroup, g, true, nil},
		{"sync undecodable", wire.CodeSyncConsumerGroup, []byte{9}, true, nil},
		{"options topic", wire.CodeDescribeOptions, []byte{1}, false, nil},
		{"options stream", wire.CodeDescribeOptions, []byte{2}, false, nil},
		{"options bad scope", wire.CodeDescribeOptions, []byte{4}, true, wire.ErrInvalidCommand},
	} {
		out, handled, err := s.Read(nil, tc.code, root, wire.Uint128{Lo: 99}, tc.body, nil)
		if !handled || err != tc.wantErr || (len(out) == 0) != tc.empty {
			t.Errorf("%s: handled %v, %d bytes, err %v", tc.name, handled, len(out), err)
		}
	}
	if _, handled, _ := s.Read(nil, wire.CodeGetMe, root, wire.Uint128{}, nil, nil); handled {
		t.Fatal("GetMe is not a state read")
	}
	descs, err := wire.AppendOptionDescriptors(nil, first(s.Read(nil, wire.CodeDescribeOptions, alice, wire.Uint128{}, []byte{1}, nil)))
	if err != nil || len(descs) != 8 {
		t.Fatalf("catalog: %d %v", len(descs), err)
	}
}

func first(b []byte, _ bool, _ error) []byte { return b }

func TestReadsDoNotAllocate(t *testing.T) {
	f := readFixture(t)
	s := f.s
	buf := make([]byte, 0, 1<<16)
	g := groupTarget(num(0), num(0), num(0))
	if n := testing.AllocsPerRun(100, func() {
		buf, _ = s.AppendTopics(buf[:0], root, num(0), stats)
		buf, _ = s.AppendTopic(buf[:0], root, num(0), num(0), stats)
		buf, _ = s.AppendStreams(buf[:0], root, stats)
		buf = s.AppendSyncConsumerGroup(buf[:0], wire.Uint128{Lo: 10}, g)
		buf, _ = s.AppendConsumerGroup(buf[:0], root, g)
	}); n != 0 {
		t.Fatalf("reads allocate %v times", n)
	}
}

func TestIterators(t *testing.T) {
	f := readFixture(t)
	var names []string
	for st := range f.s.Streams() {
		for tp := range st.Topics() {
			for g := range tp.Groups() {
				names = append(names, st.Name+"/"+tp.Name+"/"+g.Name)
			}
			names = append(names, st.Name+"/"+tp.Name)
		}
	}
	for u := range f.s.Users() {
		names = append(names, u.Username)
	}
	want := []string{"s0/t0/g", "s0/t0", "s0/t1", "iggy", "alice"}
	if len(names) != len(want) {
		t.Fatalf("%v", names)
	}
	for i := range want {
		if names[i] != want[i] {
			t.Fatalf("%v, want %v", names, want)
		}
	}
	for range f.s.Streams() {
		break // early exit must not panic
	}
}
