package bench

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/iggy-shard/iggy-shard/client"
	"github.com/iggy-shard/iggy-shard/wire"
)

// The hot loops allocate nothing per batch, let alone per message: a producer's
// turn (restamp, send, count, record) and a consumer's (poll, verify every message,
// track offsets, record, the per-second series included), each against a real
// server.
func TestSendAndPollLoopsDoNotAllocate(t *testing.T) {
	addr := startServer(t)
	ctx := testContext(t)
	cfg := Config{Kind: PinnedProducerAndConsumer, ServerAddress: addr, Producers: 1, Consumers: 1,
		MessagesPerBatch: 100, MessageSizeBytes: 200}.WithDefaults()
	admin, err := dial(ctx, &cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	streams, err := setupStreams(ctx, admin, &cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer deleteStreams(context.Background(), admin, streams)
	s := streams[0]
	p, err := newProducer(ctx, &cfg, 0, s, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.c.Close()
	background := context.Background()
	if err := p.send(background, time.Now(), true); err != nil { // warm the client's buffers
		t.Fatal(err)
	}
	var sendErr error
	sends := testing.AllocsPerRun(50, func() {
		if err := p.send(background, time.Now(), true); err != nil {
			sendErr = err
		}
	})
	if sendErr != nil {
		t.Fatal(sendErr)
	}
	if sends != 0 {
		t.Errorf("a producer's send turn allocates %v times", sends)
	}

	streamID, topicID := s.identifiers()
	req := wire.PollMessages{Consumer: client.SingleConsumer(client.ID(0)), StreamID: streamID, TopicID: topicID,
		Partition: wire.SomePartition(s.partitionIDs[0]), Strategy: wire.PollingStrategy{Kind: wire.PollingOffset}, Count: 100}
	stats := &actorStats{role: RoleConsumer}
	stats.check.messagesPerBatch, stats.check.messageSizeBytes = 100, 200
	var tracker partitionTracker
	var pollErr error
	turn := func() {
		req.Strategy.Value = tracker.next
		t0 := time.Now()
		polled, err := admin.PollMessages(background, &req)
		if err != nil || polled.MessagesCount != 100 {
			pollErr = err
			return
		}
		first, count, _ := stats.check.check("consumer", &polled, true)
		tracker.observe(first, count)
		stats.latency.Record(time.Since(t0))
	}
	turn()
	polls := testing.AllocsPerRun(40, turn)
	if pollErr != nil {
		t.Fatal(pollErr)
	}
	if polls != 0 {
		t.Errorf("a consumer's poll turn allocates %v times", polls)
	}
	if !stats.check.OK() || stats.check.MessagesConsumed != 100*42 {
		t.Fatalf("check: %+v", stats.check.Verification)
	}

	// The consumer's own turn, from offset 0 again on its own tracker.
	k := newConsumer(&cfg, 0, s, admin, 0)
	k.stats.check.messagesPerBatch, k.stats.check.messageSizeBytes = 100, 200 // as runActors sets them
	if _, _, err := k.poll(background); err != nil {
		t.Fatal(err)
	}
	var got bool
	polls = testing.AllocsPerRun(40, func() {
		if got, _, pollErr = k.poll(background); !got && pollErr == nil {
			pollErr = errors.New("an empty poll")
		}
	})
	if pollErr != nil {
		t.Fatal(pollErr)
	}
	if polls != 0 {
		t.Errorf("consumer.poll allocates %v times", polls)
	}
	if k.stats.messages != 100*42 || !k.stats.check.OK() {
		t.Fatalf("consumer measured %d messages: %+v", k.stats.messages, k.stats.check.Verification)
	}
}
