package client

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/iggy-shard/iggy-shard/wire"
)

// Every command method sends its own code with the right operation, a body the
// server's decoder for that code accepts, and decodes the reply a server gives.
func TestEveryCommandOnTheWire(t *testing.T) {
	perms := &wire.Permissions{Global: wire.GlobalPermissions{ReadStreams: true},
		Streams: []wire.StreamPermissions{{StreamID: 1, PollMessages: true, Topics: []wire.TopicPermissions{{TopicID: 2, ReadTopic: true}}}}}
	user := (&wire.UserDetails{UserHeader: wire.UserHeader{ID: 5, Status: 1, Username: []byte("ann")}}).Append(nil)
	stream := (&wire.StreamDetails{StreamHeader: wire.StreamHeader{ID: 1, Name: []byte("s")}}).Append(nil)
	topic := (&wire.TopicDetails{TopicHeader: wire.TopicHeader{ID: 2, Name: []byte("t"), PartitionsCount: 1},
		Partitions: []wire.PartitionInfo{{ID: 0}}}).Append(nil)
	group := (&wire.ConsumerGroupDetails{ConsumerGroupHeader: wire.ConsumerGroupHeader{ID: 3, Name: []byte("g"), MembersCount: 1},
		Members: []wire.ConsumerGroupMember{{ID: 0, PartitionIDs: []uint32{0}}}}).Append(nil)
	client := (&wire.ClientDetails{ClientHeader: wire.ClientHeader{ClientID: 9, Address: []byte("127.0.0.1:1")}}).Append(nil)
	stats := (&wire.Stats{Hostname: []byte("h")}).Append(nil)
	zip := append([]byte("PK"), make([]byte, 20)...)
	offset := (&wire.ConsumerOffset{PartitionID: 0, CurrentOffset: 9, StoredOffset: 4}).Append(nil)
	ids := wire.GroupTarget{StreamID: ID(1), TopicID: NameID("t"), GroupID: ID(3)}
	s1, t2, g3 := ids.StreamID, ids.TopicID, ids.GroupID

	cases := []struct {
		code    wire.CommandCode
		payload []byte
		call    func(ctx context.Context, c *Client) error
	}{
		{wire.CodePing, nil, func(ctx context.Context, c *Client) error { return c.Ping(ctx) }},
		{wire.CodeGetStats, stats, func(ctx context.Context, c *Client) error {
			s, err := c.GetStats(ctx)
			return check(err, s != nil && string(s.Hostname) == "h")
		}},
		{wire.CodeGetSnapshot, zip, func(ctx context.Context, c *Client) error {
			z, err := c.GetSnapshot(ctx, wire.SnapshotDeflated, wire.SnapshotProcessList, wire.SnapshotServerLogs)
			return check(err, len(z) == len(zip))
		}},
		{wire.CodeGetClusterMetadata, clusterPayload(), func(ctx context.Context, c *Client) error {
			m, err := c.GetClusterMetadata(ctx)
			return check(err, m != nil && len(m.Nodes) == 1 && m.Nodes[0].TCPPort == 8090)
		}},
		{wire.CodeDescribeOptions, wire.AppendTopicOptionsCatalogReply(nil), func(ctx context.Context, c *Client) error {
			d, err := c.DescribeOptions(ctx, wire.OptionsScopeTopic)
			return check(err, len(d) == 8)
		}},
		{wire.CodeGetMe, client, func(ctx context.Context, c *Client) error {
			d, err := c.GetMe(ctx)
			return check(err, d != nil && d.ClientID == 9)
		}},
		{wire.CodeGetClient, client, func(ctx context.Context, c *Client) error {
			d, err := c.GetClient(ctx, 9)
			return check(err, d != nil && string(d.Address) == "127.0.0.1:1")
		}},
		{wire.CodeGetClients, wire.AppendClientsReply(nil, []wire.ClientHeader{{ClientID: 1}, {ClientID: 2}}), func(ctx context.Context, c *Client) error {
			l, err := c.GetClients(ctx)
			return check(err, len(l) == 2)
		}},
		{wire.CodeGetUser, user, func(ctx context.Context, c *Client) error {
			u, err := c.GetUser(ctx, NameID("ann"))
			return check(err, u != nil && u.ID == 5)
		}},
		{wire.CodeGetUsers, wire.AppendUsersReply(nil, []wire.UserHeader{{Username: []byte("a")}}), func(ctx context.Context, c *Client) error {
			l, err := c.GetUsers(ctx)
			return check(err, len(l) == 1)
		}},
		{wire.CodeCreateUser, user, func(ctx context.Context, c *Client) error {
			u, err := c.CreateUser(ctx, "ann", "secret", wire.UserActive, perms)
			return check(err, u != nil && string(u.Username) == "ann")
		}},
		{wire.CodeDeleteUser, nil, func(ctx context.Context, c *Client) error { return c.DeleteUser(ctx, ID(5)) }},
		{wire.CodeUpdateUser, nil, func(ctx context.Context, c *Client) error {
			return c.UpdateUser(ctx, ID(5), UserUpdate{Username: "bob", Status: wire.UserInactive})
		}},
		{wire.CodeUpdatePermissions, nil, func(ctx context.Context, c *Client) error { return c.UpdatePermissions(ctx, ID(5), perms) }},
		{wire.CodeChangePassword, nil, func(ctx context.Context, c *Client) error { return c.ChangePassword(ctx, ID(5), "old", "new") }},
		{wire.CodeGetPersonalAccessTokens, wire.AppendPersonalAccessTokensReply(nil, []wire.PatEntry{{Name: []byte("p")}}), func(ctx context.Context, c *Client) error {
			l, err := c.GetPersonalAccessTokens(ctx)
			return check(err, len(l) == 1 && string(l[0].Name) == "p")
		}},
		{wire.CodeCreatePersonalAccessToken, (&wire.CreatedToken{Token: []byte("secret-token")}).Append(nil), func(ctx context.Context, c *Client) error {
			tok, err := c.CreatePersonalAccessToken(ctx, "p", wire.TokenExpiryNever)
			return check(err, tok == "secret-token")
		}},
		{wire.CodeDeletePersonalAccessToken, nil, func(ctx context.Context, c *Client) error { return c.DeletePersonalAccessToken(ctx, "p") }},
		{wire.CodeFlushUnsavedBuffer, nil, func(ctx context.Context, c *Client) error { return c.FlushUnsavedBuffer(ctx, s1, t2, 0, true) }},
		{wire.CodeGetConsumerOffset, offset, func(ctx context.Context, c *Client) error {
			o, found, err := c.GetConsumerOffset(ctx, &wire.GetConsumerOffset{Consumer: GroupConsumer(g3), StreamID: s1, TopicID: t2})
			return check(err, found && o.StoredOffset == 4)
		}},
		{wire.CodeStoreConsumerOffset, nil, func(ctx context.Context, c *Client) error {
			return c.StoreConsumerOffset(ctx, &wire.StoreConsumerOffset{Consumer: SingleConsumer(ID(1)), StreamID: s1, TopicID: t2,
				Partition: wire.SomePartition(0), Offset: 3, Ack: wire.AckNoAck})
		}},
		{wire.CodeDeleteConsumerOffset, nil, func(ctx context.Context, c *Client) error {
			return c.DeleteConsumerOffset(ctx, &wire.DeleteConsumerOffset{Consumer: SingleConsumer(ID(1)), StreamID: s1, TopicID: t2, Ack: wire.AckQuorum})
		}},
		{wire.CodeGetStream, stream, func(ctx context.Context, c *Client) error {
			s, err := c.GetStream(ctx, s1)
			return check(err, s != nil && s.ID == 1)
		}},
		{wire.CodeGetStreams, wire.AppendStreamsReply(nil, []wire.StreamHeader{{Name: []byte("a")}, {Name: []byte("b")}}), func(ctx context.Context, c *Client) error {
			l, err := c.GetStreams(ctx)
			return check(err, len(l) == 2)
		}},
		{wire.CodeCreateStream, stream, func(ctx context.Context, c *Client) error {
			s, err := c.CreateStream(ctx, "s")
			return check(err, s != nil && string(s.Name) == "s")
		}},
		{wire.CodeDeleteStream, nil, func(ctx context.Context, c *Client) error { return c.DeleteStream(ctx, s1) }},
		{wire.CodeUpdateStream, nil, func(ctx context.Context, c *Client) error { return c.UpdateStream(ctx, s1, "renamed") }},
		{wire.CodePurgeStream, nil, func(ctx context.Context, c *Client) error { return c.PurgeStream(ctx, s1) }},
		{wire.CodeGetTopic, topic, func(ctx context.Context, c *Client) error {
			tp, err := c.GetTopic(ctx, s1, t2)
			return check(err, tp != nil && tp.ID == 2 && len(tp.Partitions) == 1)
		}},
		{wire.CodeGetTopics, wire.AppendTopicsReply(nil, []wire.TopicHeader{{Name: []byte("t")}}), func(ctx context.Context, c *Client) error {
			l, err := c.GetTopics(ctx, s1)
			return check(err, len(l) == 1)
		}},
		{wire.CodeCreateTopic, topic, func(ctx context.Context, c *Client) error {
			options, err := TopicOptions{CompressionAlgorithm: "gzip"}.Block()
			if err != nil {
				return err
			}
			tp, err := c.CreateTopic(ctx, s1, "t", 1, options)
			return check(err, tp != nil && tp.PartitionsCount == 1)
		}},
		{wire.CodeDeleteTopic, nil, func(ctx context.Context, c *Client) error { return c.DeleteTopic(ctx, s1, t2) }},
		{wire.CodeUpdateTopic, nil, func(ctx context.Context, c *Client) error {
			options, err := TopicOptions{MaxTopicSizeBytes: 1 << 40}.Block()
			if err != nil {
				return err
			}
			return c.UpdateTopic(ctx, s1, t2, "t2", options)
		}},
		{wire.CodePurgeTopic, nil, func(ctx context.Context, c *Client) error { return c.PurgeTopic(ctx, s1, t2) }},
		{wire.CodeCreatePartitions, nil, func(ctx context.Context, c *Client) error { return c.CreatePartitions(ctx, s1, t2, 2) }},
		{wire.CodeDeletePartitions, nil, func(ctx context.Context, c *Client) error { return c.DeletePartitions(ctx, s1, t2, 1) }},
		{wire.CodeDeleteSegments, nil, func(ctx context.Context, c *Client) error { return c.DeleteSegments(ctx, s1, t2, 0, 1) }},
		{wire.CodeGetConsumerGroup, group, func(ctx context.Context, c *Client) error {
			g, err := c.GetConsumerGroup(ctx, s1, t2, g3)
			return check(err, g != nil && g.ID == 3 && len(g.Members) == 1)
		}},
		{wire.CodeGetConsumerGroups, wire.AppendConsumerGroupsReply(nil, []wire.ConsumerGroupHeader{{Name: []byte("g")}}), func(ctx context.Context, c *Client) error {
			l, err := c.GetConsumerGroups(ctx, s1, t2)
			return check(err, len(l) == 1)
		}},
		{wire.CodeCreateConsumerGroup, group, func(ctx context.Context, c *Client) error {
			g, err := c.CreateConsumerGroup(ctx, s1, t2, "g")
			return check(err, g != nil && string(g.Name) == "g")
		}},
		{wire.CodeDeleteConsumerGroup, nil, func(ctx context.Context, c *Client) error { return c.DeleteConsumerGroup(ctx, s1, t2, g3) }},
		{wire.CodeJoinConsumerGroup, nil, func(ctx context.Context, c *Client) error { return c.JoinConsumerGroup(ctx, s1, t2, g3) }},
		{wire.CodeLeaveConsumerGroup, nil, func(ctx context.Context, c *Client) error { return c.LeaveConsumerGroup(ctx, s1, t2, g3) }},
		{wire.CodeSyncConsumerGroup, (&wire.Assignment{Generation: 2, PartitionIDs: []uint32{0}}).Append(nil), func(ctx context.Context, c *Client) error {
			a, err := c.SyncConsumerGroup(ctx, s1, t2, g3)
			return check(err, a != nil && a.Generation == 2)
		}},
		{wire.CodeGetSnapshot, zip, func(ctx context.Context, c *Client) error {
			z, err := c.SendRaw(ctx, wire.CodeGetSnapshot, []byte{1, 1, 1})
			return check(err, len(z) == len(zip))
		}},
	}
	for _, tc := range cases {
		t.Run(tc.code.String(), func(t *testing.T) {
			s := newFakeServer(t, session(func(req *wire.RequestHeader, body []byte) ([]byte, bool) {
				code := req.NonReplicatedCode
				if req.Operation != wire.OperationNonReplicated {
					code, _ = req.Operation.CommandCode()
				}
				if code != tc.code {
					t.Errorf("request carries code %v, want %v", code, tc.code)
				}
				if op, _ := code.Operation(); op != req.Operation {
					t.Errorf("operation %v, the registry says %v", req.Operation, op)
				}
				if handled, err := wire.CheckRequestBody(code, body); !handled || err != nil {
					t.Errorf("server decoder refuses the body % x: %v", body, err)
				}
				return reply(req, tc.payload), false
			}))
			c := loggedIn(t, s)
			if err := tc.call(testContext(t), c); err != nil {
				t.Fatal(err)
			}
		})
	}
}

var errUnexpectedResult = errors.New("unexpected result")

func check(err error, ok bool) error {
	if err == nil && !ok {
		return errUnexpectedResult
	}
	return err
}

// Dial logs in with either credential, announcing the configured protocol version.
func TestDialLogsIn(t *testing.T) {
	var bodies [][]byte
	s := newFakeServer(t, func(req *wire.RequestHeader, body []byte) ([]byte, bool) {
		if req.Operation == wire.OperationRegister {
			bodies = append(bodies, append([]byte(nil), body...))
		}
		return session(nil)(req, body)
	})
	for _, opt := range []Option{WithCredentials("iggy", "iggy"), WithPersonalAccessToken("tok")} {
		c, err := Dial(testContext(t), s.addr(), opt, WithProtocolVersion(wire.ProtocolVersion(11<<10|3)))
		if err != nil {
			t.Fatal(err)
		}
		if id, ok := c.Identity(); !ok || id.Session != testSession {
			t.Fatalf("identity %+v %v", id, ok)
		}
		c.Close()
	}
	if len(bodies) != 2 {
		t.Fatalf("%d logins", len(bodies))
	}
	var password wire.LoginRegister
	var token wire.LoginRegisterWithPAT
	if err := password.Decode(bodies[0]); err != nil || string(password.Username) != "iggy" || password.Version.ProtocolVersion.Patch() != 3 ||
		string(password.Version.SDKName) != DefaultSDKName {
		t.Fatalf("password login %+v: %v", password, err)
	}
	if err := token.Decode(bodies[1]); err != nil || string(token.Token) != "tok" {
		t.Fatalf("token login %+v: %v", token, err)
	}
}

// Error strings name what happened.
func TestErrorStrings(t *testing.T) {
	ev := &EvictionError{Reason: wire.EvictionIncompatibleProtocol, Code: wire.ErrIncompatibleProtocolVersion,
		ServerProtocolVersion: wire.ServerProtocolVersion, ServerProtocolVersionMin: wire.ServerProtocolVersionMin}
	ce := &ConnectionError{Op: "reply", Code: wire.ErrDisconnected, Err: echoMismatch{sent: 3, got: 4}}
	for err, want := range map[error][]string{
		ev: {"IncompatibleProtocol", "14003", "0.11.0 to 0.11.0"},
		ce: {"reply", "Disconnected", "echoes request 4, sent 3"},
	} {
		for _, w := range want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%q lacks %q", err.Error(), w)
			}
		}
	}
}
