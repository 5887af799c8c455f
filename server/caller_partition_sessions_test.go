package server

import (
	"fmt"
	"sync"
	"testing"

	"github.com/iggy-shard/iggy-shard/wire"
)

// A caller's partition writes (SendMessages, Store and DeleteConsumerOffset)
// bind its credential's session as its metadata writes do (callserve.go
// routeWrite, metahost/callers.go): registered on first use, once, under the same
// cap and refusals, and never again while it lives.

// messagesOnPartition1 is how many messages partition 1 of s/t holds, read by a caller
// without a credential (a read binds nothing).
func messagesOnPartition1(t *testing.T, s *Server, stream string) uint32 {
	t.Helper()
	reply, err := s.Do(testContext(t), rootCaller(), wire.CodePollMessages, pollBody(t, stream, "t", 1))
	mustOK(t, "a poll", err)
	var polled wire.PolledMessages
	if err := polled.Decode(reply); err != nil {
		t.Fatalf("a poll's reply: %v", err)
	}
	return polled.MessagesCount
}

func TestDoPartitionWritesBindSessions(t *testing.T) {
	cfg := testConfig(t.TempDir(), 2)
	const sessionsMax = 8
	cfg.callerSessionsMax = sessionsMax
	s := startTestServer(t, cfg)
	ctx := testContext(t)
	// The stream and topic by a caller without a credential: a session of its
	// user (metahost's callerKey), counted below in the baseline.
	mustOK(t, "a stream", createStreamAs(t, s, rootCaller(), "s"))
	_, err := s.Do(ctx, rootCaller(), wire.CodeCreateTopic, appendBody(t, &wire.CreateTopic{StreamID: wire.StringIdentifier([]byte("s")),
		PartitionsCount: 2, Name: []byte("t")}))
	mustOK(t, "a topic", err)
	send := func(caller Caller, payload string) error {
		_, err := s.Do(ctx, caller, wire.CodeSendMessages, callSendBody(t, "s", "t", 1, payload))
		return err
	}
	consumer, stream, topic, part := offsetTarget("s", "t", 1)
	storeOffset := func(caller Caller) error {
		_, err := s.Do(ctx, caller, wire.CodeStoreConsumerOffset, appendBody(t, &wire.StoreConsumerOffset{Consumer: consumer,
			StreamID: stream, TopicID: topic, Partition: part, Offset: 0}))
		return err
	}
	sessions0, table0 := callerSessionsAt(t, s)

	// A token's first produce registers one session; its next ones, and its
	// offset writes, go under it.
	producer := credentialCaller("jwt:producer")
	mustOK(t, "the first produce", send(producer, "first"))
	client, epoch, ok := callerSessionOf(t, s, "jwt:producer")
	if !ok || !s.transport.sessions.Has("jwt:producer") {
		t.Fatalf("a token's first produce registered no session (registered %v, listed for the shards %v)", ok, s.transport.sessions.Has("jwt:producer"))
	}
	if n, l := callerSessionsAt(t, s); n != sessions0+1 || l != table0+1 {
		t.Fatalf("%d caller sessions, %d table entries after a first produce; before %d, %d", n, l, sessions0, table0)
	}
	for i := range 4 {
		mustOK(t, "a next produce", send(producer, fmt.Sprint("next-", i)))
	}
	mustOK(t, "an offset stored", storeOffset(producer))
	_, err = s.Do(ctx, producer, wire.CodeDeleteConsumerOffset, appendBody(t, &wire.DeleteConsumerOffset{Consumer: consumer,
		StreamID: stream, TopicID: topic, Partition: part}))
	mustOK(t, "an offset deleted", err)
	if c, e, _ := callerSessionOf(t, s, "jwt:producer"); c != client || e != epoch {
		t.Fatalf("the next writes went under %v/%d, not the session %v/%d", c, e, client, epoch)
	}
	if n, l := callerSessionsAt(t, s); n != sessions0+1 || l != table0+1 {
		t.Fatalf("%d caller sessions, %d table entries after the next writes, want %d, %d", n, l, sessions0+1, table0+1)
	}
	if got := messagesOnPartition1(t, s, "s"); got != 5 {
		t.Fatalf("%d messages after 5 produces", got)
	}

	// An offset write first binds too; many first produces of one token at
	// once register once.
	mustOK(t, "an offset write first", storeOffset(credentialCaller("pat:offsets")))
	herd := credentialCaller("jwt:herd")
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := range 16 {
		wg.Go(func() { errs <- send(herd, fmt.Sprint("herd-", i)) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		mustOK(t, "a produce of the herd", err)
	}
	if n, l := callerSessionsAt(t, s); n != sessions0+3 || l != table0+3 {
		t.Fatalf("%d caller sessions, %d table entries after the herd, want %d, %d", n, l, sessions0+3, table0+3)
	}

	// At the cap a new token's first produce or offset write is refused 9 and
	// writes nothing; a token with a session produces on.
	for i := range sessionsMax - (sessions0 + 3) {
		mustOK(t, "a produce filling the cap", send(credentialCaller(fmt.Sprint("pat:fill-", i)), "fill"))
	}
	before := messagesOnPartition1(t, s, "s")
	over := credentialCaller("jwt:over")
	if err := send(over, "over"); err != wire.ErrCannotEstablishConnection {
		t.Fatalf("a new token's first produce past the cap: %v, want 9", err)
	}
	if err := storeOffset(over); err != wire.ErrCannotEstablishConnection {
		t.Fatalf("a new token's first offset write past the cap: %v, want 9", err)
	}
	if got := messagesOnPartition1(t, s, "s"); got != before {
		t.Fatalf("%d messages after a refused produce, %d before", got, before)
	}
	if n, _ := callerSessionsAt(t, s); n != sessionsMax {
		t.Fatalf("%d caller sessions, want the cap %d", n, sessionsMax)
	}
	mustOK(t, "a produce at the cap", send(producer, "at-the-cap"))

	// A logout ends the session; the next produce registers anew.
	if _, err := s.Do(ctx, producer, wire.CodeLogoutUser, nil); err != nil {
		t.Fatalf("a logout: %v", err)
	}
	if _, _, ok := callerSessionOf(t, s, "jwt:producer"); ok || s.transport.sessions.Has("jwt:producer") {
		t.Fatal("the session outlived its logout")
	}
	mustOK(t, "a produce after the logout", send(producer, "after"))
	if again, _, ok := callerSessionOf(t, s, "jwt:producer"); !ok || again == client {
		t.Fatalf("the session after a logout: %v %v, before %v", again, ok, client)
	}
	if n, _ := callerSessionsAt(t, s); n != sessionsMax {
		t.Fatalf("%d caller sessions after a logout and a produce, want %d", n, sessionsMax)
	}

	// A caller without a credential binds nothing new.
	mustOK(t, "a produce without a credential", send(rootCaller(), "anonymous-token"))
	if n, _ := callerSessionsAt(t, s); n != sessionsMax {
		t.Fatalf("%d caller sessions after a produce without a credential, want %d", n, sessionsMax)
	}
}

// TestHTTPProduceBindsSession: over the HTTP API, a new token's first produce
// past the cap is answered as the reference answers it (503, id 9) and writes
// nothing; once a logout frees a place it produces.
func TestHTTPProduceBindsSession(t *testing.T) {
	cfg := testConfig(t.TempDir(), 2)
	cfg.callerSessionsMax = 1
	s := startTestServer(t, cfg)
	h := newHTTPSide(t, s)
	first, second := h.as("iggy", "iggy"), h.as("iggy", "iggy")
	if code := first.call("POST", "/streams", map[string]any{"name": "s"}, nil); code != 0 {
		t.Fatalf("a stream: %d", code)
	}
	if code := first.call("POST", "/streams/s/topics", map[string]any{"name": "t", "partitions_count": 2,
		"compression_algorithm": "none", "message_expiry": 0, "max_topic_size": 0}, nil); code != 0 {
		t.Fatalf("a topic: %d", code)
	}
	produce := map[string]any{"partitioning": map[string]string{"kind": "partition_id", "value": le32(1)},
		"messages": []map[string]any{{"id": 1, "payload": b64("one")}}}
	status, body := second.raw("POST", "/streams/s/topics/t/messages", produce)
	want := `{"id":9,"code":"cannot_establish_connection","reason":"Cannot establish connection","field":null}`
	if status != 503 || string(body) != want {
		t.Fatalf("a new token's first produce past the cap: %d %s, want 503 %s", status, body, want)
	}
	if got := messagesOnPartition1(t, s, "s"); got != 0 {
		t.Fatalf("%d messages after a refused produce", got)
	}
	if status, body := first.raw("DELETE", "/users/logout", nil); status != 204 {
		t.Fatalf("logout: %d %s", status, body)
	}
	if code := second.call("POST", "/streams/s/topics/t/messages", produce, nil); code != 0 {
		t.Fatalf("the produce after a logout: %d", code)
	}
	if got := messagesOnPartition1(t, s, "s"); got != 1 {
		t.Fatalf("%d messages after a produce", got)
	}
}
