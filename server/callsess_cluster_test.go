package server

import (
	"testing"

	"github.com/iggy-shard/iggy-shard/wire"
)

// TestClusterProduceAfterTheClusterEndedItsSession: at a cluster's primary, a
// credential whose session the committed state ended (an EndSessions op, as a
// closed connection's or a full table's eviction would) leaves the credentials
// the shards route by as the op applies; its next produce registers a new
// session and is written.
func TestClusterProduceAfterTheClusterEndedItsSession(t *testing.T) {
	servers := startCluster(t, clusterConfigs(t, 3, testClusterSecret))
	primary := servers[0]
	waitUntil(t, "the primary takes writes", func() bool {
		return createStreamAs(t, primary, rootCaller(), "s") == nil
	})
	ctx := testContext(t)
	_, err := primary.Do(ctx, rootCaller(), wire.CodeCreateTopic, appendBody(t, &wire.CreateTopic{StreamID: wire.StringIdentifier([]byte("s")),
		PartitionsCount: 2, Name: []byte("t")}))
	mustOK(t, "a topic", err)
	producer := credentialCaller("jwt:producer")
	send := func(payload string) error {
		_, err := primary.Do(ctx, producer, wire.CodeSendMessages, callSendBody(t, "s", "t", 1, payload))
		return err
	}
	mustOK(t, "the first produce", send("first"))
	client, epoch, ok := callerSessionOf(t, primary, "jwt:producer")
	if !ok || !primary.transport.sessions.Has("jwt:producer") {
		t.Fatal("the first produce registered no session")
	}
	onMetaShard(t, primary, func(p *metaPlane) { p.EndSession(client, epoch, primary.nowMicros()) })
	waitSessionEnded(t, servers, client)
	// Shard 0 applied the end before the wait saw it (onMetaShard runs there).
	if primary.transport.sessions.Has("jwt:producer") {
		t.Fatal("the ended session's credential is still listed for the shards")
	}
	mustOK(t, "a produce after the end", send("after"))
	again, _, ok := callerSessionOf(t, primary, "jwt:producer")
	if !ok || again == client {
		t.Fatalf("the session after the end: %v %v, the ended one %v", again, ok, client)
	}
	for _, s := range servers {
		waitUntil(t, "the new session on every node", func() (registered bool) {
			onMetaShard(t, s, func(p *metaPlane) { _, _, registered = p.Session(again) })
			return registered
		})
	}
	if got := messagesOnPartition1(t, primary, "s"); got != 2 {
		t.Fatalf("%d messages after two produces", got)
	}
}
