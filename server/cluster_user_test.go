package server

import (
	"context"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/iggy-shard/iggy-shard/client"
	"github.com/iggy-shard/iggy-shard/wire"
)

// A cluster's leader moves when its backups stop hearing from it for a heartbeat
// timeout (1 s in these tests, testClusterTiming), and a stall of the test process
// longer than that (a loaded machine, a GC pause) does just that now and then. The
// old leader then rightly answers writes 58 TransientNotAccepted. A user's
// application is not held at one node: its SDK follows the leader (client/leader.go,
// as the Go SDK's HandleLeaderRedirection does), which after 2 s of 58 asks for the
// roster, dials the leader it names, logs in there and replays the write. Tests that
// check what a cluster keeps, rather than which node leads, write as such an
// application does, through a clusterUser.
//
// A login is a new client to the server (a fresh client id), and consumer group
// membership is keyed on the client id: after a move the user is in none of its
// groups. The Go SDK joins again when it next polls for a group (its Sync answered
// ConsumerGroupMemberNotFound); a clusterUser joins every group it is in again as
// soon as it sees the move, and waits until it owns every partition of each again
// (it is each group's only consumer; its old login leaves the groups once the end of
// the old connection commits). The SDK's replay at the leader ran before that, and a
// group offset of a non-member is refused there (20, server/routing.go); so a request
// that failed while the client moved, and only such a request, is sent again once the
// groups are joined. Nothing else is retried: any other error fails the test.
type clusterUser struct {
	t *testing.T
	c *client.Client
	// groups are the consumer groups the user is in; joinedAs is the client id
	// of the login they were joined under.
	groups   []wire.GroupTarget
	joinedAs wire.Uint128
}

// dialClusterUser logs in as root at s, as the SDKs do (the client's defaults: the
// login settles the leader, a write answered 58 for 2 s follows it, a write answered
// 57 is replayed, and every request ends by its 30 s deadline).
func dialClusterUser(t *testing.T, s *Server) *clusterUser {
	t.Helper()
	c, err := client.Dial(testContext(t), s.Addr().String(), client.WithCredentials("iggy", "iggy"))
	if err != nil {
		t.Fatalf("Dial %s: %v", s.Addr(), err)
	}
	t.Cleanup(func() { c.Close() })
	return &clusterUser{t: t, c: c, joinedAs: c.ClientID()}
}

// must sends one request through call, with a context of the SDKs' request
// deadline, and fails the test on its error (after the one replay the type's
// comment allows).
func (u *clusterUser) must(what string, call func(ctx context.Context, c *client.Client) error) {
	u.t.Helper()
	deadline := time.Now().Add(clusterWait)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), client.DefaultRequestTimeout)
		err := call(ctx, u.c)
		cancel()
		moved := u.c.ClientID() != u.joinedAs
		if moved {
			u.rejoin(deadline)
		}
		if err == nil {
			return
		}
		if !moved || len(u.groups) == 0 || time.Now().After(deadline) {
			u.t.Fatalf("%s: %v", what, err)
		}
		u.t.Logf("%s: %v after the client moved to %s; again, in its groups", what, err, u.c.Addr())
	}
}

// rejoin joins the user's groups again under its current login, until a login
// holds them all (each pass follows another move, by deadline), and waits until it
// owns every partition of each.
func (u *clusterUser) rejoin(deadline time.Time) {
	u.t.Helper()
	ctx := testContext(u.t)
	for u.c.ClientID() != u.joinedAs {
		if time.Now().After(deadline) {
			u.t.Fatalf("the user's groups not joined again within %v: its login keeps moving", clusterWait)
		}
		u.joinedAs = u.c.ClientID()
		for _, g := range u.groups {
			if err := u.c.JoinConsumerGroup(ctx, g.StreamID, g.TopicID, g.GroupID); err != nil {
				if u.c.ClientID() != u.joinedAs {
					break // moved again: join them all there
				}
				u.t.Fatalf("JoinConsumerGroup %v again after a move: %v", g, err)
			}
		}
	}
	for _, g := range u.groups {
		waitUntil(u.t, "the user owns its group's partitions again", func() bool {
			group, err := u.c.GetConsumerGroup(ctx, g.StreamID, g.TopicID, g.GroupID)
			if err != nil {
				return false
			}
			owned, err := u.c.SyncConsumerGroup(ctx, g.StreamID, g.TopicID, g.GroupID)
			return err == nil && len(owned.PartitionIDs) == int(group.PartitionsCount)
		})
	}
}

// join joins a consumer group, which the user then joins again after every move.
func (u *clusterUser) join(stream, topic, group wire.Identifier) {
	u.t.Helper()
	u.must("JoinConsumerGroup", func(ctx context.Context, c *client.Client) error {
		return c.JoinConsumerGroup(ctx, stream, topic, group)
	})
	u.groups = append(u.groups, wire.GroupTarget{StreamID: stream, TopicID: topic, GroupID: group})
}

// deleteGroup deletes a consumer group the user may be in.
func (u *clusterUser) deleteGroup(stream, topic, group wire.Identifier) {
	u.t.Helper()
	u.groups = slices.DeleteFunc(u.groups, func(g wire.GroupTarget) bool {
		return g.StreamID.Equal(stream) && g.TopicID.Equal(topic) && g.GroupID.Equal(group)
	})
	u.must("DeleteConsumerGroup", func(ctx context.Context, c *client.Client) error {
		return c.DeleteConsumerGroup(ctx, stream, topic, group)
	})
}

func (u *clusterUser) sendTo(stream, topic string, partition uint32, msgs []client.Message) {
	u.t.Helper()
	u.must("SendMessages", func(ctx context.Context, c *client.Client) error {
		return sendToPartition(ctx, c, stream, topic, partition, msgs)
	})
}

func (u *clusterUser) storeOffsetOf(consumer wire.Consumer, stream, topic string, partition uint32, offset uint64) {
	u.t.Helper()
	u.must("StoreConsumerOffset", func(ctx context.Context, c *client.Client) error {
		return storeOffset(ctx, c, consumer, stream, topic, partition, offset)
	})
}

func (u *clusterUser) createStream(name string) *wire.StreamDetails {
	u.t.Helper()
	var stream *wire.StreamDetails
	u.must("CreateStream", func(ctx context.Context, c *client.Client) (err error) {
		stream, err = c.CreateStream(ctx, name)
		return err
	})
	return stream
}

func (u *clusterUser) createTopic(stream, name string, partitions uint32, options []byte) *wire.TopicDetails {
	u.t.Helper()
	var topic *wire.TopicDetails
	u.must("CreateTopic", func(ctx context.Context, c *client.Client) (err error) {
		topic, err = c.CreateTopic(ctx, client.NameID(stream), name, partitions, options)
		return err
	})
	return topic
}

// formCluster starts a node per configuration and waits until they agree on a
// leader, whichever: a stall of the test process while they form may already
// have moved it from node 0.
func formCluster(t *testing.T, cfgs []setup) []*Server {
	t.Helper()
	servers := make([]*Server, len(cfgs))
	for i := range cfgs {
		servers[i] = startTestServer(t, cfgs[i])
	}
	awaitAgreedLeader(t, servers)
	return servers
}

// awaitAgreedLeader waits until running agree on a leader and returns it.
func awaitAgreedLeader(t *testing.T, running []*Server) uint8 {
	t.Helper()
	var leader uint8
	waitUntil(t, "the nodes agree on a leader", func() (ok bool) { leader, ok = agreedLeader(running); return ok })
	return leader
}

// nodeOf is the index in servers of the node the user is connected to (-1 for
// none of them).
func (u *clusterUser) nodeOf(servers []*Server) int {
	for i, s := range servers {
		if s != nil && sameNode(s.Addr().String(), u.c.Addr()) {
			return i
		}
	}
	return -1
}

// sameNode reports whether two host:port addresses of loopback nodes name one
// node (a client's advertised leader address may spell the host otherwise).
func sameNode(a, b string) bool {
	_, pa, errA := net.SplitHostPort(a)
	_, pb, errB := net.SplitHostPort(b)
	return errA == nil && errB == nil && pa == pb
}

// aFollowerToStop is a node that neither leads now nor holds the user's
// connection: stopping it takes a backup away, as the test means to, and leaves
// the user's session where it is (a user whose node stops sees its connection
// break; an application would dial again).
func (u *clusterUser) aFollowerToStop(servers []*Server) int {
	u.t.Helper()
	leader := awaitAgreedLeader(u.t, servers)
	at := u.nodeOf(servers)
	for i := range servers {
		if i != int(leader) && i != at {
			return i
		}
	}
	u.t.Fatalf("no follower to stop: leader %d, the user at node %d", leader, at)
	return -1
}
