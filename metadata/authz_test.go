package metadata

import (
	"slices"
	"testing"

	"github.com/iggy-shard/iggy-shard/wire"
)

// singleGrants are every one-flag permission set: ten global flags, six per-stream
// flags on stream 3 and four per-topic flags on topic 3/5.
func singleGrants() map[string]wire.Permissions {
	g := map[string]wire.Permissions{}
	globals := []struct {
		name string
		set  func(*wire.GlobalPermissions)
	}{
		{"g.manage_servers", func(p *wire.GlobalPermissions) { p.ManageServers = true }},
		{"g.read_servers", func(p *wire.GlobalPermissions) { p.ReadServers = true }},
		{"g.manage_users", func(p *wire.GlobalPermissions) { p.ManageUsers = true }},
		{"g.read_users", func(p *wire.GlobalPermissions) { p.ReadUsers = true }},
		{"g.manage_streams", func(p *wire.GlobalPermissions) { p.ManageStreams = true }},
		{"g.read_streams", func(p *wire.GlobalPermissions) { p.ReadStreams = true }},
		{"g.manage_topics", func(p *wire.GlobalPermissions) { p.ManageTopics = true }},
		{"g.read_topics", func(p *wire.GlobalPermissions) { p.ReadTopics = true }},
		{"g.poll_messages", func(p *wire.GlobalPermissions) { p.PollMessages = true }},
		{"g.send_messages", func(p *wire.GlobalPermissions) { p.SendMessages = true }},
	}
	for _, x := range globals {
		var p wire.Permissions
		x.set(&p.Global)
		g[x.name] = p
	}
	streams := []struct {
		name string
		set  func(*wire.StreamPermissions)
	}{
		{"s.manage_stream", func(p *wire.StreamPermissions) { p.ManageStream = true }},
		{"s.read_stream", func(p *wire.StreamPermissions) { p.ReadStream = true }},
		{"s.manage_topics", func(p *wire.StreamPermissions) { p.ManageTopics = true }},
		{"s.read_topics", func(p *wire.StreamPermissions) { p.ReadTopics = true }},
		{"s.poll_messages", func(p *wire.StreamPermissions) { p.PollMessages = true }},
		{"s.send_messages", func(p *wire.StreamPermissions) { p.SendMessages = true }},
	}
	for _, x := range streams {
		sp := wire.StreamPermissions{StreamID: 3}
		x.set(&sp)
		g[x.name] = wire.Permissions{Streams: []wire.StreamPermissions{sp}}
	}
	topics := []struct {
		name string
		set  func(*wire.TopicPermissions)
	}{
		{"t.manage_topic", func(p *wire.TopicPermissions) { p.ManageTopic = true }},
		{"t.read_topic", func(p *wire.TopicPermissions) { p.ReadTopic = true }},
		{"t.poll_messages", func(p *wire.TopicPermissions) { p.PollMessages = true }},
		{"t.send_messages", func(p *wire.TopicPermissions) { p.SendMessages = true }},
	}
	for _, x := range topics {
		tp := wire.TopicPermissions{TopicID: 5}
		x.set(&tp)
		g[x.name] = wire.Permissions{Streams: []wire.StreamPermissions{{StreamID: 3, Topics: []wire.TopicPermissions{tp}}}}
	}
	return g
}

// TestAuthorizationMatrix checks every rule of authz.go (the reference's, apache/iggy
// core/metadata/src/permissioner/) against every one-flag grant: a rule passes exactly
// for the grants the table lists.
func TestAuthorizationMatrix(t *testing.T) {
	const stream, topic = 3, 5
	readTopics := []string{"g.read_streams", "g.manage_streams", "g.manage_topics", "g.read_topics",
		"s.manage_stream", "s.read_stream", "s.manage_topics", "s.read_topics"}
	createTopic := []string{"g.manage_streams", "g.manage_topics", "s.manage_stream", "s.manage_topics"}
	rules := []struct {
		name  string
		check func(access) bool
		pass  []string
	}{
		{"servers", access.readServers, []string{"g.manage_servers", "g.read_servers"}},
		{"read users", access.readUsers, []string{"g.manage_users", "g.read_users"}},
		{"manage users", access.manageUsers, []string{"g.manage_users"}},
		{"GetStreams", access.readStreams, []string{"g.manage_streams", "g.read_streams"}},
		{"GetStream", func(a access) bool { return a.readStream(stream) },
			[]string{"g.manage_streams", "g.read_streams", "s.manage_stream", "s.read_stream"}},
		{"CreateStream", access.createStream, []string{"g.manage_streams"}},
		{"UpdateStream", func(a access) bool { return a.manageStream(stream) }, []string{"g.manage_streams", "s.manage_stream"}},
		{"GetTopics", func(a access) bool { return a.readTopics(stream) }, readTopics},
		{"GetTopic", func(a access) bool { return a.readTopic(stream, topic) }, append(slices.Clone(readTopics), "t.manage_topic", "t.read_topic")},
		{"CreateTopic", func(a access) bool { return a.createTopic(stream) }, createTopic},
		{"UpdateTopic", func(a access) bool { return a.manageTopic(stream, topic) }, append(slices.Clone(createTopic), "t.manage_topic")},
		{"Poll", func(a access) bool { return a.poll(stream, topic) }, []string{
			"g.poll_messages", "g.read_topics", "g.manage_topics", "g.read_streams", "g.manage_streams",
			"s.poll_messages", "s.manage_stream", "s.read_stream", "s.manage_topics", "s.read_topics",
			"t.manage_topic", "t.read_topic", "t.poll_messages"}},
		{"Send", func(a access) bool { return a.send(stream, topic) }, []string{
			"g.send_messages", "g.manage_streams", "g.manage_topics",
			"s.send_messages", "s.manage_stream", "s.manage_topics",
			"t.manage_topic", "t.send_messages"}},
	}
	grants := singleGrants()
	for _, r := range rules {
		if r.check(access{}) {
			t.Errorf("%s passes without permissions", r.name)
		}
		if !r.check(access{root: true}) {
			t.Errorf("%s refuses root", r.name)
		}
		for name, p := range grants {
			if got, want := r.check(access{p: &p}), slices.Contains(r.pass, name); got != want {
				t.Errorf("%s with %s: %v, want %v", r.name, name, got, want)
			}
		}
	}
	// Grants on another stream or topic id grant nothing here.
	other := wire.Permissions{Streams: []wire.StreamPermissions{
		{StreamID: 2, ManageStream: true, Topics: []wire.TopicPermissions{{TopicID: 5, ManageTopic: true}}},
		{StreamID: 3, Topics: []wire.TopicPermissions{{TopicID: 4, ManageTopic: true, SendMessages: true}}},
	}}
	for _, r := range rules {
		if r.check(access{p: &other}) {
			t.Errorf("%s passes on another stream's or topic's grant", r.name)
		}
	}
}

func TestNormalizePermissions(t *testing.T) {
	p := wire.Permissions{Streams: []wire.StreamPermissions{
		{StreamID: 9, ReadStream: true},
		{StreamID: 1, Topics: []wire.TopicPermissions{{TopicID: 4}, {TopicID: 2, ReadTopic: true}, {TopicID: 4, ManageTopic: true}}},
		{StreamID: 9, ManageStream: true},
	}}
	normalizePermissions(&p)
	if len(p.Streams) != 2 || p.Streams[0].StreamID != 1 || !p.Streams[1].ManageStream || p.Streams[1].ReadStream {
		t.Fatalf("streams %+v", p.Streams)
	}
	if topics := p.Streams[0].Topics; len(topics) != 2 || topics[0].TopicID != 2 || !topics[1].ManageTopic {
		t.Fatalf("topics %+v", topics)
	}
	if !permissionsCanonical(&p) {
		t.Fatal("not canonical after normalizing")
	}
}

func TestPartitionPlaneChecks(t *testing.T) {
	f := newFixture(t)
	setupUsers(f)
	grant(f, wire.Permissions{Streams: []wire.StreamPermissions{{StreamID: 0, Topics: []wire.TopicPermissions{{TopicID: 1, PollMessages: true}}}}})
	if !f.s.CanPoll(alice, 0, 1) || f.s.CanPoll(alice, 0, 2) || f.s.CanSend(alice, 0, 1) || !f.s.CanSend(root, 0, 1) {
		t.Fatal("poll/send checks")
	}
	if f.s.CanPoll(404, 0, 1) {
		t.Fatal("an unknown user may poll")
	}
}

func TestAdmit(t *testing.T) {
	f := newFixture(t)
	f.must(wire.OperationCreateStream, root, createStream("s"))
	f.must(wire.OperationCreateTopic, root, createTopic(num(0), 1, "t", option("segment_size", wire.HeaderUint64, u64le(2<<20))))
	anyOption := option("k", wire.HeaderString, []byte("v"))
	updateTopic := func(options []byte) []byte {
		return body((&wire.UpdateTopic{StreamID: num(0), TopicID: num(0), Name: []byte("t"), Options: options}).Append(nil))
	}
	for _, tc := range []struct {
		name string
		op   wire.Operation
		body []byte
		want error
	}{
		{"create stream", wire.OperationCreateStream, createStream("x"), nil},
		{"create stream with option", wire.OperationCreateStream, body((&wire.CreateStream{Name: []byte("x"), Options: anyOption}).Append(nil)), wire.ErrUnsupportedOptionKey},
		{"create stream malformed block", wire.OperationCreateStream, append(createStream("x"), 2, 0), wire.ErrInvalidCommand},
		{"update stream with option", wire.OperationUpdateStream, body((&wire.UpdateStream{StreamID: num(0), Name: []byte("x"), Options: anyOption}).Append(nil)), wire.ErrUnsupportedOptionKey},
		{"create topic", wire.OperationCreateTopic, createTopic(num(0), 1000, "x", nil), nil},
		{"create topic 1001 partitions", wire.OperationCreateTopic, createTopic(num(0), 1001, "x", nil), wire.ErrTooManyPartitions},
		{"create topic unknown key", wire.OperationCreateTopic, createTopic(num(0), 1, "x", anyOption), wire.ErrUnsupportedOptionKey},
		{"create topic bad value", wire.OperationCreateTopic, createTopic(num(0), 1, "x", option("messages_required_to_save", wire.HeaderUint32, []byte{0, 0, 0, 0})), wire.ErrInvalidOptionValue},
		{"create topic size below segment", wire.OperationCreateTopic, createTopic(num(0), 1, "x", option("max_topic_size", wire.HeaderUint64, u64le(1000))), wire.ErrInvalidTopicSize},
		{"update topic create-only key", wire.OperationUpdateTopic, updateTopic(option("segment_size", wire.HeaderUint64, u64le(1<<20))), wire.ErrUnsupportedOptionKey},
		{"update topic size below its segment", wire.OperationUpdateTopic, updateTopic(option("max_topic_size", wire.HeaderUint64, u64le(1<<20))), wire.ErrInvalidTopicSize},
		{"update topic size", wire.OperationUpdateTopic, updateTopic(option("max_topic_size", wire.HeaderUint64, u64le(2<<20))), nil},
		{"create partitions 0", wire.OperationCreatePartitions, partitionsBody(num(0), num(0), 0), wire.ErrTooManyPartitions},
		{"delete partitions 1001", wire.OperationDeletePartitions, partitionsBody(num(0), num(0), 1001), wire.ErrTooManyPartitions},
		{"create user with option", wire.OperationCreateUser, body((&wire.CreateUser{Username: []byte("abc"), Password: []byte("pw"), Status: 1, Options: anyOption}).Append(nil)), wire.ErrUnsupportedOptionKey},
		{"update user with option", wire.OperationUpdateUser, body((&wire.UpdateUser{UserID: num(0), Options: anyOption}).Append(nil)), wire.ErrUnsupportedOptionKey},
		{"delete stream", wire.OperationDeleteStream, body(num(0).Append(nil)), nil},
		{"delete stream malformed", wire.OperationPurgeStream, []byte{1, 4, 0}, wire.ErrInvalidCommand},
		{"join malformed", wire.OperationJoinConsumerGroup, topicBody(num(0), num(0)), wire.ErrInvalidCommand},
		{"not a metadata write", wire.OperationSendMessages, nil, wire.ErrInvalidCommand},
	} {
		if got := f.s.Admit(tc.op, root, tc.body); got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
}
