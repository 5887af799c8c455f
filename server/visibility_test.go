package server

import (
	"testing"

	"github.com/iggy-shard/iggy-shard/client"
	"github.com/iggy-shard/iggy-shard/wire"
)

// Every shard routes and reads from a view of its own (package metaview). These tests check
// that a metadata write whose reply a client holds is seen by the next request of
// another connection, placed on the other shard. Shard 0 does not tell the shards
// of its commits here (quietCommits): what they see, they must see because they
// catch up before they serve.

func visibilityServer(t *testing.T) *Server {
	cfg := testConfig(t.TempDir(), 2)
	cfg.quietCommits = true
	return startTestServer(t, cfg)
}

// shardOf returns the shard a client's connection lives on: client ids interleave
// over the shards (handler.ConnOpened).
func shardOf(t *testing.T, s *Server, c *client.Client) int {
	t.Helper()
	me, err := c.GetMe(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	return int(me.ClientID-1) % s.shardCount
}

// onOtherShards dials as user until it has a connection on a shard other than
// first's.
func onOtherShard(t *testing.T, s *Server, first *client.Client, user, password string) *client.Client {
	t.Helper()
	want := shardOf(t, s, first)
	for range 8 {
		c := dialAs(t, s, user, password)
		if shardOf(t, s, c) != want {
			return c
		}
	}
	t.Fatal("no connection placed on another shard in 8 tries")
	return nil
}

var (
	visStream = wire.StringIdentifier([]byte("vis"))
	visTopic  = wire.StringIdentifier([]byte("t"))
)

func visSend(t *testing.T, c *client.Client) error {
	t.Helper()
	_, err := c.SendMessages(testContext(t), visStream, visTopic,
		wire.Partitioning{Kind: wire.PartitioningPartitionID, PartitionID: 0}, messages(1, "vis"))
	return err
}

func TestCreatedTopicIsSeenOnEveryShard(t *testing.T) {
	s := visibilityServer(t)
	writer := dialRoot(t, s)
	other := onOtherShard(t, s, writer, "iggy", "iggy")
	ctx := testContext(t)
	for round := range 5 {
		mustOK(t, "create stream", func() error { _, err := writer.CreateStream(ctx, "vis"); return err }())
		mustOK(t, "create topic", func() error { _, err := writer.CreateTopic(ctx, visStream, "t", 1, nil); return err }())
		mustOK(t, "send at once from the other shard", visSend(t, other))
		if _, err := other.GetStream(ctx, visStream); err != nil {
			t.Fatalf("round %d: the other shard does not see the stream: %v", round, err)
		}
		mustOK(t, "delete stream", writer.DeleteStream(ctx, visStream))
		if _, err := other.GetStream(ctx, visStream); err == nil {
			t.Fatalf("round %d: the other shard still sees the deleted stream", round)
		}
		if err := visSend(t, other); err == nil {
			t.Fatalf("round %d: a send to the deleted stream succeeded", round)
		}
	}
}

func TestRevokedPermissionIsDeniedOnEveryShard(t *testing.T) {
	s := visibilityServer(t)
	root := dialRoot(t, s)
	ctx := testContext(t)
	mustOK(t, "create stream", func() error { _, err := root.CreateStream(ctx, "vis"); return err }())
	mustOK(t, "create topic", func() error { _, err := root.CreateTopic(ctx, visStream, "t", 1, nil); return err }())
	sender := &wire.Permissions{Global: wire.GlobalPermissions{SendMessages: true, ReadStreams: true}}
	mustOK(t, "create user", func() error {
		_, err := root.CreateUser(ctx, "producer", "secret-1", wire.UserActive, sender)
		return err
	}())
	producer := onOtherShard(t, s, root, "producer", "secret-1")
	mustOK(t, "send while allowed", visSend(t, producer))

	mustOK(t, "revoke", root.UpdatePermissions(ctx, wire.StringIdentifier([]byte("producer")), &wire.Permissions{}))
	wantCode(t, "send after the revocation", visSend(t, producer), wire.ErrUnauthorized)

	mustOK(t, "grant again", root.UpdatePermissions(ctx, wire.StringIdentifier([]byte("producer")), sender))
	mustOK(t, "send after the grant", visSend(t, producer))

	mustOK(t, "delete user", root.DeleteUser(ctx, wire.StringIdentifier([]byte("producer"))))
	if err := visSend(t, producer); err == nil {
		t.Fatal("a deleted user's send succeeded")
	}
	if _, err := producer.GetStream(ctx, visStream); err == nil {
		t.Fatal("a deleted user's read succeeded")
	}
}

// TestServerDropsTheCommitLogStart: once the shards have started, nothing but the
// views (and shard 0's tail) reaches into the commit log, so the entries behind the
// slowest view are garbage; a server that kept the log's first entry would keep
// every commit ever made.
func TestServerDropsTheCommitLogStart(t *testing.T) {
	s := testServer(t, t.TempDir(), 2)
	if s.viewGenesis != nil || s.viewSnapshot != nil {
		t.Fatal("the server still holds the commit log's start after the shards started")
	}
}
