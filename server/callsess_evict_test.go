package server

import (
	"fmt"
	"testing"

	"github.com/iggy-shard/iggy-shard/wire"
)

// A caller's session that the committed state ends leaves its credential's set at
// once (metahost/callers.go callersEnded), so its next produce does not go to
// the partition's owner under a session the cluster no longer holds.

// smallTableConfig is a single node whose client table holds tableMax sessions
// ([metadata] clients_table_max), its callers' cap half of it.
func smallTableConfig(t *testing.T, tableMax int) setup {
	cfg := testConfig(t.TempDir(), 2)
	cfg.Metadata.ClientsTableMax = tableMax
	return cfg
}

func TestDoProduceAfterTableEvictedItsSession(t *testing.T) {
	const tableMax = 8
	s := startTestServer(t, smallTableConfig(t, tableMax))
	ctx := testContext(t)
	mustOK(t, "a stream", createStreamAs(t, s, rootCaller(), "s"))
	_, err := s.Do(ctx, rootCaller(), wire.CodeCreateTopic, appendBody(t, &wire.CreateTopic{StreamID: wire.StringIdentifier([]byte("s")),
		PartitionsCount: 2, Name: []byte("t")}))
	mustOK(t, "a topic", err)
	send := func(caller Caller, payload string) error {
		_, err := s.Do(ctx, caller, wire.CodeSendMessages, callSendBody(t, "s", "t", 1, payload))
		return err
	}
	producer, writer := credentialCaller("jwt:producer"), credentialCaller("jwt:writer")
	mustOK(t, "the first produce", send(producer, "first"))
	mustOK(t, "a first metadata write", createStreamAs(t, s, writer, "w-1"))
	evicted, _, ok := callerSessionOf(t, s, "jwt:producer")
	writerClient, _, okW := callerSessionOf(t, s, "jwt:writer")
	if !ok || !okW || !s.transport.sessions.Has("jwt:producer") {
		t.Fatal("the credentials' first writes registered no session")
	}

	// Binary logins fill the table: its oldest entries (the root caller's, the
	// producer's, the writer's) are evicted by the Registers that find it full.
	for range tableMax {
		dialRoot(t, s)
	}
	var registered, writerRegistered bool
	onMetaShard(t, s, func(p *metaPlane) {
		_, _, registered = p.Session(evicted)
		_, _, writerRegistered = p.Session(writerClient)
	})
	if registered || writerRegistered {
		t.Fatal("the logins evicted neither credential's session: the test fills the table too little")
	}
	// Already gone when the login that evicted it was answered, before any write
	// of the credential.
	if s.transport.sessions.Has("jwt:producer") || s.transport.sessions.Has("jwt:writer") {
		t.Fatal("an evicted session's credential is still listed for the shards: its produces go to the owner without a session")
	}
	if _, _, ok := callerSessionOf(t, s, "jwt:producer"); ok {
		t.Fatal("shard 0 still holds the evicted session as the producer's")
	}

	// The next produce registers a new session and is written, as the
	// reference's sessionless produce is.
	mustOK(t, "a produce after the eviction", send(producer, "after"))
	again, epoch, ok := callerSessionOf(t, s, "jwt:producer")
	if !ok || again == evicted || !s.transport.sessions.Has("jwt:producer") {
		t.Fatalf("the session after the eviction: %v %v (listed %v), the evicted one %v", again, ok, s.transport.sessions.Has("jwt:producer"), evicted)
	}
	onMetaShard(t, s, func(p *metaPlane) {
		var e uint64
		e, _, registered = p.Session(again)
		registered = registered && e == epoch
	})
	if !registered {
		t.Fatal("the new session is not in the client table")
	}
	if got := messagesOnPartition1(t, s, "s"); got != 2 {
		t.Fatalf("%d messages after two produces", got)
	}

	// A metadata write answers 40 once and is not applied; the next registers
	// anew (http-api: "a session evicted cluster-side makes the next write
	// answer 401 and is forgotten").
	if err := createStreamAs(t, s, writer, "w-evicted"); err != wire.ErrUnauthenticated {
		t.Fatalf("a metadata write after its session's eviction: %v, want 40", err)
	}
	if hasStreamOn(t, s, "w-evicted") {
		t.Fatal("the write answered 40 was applied")
	}
	mustOK(t, "the writer's next write", createStreamAs(t, s, writer, "w-2"))
	if c, _, ok := callerSessionOf(t, s, "jwt:writer"); !ok || c == writerClient {
		t.Fatalf("the writer's session after the 40: %v %v, evicted %v", c, ok, writerClient)
	}
}

// TestDoCallerCapIsHalfTheTable: [metadata] clients_table_max sizes the callers'
// cap, half of it, as the reference's HTTP session cap.
func TestDoCallerCapIsHalfTheTable(t *testing.T) {
	const tableMax = 8
	s := startTestServer(t, smallTableConfig(t, tableMax))
	// The root caller (no credential) holds a session of its user too.
	mustOK(t, "a stream", createStreamAs(t, s, rootCaller(), "s"))
	for i := range tableMax/2 - 1 {
		mustOK(t, "a write under the cap", createStreamAs(t, s, credentialCaller(fmt.Sprint("jwt:", i)), fmt.Sprint("s-", i)))
	}
	if err := createStreamAs(t, s, credentialCaller("jwt:over"), "over"); err != wire.ErrCannotEstablishConnection {
		t.Fatalf("a new credential past half the table: %v, want 9", err)
	}
	if n, l := callerSessionsAt(t, s); n != tableMax/2 || l != tableMax/2 {
		t.Fatalf("%d caller sessions, %d table entries, want %d", n, l, tableMax/2)
	}
}
