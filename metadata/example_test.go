package metadata_test

import (
	"fmt"

	"github.com/iggy-shard/iggy-shard/metadata"
	"github.com/iggy-shard/iggy-shard/wire"
)

// A metadata write from admission to reply, as the server drives it. The journal,
// the consensus round and the clock are the server's; here the op commits at once.
func Example() {
	salt := []byte("fixed-salt-16byt") // the server draws PasswordSaltBytes random bytes
	state := metadata.NewState("iggy", metadata.HashPassword([]byte("iggy"), salt), 1_700_000_000_000_000)

	request, _ := (&wire.CreateTopic{StreamID: wire.NumericIdentifier(0), PartitionsCount: 2, Name: []byte("events")}).Append(nil)
	if err := state.Admit(wire.OperationCreateTopic, metadata.RootUserID, request); err != nil {
		fmt.Println("denied with status", uint32(err.(wire.ErrorCode)))
		return
	}
	var out metadata.Output
	h := metadata.Header{Operation: wire.OperationCreateTopic, UserID: metadata.RootUserID, TimestampMicros: 1_700_000_001_000_000}
	state.Apply(h, request, &out)
	fmt.Println("no stream yet:", out.Result, out.Operation)

	stream, _ := (&wire.CreateStream{Name: []byte("app")}).Append(nil)
	state.Apply(metadata.Header{Operation: wire.OperationCreateStream, TimestampMicros: 1_700_000_002_000_000}, stream, &out)
	state.Apply(h, request, &out)
	fmt.Println("created:", out.Result == 0, len(out.Reply), "reply bytes")
	for _, e := range out.Effects {
		fmt.Printf("effect: %v stream %d topic %d partitions %d..%d\n", e.Kind, e.Stream, e.Topic, e.First, e.First+e.Count-1)
	}
	snapshot := state.AppendSnapshot(nil, 3)
	restored, op, _ := metadata.DecodeSnapshot(snapshot)
	body, _ := restored.AppendTopics(nil, metadata.RootUserID, wire.NumericIdentifier(0), nil)
	topics, _ := wire.AppendTopics(nil, body)
	fmt.Printf("restored at op %d: %d topic %q\n", op, len(topics), topics[0].Name)
	// Output:
	// no stream yet: StreamIdNotFound (1009) CreateTopicWithAssignments
	// created: true 422 reply bytes
	// effect: CreatePartitions stream 0 topic 0 partitions 0..1
	// restored at op 3: 1 topic "events"
}
