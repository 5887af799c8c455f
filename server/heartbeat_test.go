package server

import (
	"testing"

	"github.com/iggy-shard/iggy-shard/client"
	"github.com/iggy-shard/iggy-shard/config"
	"github.com/iggy-shard/iggy-shard/wire"
)

// A consumer group member silent for 1.2 heartbeat intervals is evicted with reason
// 13 (its next request reads the Eviction: StaleClient, code 30) and leaves its group;
// a member that pings stays, and a silent client in no group is left alone.
func TestSilentGroupMemberEvicted(t *testing.T) {
	clock := newTestClock()
	cfg := testConfig(t.TempDir(), 2)
	cfg.clock = clock.now
	cfg.IdleTimeout = 0 // the clock jumps a minute: only the heartbeat rule is under test
	s := startTestServer(t, cfg)
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

	// Two heartbeat intervals pass: the pinger speaks halfway, the silent member
	// never. Shard 0 looks every interval/5, the silent member's shard evicts it,
	// and its close takes it out of the group (a committed leave).
	clock.advance(s, config.HeartbeatIntervalDefault)
	mustOK(t, "Ping", pinger.Ping(ctx))
	mustOK(t, "bystander Ping", bystander.Ping(ctx))
	clock.advance(s, config.HeartbeatIntervalDefault)
	mustOK(t, "Ping", pinger.Ping(ctx))
	// Bounded in time, not in looks: a look is a read of the view, quick, while the
	// leave is a metadata op, journaled (an fsync) before it applies.
	waitUntil(t, "the silent member leaves its group", func() bool {
		gd, err := admin.GetConsumerGroup(testContext(t), client.ID(st.ID), client.ID(topic.ID), client.ID(g.ID))
		mustOK(t, "GetConsumerGroup", err)
		return gd.MembersCount == 1
	})
	wantCode(t, "silent member's next request", silent.Ping(ctx), wire.ErrStaleClient)
	mustOK(t, "bystander (in no group) after the same silence", bystander.Ping(ctx))
	me, err := pinger.GetMe(ctx)
	mustOK(t, "pinger GetMe", err)
	if me.ConsumerGroupsCount != 1 {
		t.Fatalf("the pinging member is in %d groups, want 1", me.ConsumerGroupsCount)
	}
}
