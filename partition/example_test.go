package partition_test

import (
	"fmt"
	"os"

	"github.com/iggy-shard/iggy-shard/partition"
	"github.com/iggy-shard/iggy-shard/wire"
)

// replies stands for the glue's connection table: completions find their request by
// token.
type replies struct{ bodies map[uint64][]byte }

func (r *replies) SendDone(token uint64, c wire.SendConfirmation, err error) {
	if err != nil {
		fmt.Println("status", err)
		return
	}
	r.bodies[token] = partition.AppendSendReply(nil, c)
}

func (r *replies) PollDone(token uint64, res *partition.PollResult, err error) {
	r.bodies[token] = partition.AppendPollReply(nil, res)
}

// A producer's batch goes in, a consumer polls it back with auto-commit, and the
// consumer's offset is read: what the glue does for SendMessages, PollMessages and
// GetConsumerOffset, with the store's I/O driven by PollIO as the shard loop would.
func ExampleStore() {
	root, _ := os.MkdirTemp("", "partition-example")
	defer os.RemoveAll(root)
	store := partition.NewStore(root, partition.OSStorages{})
	defer store.Close()

	key := partition.Key{StreamID: 0, TopicID: 0, PartitionID: 0}
	cfg := partition.ConfigFromTopicOptions(wire.DefaultTopicOptions(), 1)
	if err := store.Create(key, cfg, 1_700_000_000_000_000); err != nil {
		panic(err)
	}

	var bb wire.BatchBuilder
	bb.Reset(nil)
	for i, payload := range []string{"alpha", "beta", "gamma"} {
		_ = bb.Append(wire.Uint128{Lo: uint64(i + 1)}, 1_700_000_000_000_000, []byte(payload), nil)
	}
	batch, _ := bb.Finish()

	r := &replies{bodies: map[uint64][]byte{}}
	req := &wire.SendMessages{Partitioning: wire.Partitioning{Kind: wire.PartitioningPartitionID}, MessagesCount: 3, Batch: batch}
	if err := store.Send(key, req, 1_700_000_000_000_001, r, 1); err != nil {
		panic(err)
	}
	for r.bodies[1] == nil {
		store.PollIO()
	}
	var confirmations wire.SendConfirmations
	_ = confirmations.Decode(r.bodies[1])
	fmt.Printf("stored at offset %d\n", confirmations.At(0).BaseOffset)

	var res partition.PollResult
	consumer := partition.Consumer{Kind: wire.ConsumerSingle, ID: 42}
	poll := partition.PollRequest{Consumer: consumer, Strategy: wire.PollingStrategy{Kind: wire.PollingNext}, Count: 2, AutoCommit: true}
	if err := store.Poll(key, poll, &res, r, 2); err != nil {
		panic(err)
	}
	for r.bodies[2] == nil {
		store.PollIO()
	}
	var polled wire.PolledMessages
	_ = polled.Decode(r.bodies[2])
	for it := polled.Messages(); it.Next(); {
		m := it.Message()
		fmt.Printf("offset %d: %s\n", m.Offset, m.Payload())
	}

	offset, _ := store.AppendConsumerOffsetReply(nil, key, consumer)
	var o wire.ConsumerOffset
	_ = o.Decode(offset)
	fmt.Printf("consumer 42 stored %d of %d\n", o.StoredOffset, o.CurrentOffset)
	// Output:
	// stored at offset 0
	// offset 0: alpha
	// offset 1: beta
	// consumer 42 stored 1 of 2
}
