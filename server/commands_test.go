package server

import (
	"archive/zip"
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/iggy-shard/iggy-shard/client"
	"github.com/iggy-shard/iggy-shard/wire"
)

// TestEveryCommand drives the catalog through client/ against a two-shard server.
func TestEveryCommand(t *testing.T) {
	s := testServer(t, t.TempDir(), 2)
	c := dialRoot(t, s)
	ctx := testContext(t)

	mustOK(t, "Ping", c.Ping(ctx))
	meta, err := c.GetClusterMetadata(ctx)
	mustOK(t, "GetClusterMetadata", err)
	if len(meta.Nodes) != 1 || meta.Nodes[0].Role != wire.ClusterRoleLeader || int(meta.Nodes[0].TCPPort) != s.Addr().Port {
		t.Fatalf("cluster metadata %+v", meta)
	}
	if n := meta.Nodes[0]; string(meta.Name) != "single-node" || string(n.Name) != "iggy-node" ||
		n.QUICPort != 0 || int(n.HTTPPort) != s.HTTPAddr().Port || n.WebSocketPort != 0 {
		t.Fatalf("cluster metadata %s/%s quic %d http %d websocket %d, want single-node/iggy-node, 0 for transports not served and http %d",
			meta.Name, n.Name, n.QUICPort, n.HTTPPort, n.WebSocketPort, s.HTTPAddr().Port)
	}

	// Streams.
	st, err := c.CreateStream(ctx, "s1")
	mustOK(t, "CreateStream", err)
	mustOK(t, "UpdateStream", c.UpdateStream(ctx, client.ID(st.ID), "s1-renamed"))
	got, err := c.GetStream(ctx, client.NameID("s1-renamed"))
	mustOK(t, "GetStream", err)
	if got.ID != st.ID {
		t.Fatalf("GetStream id %d, want %d", got.ID, st.ID)
	}
	streams, err := c.GetStreams(ctx)
	mustOK(t, "GetStreams", err)
	if len(streams) != 1 {
		t.Fatalf("GetStreams: %d streams", len(streams))
	}
	_, err = c.GetStream(ctx, client.ID(999))
	wantCode(t, "GetStream missing", err, wire.ErrStreamIdNotFound)
	wantCode(t, "DeleteStream missing", c.DeleteStream(ctx, client.ID(999)), wire.ErrStreamIdNotFound)

	// Topics and options.
	opts, err := client.TopicOptions{SegmentSizeBytes: 1 << 20}.Block()
	mustOK(t, "TopicOptions", err)
	topic, err := c.CreateTopic(ctx, client.ID(st.ID), "t1", 3, opts)
	mustOK(t, "CreateTopic", err)
	if len(topic.Partitions) != 3 {
		t.Fatalf("CreateTopic: %d partitions", len(topic.Partitions))
	}
	_, err = c.CreateTopic(ctx, client.ID(st.ID), "t1", 1, nil)
	wantCode(t, "CreateTopic duplicate", err, wire.ErrTopicNameAlreadyExists)
	_, err = c.CreateTopic(ctx, client.ID(999), "t1", 1, nil)
	wantCode(t, "CreateTopic missing stream", err, wire.ErrStreamIdNotFound)
	_, err = c.CreateTopic(ctx, client.ID(st.ID), "big", 1001, nil)
	wantCode(t, "CreateTopic too many partitions", err, wire.ErrTooManyPartitions)
	descriptors, err := c.DescribeOptions(ctx, wire.OptionsScopeTopic)
	mustOK(t, "DescribeOptions", err)
	if len(descriptors) == 0 {
		t.Fatal("DescribeOptions: empty topic catalog")
	}
	topics, err := c.GetTopics(ctx, client.ID(st.ID))
	mustOK(t, "GetTopics", err)
	if len(topics) != 1 {
		t.Fatalf("GetTopics: %d", len(topics))
	}
	mustOK(t, "CreatePartitions", c.CreatePartitions(ctx, client.ID(st.ID), client.ID(topic.ID), 2))
	mustOK(t, "DeletePartitions", c.DeletePartitions(ctx, client.ID(st.ID), client.ID(topic.ID), 1))
	td, err := c.GetTopic(ctx, client.ID(st.ID), client.ID(topic.ID))
	mustOK(t, "GetTopic", err)
	if len(td.Partitions) != 4 {
		t.Fatalf("GetTopic: %d partitions, want 4", len(td.Partitions))
	}

	// Messages: balanced, key, explicit; stats reflect them.
	for i := 0; i < 4; i++ {
		conf, err := c.SendMessages(ctx, client.ID(st.ID), client.ID(topic.ID), wire.Partitioning{Kind: wire.PartitioningBalanced}, messages(2, "b"))
		mustOK(t, "SendMessages balanced", err)
		if conf.At(0).PartitionID != uint32(i) {
			t.Fatalf("balanced send %d went to partition %d", i, conf.At(0).PartitionID)
		}
	}
	k1, err := c.SendMessages(ctx, client.ID(st.ID), client.ID(topic.ID), wire.Partitioning{Kind: wire.PartitioningMessagesKey, Key: []byte("order-key-1")}, messages(1, "k"))
	mustOK(t, "SendMessages key", err)
	p1 := k1.At(0).PartitionID
	k2, err := c.SendMessages(ctx, client.ID(st.ID), client.ID(topic.ID), wire.Partitioning{Kind: wire.PartitioningMessagesKey, Key: []byte("order-key-1")}, messages(1, "k"))
	mustOK(t, "SendMessages key", err)
	if k2.At(0).PartitionID != p1 {
		t.Fatalf("same key went to partitions %d and %d", p1, k2.At(0).PartitionID)
	}
	_, err = c.SendMessages(ctx, client.ID(st.ID), client.ID(topic.ID), wire.Partitioning{Kind: wire.PartitioningPartitionID, PartitionID: 77}, messages(1, "x"))
	wantCode(t, "SendMessages missing partition", err, wire.ErrResourceNotFound)
	_, err = c.SendMessages(ctx, client.ID(999), client.ID(topic.ID), wire.Partitioning{Kind: wire.PartitioningBalanced}, messages(1, "x"))
	wantCode(t, "SendMessages missing stream", err, wire.ErrResourceNotFound)

	stats, err := c.GetStats(ctx)
	mustOK(t, "GetStats", err)
	if stats.StreamsCount != 1 || stats.TopicsCount != 1 || stats.PartitionsCount != 4 || stats.MessagesCount != 10 {
		t.Fatalf("stats: streams %d topics %d partitions %d messages %d", stats.StreamsCount, stats.TopicsCount, stats.PartitionsCount, stats.MessagesCount)
	}

	// Every polling strategy.
	poll := func(strategy wire.PollingStrategy, count uint32, autoCommit bool) wire.PolledMessages {
		t.Helper()
		p, err := c.PollMessages(ctx, &wire.PollMessages{Consumer: client.SingleConsumer(client.ID(7)), StreamID: client.ID(st.ID),
			TopicID: client.ID(topic.ID), Partition: wire.SomePartition(0), Strategy: strategy, Count: count, AutoCommit: autoCommit})
		mustOK(t, "PollMessages", err)
		return p
	}
	if p := poll(wire.PollingStrategy{Kind: wire.PollingFirst}, 10, false); p.MessagesCount != 2 {
		t.Fatalf("first: %d messages", p.MessagesCount)
	}
	if p := poll(wire.PollingStrategy{Kind: wire.PollingLast}, 1, false); p.MessagesCount != 1 {
		t.Fatalf("last: %d messages", p.MessagesCount)
	}
	if p := poll(wire.PollingStrategy{Kind: wire.PollingTimestamp}, 10, false); p.MessagesCount != 2 {
		t.Fatalf("timestamp 0: %d messages", p.MessagesCount)
	}
	if p := poll(wire.PollingStrategy{Kind: wire.PollingNext}, 1, true); p.MessagesCount != 1 {
		t.Fatalf("next: %d messages", p.MessagesCount)
	}
	if p := poll(wire.PollingStrategy{Kind: wire.PollingNext}, 10, true); p.MessagesCount != 1 {
		t.Fatalf("next after auto-commit: %d messages, want 1", p.MessagesCount)
	}
	_, err = c.PollMessages(ctx, &wire.PollMessages{Consumer: client.SingleConsumer(client.ID(7)), StreamID: client.ID(st.ID),
		TopicID: client.ID(topic.ID), Partition: wire.SomePartition(50), Strategy: wire.PollingStrategy{Kind: wire.PollingFirst}, Count: 1})
	wantCode(t, "poll missing partition", err, wire.ErrPartitionNotFound)
	_, err = c.PollMessages(ctx, &wire.PollMessages{Consumer: client.SingleConsumer(client.ID(7)), StreamID: client.ID(555),
		TopicID: client.ID(topic.ID), Strategy: wire.PollingStrategy{Kind: wire.PollingFirst}, Count: 1})
	wantCode(t, "poll missing stream", err, wire.ErrStreamIdNotFound)

	// Consumer offsets, both ack levels.
	for _, ack := range []wire.AckLevel{wire.AckNoAck, wire.AckQuorum} {
		mustOK(t, "StoreConsumerOffset", c.StoreConsumerOffset(ctx, &wire.StoreConsumerOffset{Consumer: client.SingleConsumer(client.ID(3)),
			StreamID: client.ID(st.ID), TopicID: client.ID(topic.ID), Partition: wire.SomePartition(0), Offset: uint64(ack), Ack: ack}))
		off, ok, err := c.GetConsumerOffset(ctx, &wire.GetConsumerOffset{Consumer: client.SingleConsumer(client.ID(3)),
			StreamID: client.ID(st.ID), TopicID: client.ID(topic.ID), Partition: wire.SomePartition(0)})
		mustOK(t, "GetConsumerOffset", err)
		if !ok || off.StoredOffset != uint64(ack) {
			t.Fatalf("offset %+v %v, want %d", off, ok, ack)
		}
	}
	err = c.StoreConsumerOffset(ctx, &wire.StoreConsumerOffset{Consumer: client.SingleConsumer(client.ID(3)),
		StreamID: client.ID(st.ID), TopicID: client.ID(topic.ID), Partition: wire.SomePartition(0), Offset: 100})
	wantCode(t, "StoreConsumerOffset beyond the end", err, wire.ErrInvalidOffset)
	mustOK(t, "DeleteConsumerOffset", c.DeleteConsumerOffset(ctx, &wire.DeleteConsumerOffset{Consumer: client.SingleConsumer(client.ID(3)),
		StreamID: client.ID(st.ID), TopicID: client.ID(topic.ID), Partition: wire.SomePartition(0), Ack: wire.AckQuorum}))
	err = c.DeleteConsumerOffset(ctx, &wire.DeleteConsumerOffset{Consumer: client.SingleConsumer(client.ID(3)),
		StreamID: client.ID(st.ID), TopicID: client.ID(topic.ID), Partition: wire.SomePartition(0)})
	wantCode(t, "DeleteConsumerOffset twice", err, wire.ErrConsumerOffsetNotFound)
	_, ok, err := c.GetConsumerOffset(ctx, &wire.GetConsumerOffset{Consumer: client.SingleConsumer(client.ID(3)),
		StreamID: client.ID(999), TopicID: client.ID(topic.ID)})
	if err != nil || ok {
		t.Fatalf("GetConsumerOffset of a missing stream: %v %v, want an empty reply", ok, err)
	}

	// Consumer groups.
	g, err := c.CreateConsumerGroup(ctx, client.ID(st.ID), client.ID(topic.ID), "g1")
	mustOK(t, "CreateConsumerGroup", err)
	_, err = c.CreateConsumerGroup(ctx, client.ID(st.ID), client.ID(topic.ID), "g1")
	wantCode(t, "CreateConsumerGroup duplicate", err, wire.ErrConsumerGroupNameAlreadyExists)
	mustOK(t, "JoinConsumerGroup", c.JoinConsumerGroup(ctx, client.ID(st.ID), client.ID(topic.ID), client.ID(g.ID)))
	a, err := c.SyncConsumerGroup(ctx, client.ID(st.ID), client.ID(topic.ID), client.NameID("g1"))
	mustOK(t, "SyncConsumerGroup", err)
	if len(a.PartitionIDs) != 4 {
		t.Fatalf("sole member owns %v", a.PartitionIDs)
	}
	groups, err := c.GetConsumerGroups(ctx, client.ID(st.ID), client.ID(topic.ID))
	mustOK(t, "GetConsumerGroups", err)
	if len(groups) != 1 {
		t.Fatalf("GetConsumerGroups: %d", len(groups))
	}
	gd, err := c.GetConsumerGroup(ctx, client.ID(st.ID), client.ID(topic.ID), client.ID(g.ID))
	mustOK(t, "GetConsumerGroup", err)
	if gd.MembersCount != 1 {
		t.Fatalf("group members %d", gd.MembersCount)
	}
	p, err := c.PollMessages(ctx, &wire.PollMessages{Consumer: client.GroupConsumer(client.NameID("g1")), StreamID: client.ID(st.ID),
		TopicID: client.ID(topic.ID), Partition: wire.SomePartition(1), Strategy: wire.PollingStrategy{Kind: wire.PollingNext}, Count: 10, AutoCommit: true})
	mustOK(t, "group poll", err)
	if p.PartitionID != 1 || p.MessagesCount == 0 {
		t.Fatalf("group poll: partition %d, %d messages", p.PartitionID, p.MessagesCount)
	}
	off, ok, err := c.GetConsumerOffset(ctx, &wire.GetConsumerOffset{Consumer: client.GroupConsumer(client.ID(g.ID)),
		StreamID: client.ID(st.ID), TopicID: client.ID(topic.ID), Partition: wire.SomePartition(1)})
	mustOK(t, "group GetConsumerOffset", err)
	if !ok || off.StoredOffset != uint64(p.MessagesCount-1) {
		t.Fatalf("group offset %+v %v", off, ok)
	}
	me, err := c.GetMe(ctx)
	mustOK(t, "GetMe", err)
	if me.ConsumerGroupsCount != 1 {
		t.Fatalf("GetMe groups %d", me.ConsumerGroupsCount)
	}
	clients, err := c.GetClients(ctx)
	mustOK(t, "GetClients", err)
	if len(clients) != 1 {
		t.Fatalf("GetClients: %d", len(clients))
	}
	cd, err := c.GetClient(ctx, clients[0].ClientID)
	mustOK(t, "GetClient", err)
	if cd.ClientID != clients[0].ClientID {
		t.Fatalf("GetClient %+v", cd)
	}
	mustOK(t, "LeaveConsumerGroup", c.LeaveConsumerGroup(ctx, client.ID(st.ID), client.ID(topic.ID), client.ID(g.ID)))
	wantCode(t, "LeaveConsumerGroup twice", c.LeaveConsumerGroup(ctx, client.ID(st.ID), client.ID(topic.ID), client.ID(g.ID)), wire.ErrConsumerGroupMemberNotFound)
	mustOK(t, "DeleteConsumerGroup", c.DeleteConsumerGroup(ctx, client.ID(st.ID), client.ID(topic.ID), client.ID(g.ID)))
	wantCode(t, "JoinConsumerGroup deleted", c.JoinConsumerGroup(ctx, client.ID(st.ID), client.ID(topic.ID), client.ID(g.ID)), wire.ErrConsumerGroupIdNotFound)

	// Segments, purges, updates, deletes.
	mustOK(t, "DeleteSegments", c.DeleteSegments(ctx, client.ID(st.ID), client.ID(topic.ID), 0, 1))
	mustOK(t, "UpdateTopic", c.UpdateTopic(ctx, client.ID(st.ID), client.ID(topic.ID), "t1-renamed", nil))
	mustOK(t, "PurgeTopic", c.PurgeTopic(ctx, client.ID(st.ID), client.ID(topic.ID)))
	if p := poll(wire.PollingStrategy{Kind: wire.PollingFirst}, 10, false); p.MessagesCount != 0 {
		t.Fatalf("after purge: %d messages", p.MessagesCount)
	}
	mustOK(t, "PurgeStream", c.PurgeStream(ctx, client.ID(st.ID)))
	mustOK(t, "FlushUnsavedBuffer is unavailable", func() error {
		err := c.FlushUnsavedBuffer(ctx, client.ID(st.ID), client.ID(topic.ID), 0, true)
		if errors.Is(err, wire.ErrFeatureUnavailable) {
			return nil
		}
		return err
	}())
	mustOK(t, "DeleteTopic", c.DeleteTopic(ctx, client.ID(st.ID), client.ID(topic.ID)))
	wantCode(t, "DeleteTopic twice", c.DeleteTopic(ctx, client.ID(st.ID), client.ID(topic.ID)), wire.ErrTopicIdNotFound)
	mustOK(t, "DeleteStream", c.DeleteStream(ctx, client.ID(st.ID)))

	// Snapshot archive.
	zipBytes, err := c.GetSnapshot(ctx, wire.SnapshotStored, wire.SnapshotFilesystemOverview, wire.SnapshotTest)
	mustOK(t, "GetSnapshot", err)
	if !bytes.HasPrefix(zipBytes, []byte("PK")) {
		t.Fatalf("GetSnapshot is not a zip: % x", zipBytes[:min(8, len(zipBytes))])
	}

	// Unknown read codes get a status and leave the session usable.
	for i := 0; i < 5; i++ {
		_, err := c.SendRaw(ctx, wire.CommandCode(60000), nil)
		if err == nil {
			t.Fatal("unknown code 60000 answered with success")
		}
	}
	mustOK(t, "Ping after unknown codes", c.Ping(ctx))
}

// TestUsersTokensAndPermissions: users, PATs (with login and expiry), and denials.
func TestUsersTokensAndPermissions(t *testing.T) {
	s := testServer(t, t.TempDir(), 2)
	root := dialRoot(t, s)
	ctx := testContext(t)

	st, err := root.CreateStream(ctx, "secure")
	mustOK(t, "CreateStream", err)
	_, err = root.CreateTopic(ctx, client.ID(st.ID), "t", 1, nil)
	mustOK(t, "CreateTopic", err)

	u, err := root.CreateUser(ctx, "alice", "secret1", wire.UserActive, nil)
	mustOK(t, "CreateUser", err)
	_, err = root.CreateUser(ctx, "alice", "secret1", wire.UserActive, nil)
	wantCode(t, "CreateUser duplicate", err, wire.ErrUserAlreadyExists)
	_, err = root.CreateUser(ctx, "a-username-that-is-longer-than-fifty-bytes-allowed-x", "secret1", wire.UserActive, nil)
	wantCode(t, "CreateUser oversized name", err, wire.ErrInvalidUsername)
	_, err = root.CreateUser(ctx, "ab", "secret1", wire.UserActive, nil)
	wantCode(t, "CreateUser short name", err, wire.ErrInvalidUsername)
	users, err := root.GetUsers(ctx)
	mustOK(t, "GetUsers", err)
	if len(users) != 2 {
		t.Fatalf("GetUsers: %d", len(users))
	}
	wantCode(t, "DeleteUser root", root.DeleteUser(ctx, client.ID(0)), wire.ErrCannotDeleteUser)

	alice := dialAs(t, s, "alice", "secret1")
	// Denials: metadata writes as committed results, reads and partition ops as statuses.
	_, err = alice.CreateStream(ctx, "mine")
	wantCode(t, "CreateStream without permission", err, wire.ErrUnauthorized)
	_, err = alice.GetStreams(ctx)
	wantCode(t, "GetStreams without permission", err, wire.ErrUnauthorized)
	_, err = alice.SendMessages(ctx, client.ID(st.ID), client.ID(0), wire.Partitioning{Kind: wire.PartitioningBalanced}, messages(1, "x"))
	wantCode(t, "SendMessages without permission", err, wire.ErrUnauthorized)
	_, err = alice.PollMessages(ctx, &wire.PollMessages{Consumer: client.SingleConsumer(client.ID(1)), StreamID: client.ID(st.ID),
		TopicID: client.ID(0), Strategy: wire.PollingStrategy{Kind: wire.PollingFirst}, Count: 1})
	wantCode(t, "PollMessages without permission", err, wire.ErrUnauthorized)
	_, err = alice.GetStats(ctx)
	wantCode(t, "GetStats without permission", err, wire.ErrUnauthorized)
	_, err = alice.GetUser(ctx, client.ID(u.ID))
	mustOK(t, "GetUser of oneself", err)

	// Grant send and poll on the stream; alice can now produce and consume.
	perms := &wire.Permissions{Streams: []wire.StreamPermissions{{StreamID: st.ID, SendMessages: true, PollMessages: true}}}
	mustOK(t, "UpdatePermissions", root.UpdatePermissions(ctx, client.ID(u.ID), perms))
	_, err = alice.SendMessages(ctx, client.ID(st.ID), client.ID(0), wire.Partitioning{Kind: wire.PartitioningBalanced}, messages(1, "x"))
	mustOK(t, "SendMessages with permission", err)

	mustOK(t, "ChangePassword", alice.ChangePassword(ctx, client.ID(u.ID), "secret1", "secret2"))
	wantCode(t, "ChangePassword wrong current", alice.ChangePassword(ctx, client.ID(u.ID), "nope", "secret3"), wire.ErrInvalidCredentials)

	// Personal access tokens.
	token, err := alice.CreatePersonalAccessToken(ctx, "ci", 0)
	mustOK(t, "CreatePersonalAccessToken", err)
	tokens, err := alice.GetPersonalAccessTokens(ctx)
	mustOK(t, "GetPersonalAccessTokens", err)
	if len(tokens) != 1 {
		t.Fatalf("tokens: %d", len(tokens))
	}
	pat, err := client.Dial(ctx, s.Addr().String(), client.WithPersonalAccessToken(token))
	mustOK(t, "login with token", err)
	if id, _ := pat.Identity(); id.UserID != u.ID {
		t.Fatalf("token logged in as %d, want %d", id.UserID, u.ID)
	}
	pat.Close()
	_, err = client.Dial(ctx, s.Addr().String(), client.WithPersonalAccessToken("not-a-token-at-all-xxxxxxxxxxxxxxxxxxxxxxxx"))
	wantCode(t, "login with an unknown token", err, wire.ErrInvalidPersonalAccessToken)
	mustOK(t, "DeletePersonalAccessToken", alice.DeletePersonalAccessToken(ctx, "ci"))
	wantCode(t, "DeletePersonalAccessToken twice", alice.DeletePersonalAccessToken(ctx, "ci"), wire.ErrResourceNotFound)

	// Inactive users cannot log in; deleted users neither.
	mustOK(t, "UpdateUser", root.UpdateUser(ctx, client.ID(u.ID), client.UserUpdate{Status: wire.UserInactive}))
	_, err = client.Dial(ctx, s.Addr().String(), client.WithCredentials("alice", "secret2"))
	wantCode(t, "login of an inactive user", err, wire.ErrInvalidCredentials)
	mustOK(t, "DeleteUser", root.DeleteUser(ctx, client.ID(u.ID)))
	_, err = client.Dial(ctx, s.Addr().String(), client.WithCredentials("alice", "secret2"))
	wantCode(t, "login of a deleted user", err, wire.ErrInvalidCredentials)
}

// TestBadInputGetsItsCode sends malformed requests through the raw path: each gets
// its documented code, and the session stays usable.
func TestBadInputGetsItsCode(t *testing.T) {
	s := testServer(t, t.TempDir(), 2)
	c := dialRoot(t, s)
	other := dialRoot(t, s)
	ctx := testContext(t)
	_, err := c.CreateStream(ctx, "s")
	mustOK(t, "CreateStream", err)
	_, err = c.CreateTopic(ctx, client.NameID("s"), "t", 1, nil)
	mustOK(t, "CreateTopic", err)

	cases := []struct {
		name string
		code wire.CommandCode
		body []byte
		want wire.ErrorCode
	}{
		{"bad identifier kind", wire.CodeGetStream, []byte{9, 1, 0}, wire.ErrInvalidCommand},
		{"identifier longer than the body", wire.CodeGetStream, []byte{2, 200, 'a'}, wire.ErrInvalidCommand},
		{"empty stream name", wire.CodeCreateStream, []byte{0}, wire.ErrInvalidCommand},
		{"stream name longer than the body", wire.CodeCreateStream, []byte{255, 'a', 'b'}, wire.ErrInvalidCommand},
		{"describe options of an unknown scope", wire.CodeDescribeOptions, []byte{9}, wire.ErrInvalidCommand},
		{"flush unsaved buffer", wire.CodeFlushUnsavedBuffer, nil, wire.ErrFeatureUnavailable},
		{"send to a namespace that does not decode", wire.CodeSendMessages, []byte{1, 2, 3}, wire.ErrResourceNotFound},
		{"store an offset with a body that does not decode", wire.CodeStoreConsumerOffset, []byte{1}, wire.ErrResourceNotFound},
	}
	for _, tc := range cases {
		_, err := c.SendRaw(ctx, tc.code, tc.body)
		wantCode(t, tc.name, err, tc.want)
		mustOK(t, tc.name+": ping after", c.Ping(ctx))
	}

	// A poll that does not decode gets the empty 16-byte reply.
	reply, err := c.SendRaw(ctx, wire.CodePollMessages, []byte{1, 2})
	mustOK(t, "undecodable poll", err)
	if len(reply) != wire.PolledMessagesPrefixSize {
		t.Fatalf("undecodable poll: %d bytes", len(reply))
	}

	// A batch whose checksum does not match is refused with its code.
	var bb wire.BatchBuilder
	bb.Reset(nil)
	mustOK(t, "batch", bb.Append(wire.Uint128{Lo: 1}, 1, []byte("payload"), nil))
	batch, err := bb.Finish()
	mustOK(t, "batch", err)
	batch[len(batch)-1] ^= 0xff // a payload byte: the frame and batch checksums no longer match
	_, err = c.SendBatch(ctx, client.NameID("s"), client.NameID("t"), wire.Partitioning{Kind: wire.PartitioningPartitionID}, batch)
	if err == nil {
		t.Fatal("a corrupt batch was stored")
	}
	var code wire.ErrorCode
	if !errors.As(err, &code) || (code != wire.ErrInvalidMessageChecksum && code != wire.ErrInvalidBatchChecksum) {
		t.Fatalf("corrupt batch: %v, want 4027 or 4039", err)
	}
	polled, err := c.PollMessages(ctx, &wire.PollMessages{Consumer: client.SingleConsumer(client.ID(1)), StreamID: client.NameID("s"),
		TopicID: client.NameID("t"), Strategy: wire.PollingStrategy{Kind: wire.PollingFirst}, Count: 10})
	mustOK(t, "poll", err)
	if polled.MessagesCount != 0 {
		t.Fatalf("%d messages after a refused batch", polled.MessagesCount)
	}
	// Other clients are unaffected.
	_, err = other.GetStreams(ctx)
	mustOK(t, "another client", err)

	// Logout ends the session: the connection stays listed by GetClients, anonymous
	// again (user id 0xFFFFFFFF); a new login starts another session.
	mustOK(t, "Logout", c.Logout(ctx))
	clients, err := other.GetClients(ctx)
	mustOK(t, "GetClients", err)
	anonymous := 0
	for _, cl := range clients {
		if cl.UserID == wire.ClientUserIDNone {
			anonymous++
		}
	}
	if len(clients) != 2 || anonymous != 1 {
		t.Fatalf("GetClients after a logout: %+v, want 2 clients, 1 anonymous", clients)
	}
	_, err = c.GetStreams(ctx)
	wantCode(t, "GetStreams after logout", err, wire.ErrUnauthenticated)
	_, err = c.Login(ctx, "iggy", "iggy")
	mustOK(t, "Login again", err)
	_, err = c.GetStreams(ctx)
	mustOK(t, "GetStreams after a new login", err)
}

// TestPersonalAccessTokenExpiry: a token with a lifetime logs in until it expires,
// then its login is refused with InvalidToken. The server's clock is moved, not
// waited for.
func TestPersonalAccessTokenExpiry(t *testing.T) {
	clock := newTestClock()
	cfg := testConfig(t.TempDir(), 1)
	cfg.clock = clock.now
	s := startTestServer(t, cfg)
	c := dialRoot(t, s)
	ctx := testContext(t)
	token, err := c.CreatePersonalAccessToken(ctx, "short", 60_000_000) // 60 s
	mustOK(t, "CreatePersonalAccessToken", err)
	login := func() error {
		pat, err := client.Dial(ctx, s.Addr().String(), client.WithPersonalAccessToken(token))
		if err == nil {
			pat.Close()
		}
		return err
	}
	mustOK(t, "login with the fresh token", login())
	clock.advance(s, 59*time.Second)
	mustOK(t, "login a second before the expiry", login())
	clock.advance(s, 2*time.Second)
	wantCode(t, "login with the expired token", login(), wire.ErrInvalidPersonalAccessToken)
}

// TestSnapshotArchive: GetSnapshot returns a zip with one <type>.txt per section,
// in the compression asked for; unknown codes are refused with a status.
func TestSnapshotArchive(t *testing.T) {
	s := testServer(t, t.TempDir(), 1)
	c := dialRoot(t, s)
	ctx := testContext(t)
	archive, err := c.GetSnapshot(ctx, wire.SnapshotDeflated, wire.SnapshotAll)
	mustOK(t, "GetSnapshot all", err)
	zr, err := zip.NewReader(bytes.NewReader(archive), int64(len(archive)))
	mustOK(t, "zip", err)
	names := map[string]bool{}
	for _, f := range zr.File {
		names[f.Name] = true
		if f.Method != zip.Deflate {
			t.Errorf("%s stored with method %d, want deflate", f.Name, f.Method)
		}
	}
	for _, want := range []string{"filesystem_overview.txt", "resource_usage.txt", "server_config.txt"} {
		if !names[want] {
			t.Errorf("archive lacks %s: %v", want, names)
		}
	}
	if names["test.txt"] {
		t.Error("All includes the test section")
	}
	_, err = c.SendRaw(ctx, wire.CodeGetSnapshot, []byte{9, 1, 1})
	wantCode(t, "unknown compression", err, wire.ErrInvalidCommand)
	_, err = c.CreateUser(ctx, "alice", "alicepw", wire.UserActive, nil)
	mustOK(t, "CreateUser", err)
	a := dialAs(t, s, "alice", "alicepw")
	_, err = a.GetSnapshot(ctx, wire.SnapshotStored, wire.SnapshotTest)
	wantCode(t, "snapshot without permission", err, wire.ErrUnauthorized)
}
