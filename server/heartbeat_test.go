package server

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/iggy-shard/iggy-shard/client"
	"github.com/iggy-shard/iggy-shard/wire"
)

// A consumer group member silent for 1.2 heartbeat intervals is evicted with reason
// 13 (its next request reads the Eviction: StaleClient, code 30) and leaves its group;
// a member that pings stays, and a silent client in no group is left alone.
func TestSilentGroupMemberEvicted(t *testing.T) {
	cfg := DefaultConfig()
	cfg.TCPAddress, cfg.SystemPath, cfg.ShardCount, cfg.PinCPUs = "127.0.0.1:0", t.TempDir(), 2, false
	cfg.HeartbeatInterval = time.Second
	s, err := Start(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopServer(t, s) })
	ctx := testContext(t)

	admin := dialRoot(t, s)
	st, err := admin.CreateStream(ctx, "s")
	mustOK(t, "CreateStream", err)
	topic, err := admin.CreateTopic(ctx, client.ID(st.ID), "t", 2, nil)
	mustOK(t, "CreateTopic", err)
	g, err := admin.CreateConsumerGroup(ctx, client.ID(st.ID), client.ID(topic.ID), "g")
	mustOK(t, "CreateConsumerGroup", err)
	silent, pinger, bystander := dialRoot(t, s), dialRoot(t, s), dialRoot(t, s)
	for _, c := range []*client.Client{silent, pinger} {
		mustOK(t, "JoinConsumerGroup", c.JoinConsumerGroup(ctx, client.ID(st.ID), client.ID(topic.ID), client.ID(g.ID)))
	}

	deadline := time.Now().Add(15 * time.Second)
	for {
		mustOK(t, "Ping", pinger.Ping(ctx))
		gd, err := admin.GetConsumerGroup(ctx, client.ID(st.ID), client.ID(topic.ID), client.ID(g.ID))
		mustOK(t, "GetConsumerGroup", err)
		if gd.MembersCount == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the silent member is still in the group after 15 s (%d members)", gd.MembersCount)
		}
		time.Sleep(20 * time.Millisecond)
	}
	wantCode(t, "silent member's next request", silent.Ping(ctx), wire.ErrStaleClient)
	mustOK(t, "bystander (in no group) after the same silence", bystander.Ping(ctx))
	me, err := pinger.GetMe(ctx)
	mustOK(t, "pinger GetMe", err)
	if me.ConsumerGroupsCount != 1 {
		t.Fatalf("the pinging member is in %d groups, want 1", me.ConsumerGroupsCount)
	}
}
