package server

import (
	"testing"

	"github.com/iggy-shard/iggy-shard/client"
	"github.com/iggy-shard/iggy-shard/wire"
)

func TestLoginStreamTopicSendPoll(t *testing.T) {
	s := testServer(t, t.TempDir(), 2)
	c := dialRoot(t, s)
	ctx := testContext(t)
	id, ok := c.Identity()
	if !ok || id.UserID != 0 || id.Session == 0 || id.ServerVersion == "" {
		t.Fatalf("identity %+v %v", id, ok)
	}
	stream, err := c.CreateStream(ctx, "orders")
	mustOK(t, "CreateStream", err)
	_, err = c.CreateStream(ctx, "orders")
	wantCode(t, "CreateStream duplicate", err, wire.ErrStreamNameAlreadyExists)
	topic, err := c.CreateTopic(ctx, client.ID(stream.ID), "events", 2, nil)
	mustOK(t, "CreateTopic", err)
	for i := 0; i < 3; i++ {
		conf, err := c.SendMessages(ctx, client.NameID("orders"), client.NameID("events"), wire.Partitioning{Kind: wire.PartitioningPartitionID, PartitionID: 0}, messages(4, "message"))
		mustOK(t, "SendMessages", err)
		if conf.Len() != 1 || conf.At(0).PartitionID != 0 || conf.At(0).BaseOffset != uint64(4*i) || conf.At(0).TopicID != topic.ID {
			t.Fatalf("confirmation %+v", conf.At(0))
		}
	}
	polled, err := c.PollMessages(ctx, &wire.PollMessages{
		Consumer: client.SingleConsumer(client.ID(1)), StreamID: client.ID(stream.ID), TopicID: client.ID(topic.ID),
		Partition: wire.SomePartition(0), Strategy: wire.PollingStrategy{Kind: wire.PollingOffset}, Count: 12,
	})
	mustOK(t, "PollMessages", err)
	n := 0
	for it := polled.Messages(); it.Next(); n++ {
		m := it.Message()
		if m.Offset != uint64(n) {
			t.Fatalf("message %d has offset %d", n, m.Offset)
		}
	}
	if n != 12 {
		t.Fatalf("polled %d messages, want 12", n)
	}
}
