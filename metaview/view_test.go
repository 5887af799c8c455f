package metaview

import (
	"testing"

	"github.com/iggy-shard/iggy-shard/metadata"
	"github.com/iggy-shard/iggy-shard/wire"
)

// TestViewFollowsTheLog: a view applies what is appended after the entry it
// started at, in order, with the partition effects of each op; the sessions it
// mirrors fence a client that registered again or left; a replacement takes a
// transferred state whole.
func TestViewFollowsTheLog(t *testing.T) {
	genesis := &Entry{}
	// A root user (id 0, whose ops these are); its hash is never checked here.
	root := metadata.NewState("iggy", "not-checked", 1)
	v := New(root.AppendSnapshot(nil, 0), genesis)
	if v.Behind() {
		t.Fatal("a view of an empty log is behind")
	}
	client := wire.Uint128{Lo: 7}
	stream, err := (&wire.CreateStream{Name: []byte("s")}).Append(nil)
	if err != nil {
		t.Fatal(err)
	}
	topic, err := (&wire.CreateTopic{StreamID: wire.StringIdentifier([]byte("s")), PartitionsCount: 3, Name: []byte("t")}).Append(nil)
	if err != nil {
		t.Fatal(err)
	}
	register := &Entry{Op: 1, Header: metadata.Header{Operation: wire.OperationRegister, Client: client}}
	createStream := &Entry{Op: 2, Header: metadata.Header{Operation: wire.OperationCreateStream, Client: client, TimestampMicros: 1}, Body: stream}
	createTopic := &Entry{Op: 3, Header: metadata.Header{Operation: wire.OperationCreateTopic, Client: client, TimestampMicros: 2}, Body: topic}
	genesis.Append(register)
	register.Append(createStream)
	createStream.Append(createTopic)
	if !v.Behind() {
		t.Fatal("a view is not behind an appended entry")
	}
	var created uint32
	v.CatchUp(func(_ *metadata.State, effects []metadata.Effect, at *Entry) {
		for _, e := range effects {
			if e.Kind == metadata.EffectCreatePartitions && at == createTopic {
				created += e.Count
			}
		}
	})
	if v.Behind() || v.State.Counts().Streams != 1 || created != 3 {
		t.Fatalf("after the catch-up: behind %v, %d streams, %d partitions created; want 1 stream, 3 partitions",
			v.Behind(), v.State.Counts().Streams, created)
	}
	if reason := v.Fence(client, 1); reason != 0 {
		t.Fatalf("the registered session is fenced: %s", reason)
	}
	if reason := v.Fence(client, 0); reason != wire.EvictionSessionTooLow {
		t.Fatalf("an older session: %s, want SessionTooLow", reason)
	}

	// The session ends; then a transferred state replaces the view.
	ended := &Entry{Ended: []wire.Uint128{client}}
	createTopic.Append(ended)
	replaced := false
	v.Replaced = func(old *metadata.State) { replaced = old.Counts().Streams == 1 }
	other := wire.Uint128{Lo: 8}
	replace := &Entry{Replace: &Replace{Snapshot: metadata.NewStateWithoutRoot().AppendSnapshot(nil, 9), Sessions: map[wire.Uint128]uint64{other: 5}}}
	ended.Append(replace)
	if !v.CatchUp(func(*metadata.State, []metadata.Effect, *Entry) {}) {
		t.Fatal("a replacement does not report the accounts changed")
	}
	if !replaced || v.State.Counts().Streams != 0 {
		t.Fatalf("after the replacement: told %v, %d streams", replaced, v.State.Counts().Streams)
	}
	if v.Fence(client, 1) != wire.EvictionNoSession || v.Fence(other, 5) != 0 {
		t.Fatal("the sessions are not the transferred table's")
	}
}
