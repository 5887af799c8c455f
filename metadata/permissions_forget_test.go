package metadata

import (
	"testing"

	"github.com/iggy-shard/iggy-shard/wire"
)

// A grant on a deleted stream or topic must not carry over to the next one created
// with the same (reused, lowest-free) id.
func TestDeletedStreamAndTopicGrantsAreForgotten(t *testing.T) {
	f := newFixture(t)
	f.must(wire.OperationCreateStream, 0, createStream("orders"))
	f.must(wire.OperationCreateTopic, 0, createTopic(num(0), 1, "eu", nil))
	f.must(wire.OperationCreateTopic, 0, createTopic(num(0), 1, "us", nil))
	perms := &wire.Permissions{Streams: []wire.StreamPermissions{{
		StreamID: 0, ReadStream: true,
		Topics: []wire.TopicPermissions{{TopicID: 0, PollMessages: true}, {TopicID: 1, SendMessages: true}},
	}}}
	f.must(wire.OperationCreateUser, 0, createUser("alice", perms))
	alice := f.s.User(1)
	if alice == nil || alice.Permissions == nil {
		t.Fatal("alice not created with permissions")
	}

	f.must(wire.OperationDeleteTopic, 0, topicBody(num(0), num(0)))
	sp := alice.Permissions.Streams
	if len(sp) != 1 || len(sp[0].Topics) != 1 || sp[0].Topics[0].TopicID != 1 || !sp[0].ReadStream {
		t.Fatalf("after deleting topic 0: %+v", sp)
	}

	f.must(wire.OperationDeleteStream, 0, body((&wire.DeleteStream{StreamID: num(0)}).Append(nil)))
	if n := len(alice.Permissions.Streams); n != 0 {
		t.Fatalf("after deleting stream 0 alice keeps %d stream grants", n)
	}
	f.must(wire.OperationCreateStream, 0, createStream("payments"))
	if f.s.CanPoll(1, 0, 0) {
		t.Fatal("alice can poll the new stream 0 through a grant on the deleted one")
	}
}
