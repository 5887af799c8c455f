package server

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/iggy-shard/iggy-shard/wire"
)

// The sessions of callers' credentials (metahost/callers.go): one per credential,
// registered once, at most the cap of them, an ended one answered 40 once and
// forgotten, a logout ending its credential's.

// credentialCaller is the root user calling with a credential.
func credentialCaller(credential string) Caller {
	c := rootCaller()
	c.Credential = credential
	return c
}

func createStreamAs(t *testing.T, s *Server, caller Caller, name string) error {
	t.Helper()
	_, err := s.Do(testContext(t), caller, wire.CodeCreateStream, appendBody(t, &wire.CreateStream{Name: []byte(name)}))
	return err
}

// callerSessionOf is the session credential's writes go under at s.
func callerSessionOf(t *testing.T, s *Server, credential string) (client wire.Uint128, epoch uint64, ok bool) {
	t.Helper()
	onMetaShard(t, s, func(*metaPlane) { client, epoch, ok = s.handlers[0].meta.CallerSession(credential) })
	return client, epoch, ok
}

func callerSessionsAt(t *testing.T, s *Server) (sessions, tableLen int) {
	t.Helper()
	onMetaShard(t, s, func(p *metaPlane) { sessions, tableLen = s.handlers[0].meta.CallerSessions(), p.Table().Len() })
	return sessions, tableLen
}

// waitSessionEnded waits until every node of servers dropped client from its table.
func waitSessionEnded(t *testing.T, servers []*Server, client wire.Uint128) {
	t.Helper()
	for i, s := range servers {
		waitUntil(t, fmt.Sprint("node ", i, " ends the session"), func() (ended bool) {
			onMetaShard(t, s, func(p *metaPlane) { _, _, registered := p.Session(client); ended = !registered })
			return ended
		})
	}
}

func TestDoSessionsPerCredential(t *testing.T) {
	cfg := testConfig(t.TempDir(), 2)
	s := startTestServer(t, cfg)
	callerSessionScenario(t, []*Server{s}, s, 0)
}

func TestClusterDoSessionsPerCredential(t *testing.T) {
	cfgs := clusterConfigs(t, 3, testClusterSecret)
	const sessionsMax = 12
	for i := range cfgs {
		cfgs[i].callerSessionsMax = sessionsMax
	}
	servers := startCluster(t, cfgs)
	primary := servers[0]
	waitUntil(t, "the primary takes writes", func() bool {
		return createStreamAs(t, primary, credentialCaller("jwt:first"), "first") == nil
	})
	callerSessionScenario(t, servers, primary, sessionsMax)
	// A backup registers no session: 58, as to a binary client.
	if err := createStreamAs(t, servers[1], credentialCaller("jwt:at-a-backup"), "nope"); err != wire.ErrTransientNotAccepted {
		t.Fatalf("a write at a backup: %v, want 58", err)
	}
	if n, _ := callerSessionsAt(t, servers[1]); n != 0 {
		t.Fatalf("a backup holds %d caller sessions", n)
	}
}

// callerSessionScenario runs the credentials' sessions through their life at
// primary (sessionsMax 0: the default cap, half the client table).
func callerSessionScenario(t *testing.T, servers []*Server, primary *Server, sessionsMax int) {
	if sessionsMax == 0 {
		sessionsMax = 4096
	}
	sessions0, table0 := callerSessionsAt(t, primary)

	// Two tokens of one user: two sessions; a token's second write, the same.
	alice, bob := credentialCaller("jwt:alice"), credentialCaller("jwt:bob")
	mustOK(t, "alice's write", createStreamAs(t, primary, alice, "alice-1"))
	mustOK(t, "bob's write", createStreamAs(t, primary, bob, "bob-1"))
	aliceClient, _, okA := callerSessionOf(t, primary, "jwt:alice")
	bobClient, _, okB := callerSessionOf(t, primary, "jwt:bob")
	if !okA || !okB || aliceClient == bobClient {
		t.Fatalf("sessions of two tokens of one user: %v %v, %v %v", aliceClient, okA, bobClient, okB)
	}
	mustOK(t, "alice's second write", createStreamAs(t, primary, alice, "alice-2"))
	if again, _, _ := callerSessionOf(t, primary, "jwt:alice"); again != aliceClient {
		t.Fatalf("alice's second write went under %v, not her session %v", again, aliceClient)
	}
	if n, l := callerSessionsAt(t, primary); n != sessions0+2 || l != table0+2 {
		t.Fatalf("%d caller sessions, %d table entries after two tokens; before %d, %d", n, l, sessions0, table0)
	}

	// Many first writes of one token at once: one Register.
	herd := credentialCaller("jwt:herd")
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := range 16 {
		wg.Go(func() { errs <- createStreamAs(t, primary, herd, fmt.Sprint("herd-", i)) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		mustOK(t, "a write of the herd", err)
	}
	if n, l := callerSessionsAt(t, primary); n != sessions0+3 || l != table0+3 {
		t.Fatalf("%d caller sessions, %d table entries after the herd, want %d, %d", n, l, sessions0+3, table0+3)
	}

	// The cluster ends alice's session (as a full table's eviction would): her
	// next write answers 40 and is not applied; the one after registers anew.
	_, aliceEpoch, _ := callerSessionOf(t, primary, "jwt:alice")
	onMetaShard(t, primary, func(p *metaPlane) { p.EndSession(aliceClient, aliceEpoch, primary.nowMicros()) })
	waitSessionEnded(t, servers, aliceClient)
	if err := createStreamAs(t, primary, alice, "alice-evicted"); err != wire.ErrUnauthenticated {
		t.Fatalf("a write whose session was ended: %v, want 40", err)
	}
	if hasStreamOn(t, primary, "alice-evicted") {
		t.Fatal("the write answered 40 was applied")
	}
	if _, _, ok := callerSessionOf(t, primary, "jwt:alice"); ok {
		t.Fatal("the ended session is still alice's")
	}
	mustOK(t, "alice's write after", createStreamAs(t, primary, alice, "alice-3"))
	if again, _, ok := callerSessionOf(t, primary, "jwt:alice"); !ok || again == aliceClient {
		t.Fatalf("alice's session after: %v %v, before %v", again, ok, aliceClient)
	}

	// The cap: filled, a new token is refused 9 and the others write on.
	fill := sessionsMax - (sessions0 + 3)
	fillErrs := make(chan error, fill)
	next := make(chan int, fill)
	for i := range fill {
		next <- i
	}
	close(next)
	for range 16 {
		wg.Go(func() {
			for i := range next {
				// A name taken: committed as a rejection, under a session.
				_, err := primary.Do(testContext(t), credentialCaller(fmt.Sprint("pat:fill-", i)), wire.CodeCreateStream,
					appendBody(t, &wire.CreateStream{Name: []byte("alice-1")}))
				if err != wire.ErrStreamNameAlreadyExists {
					fillErrs <- fmt.Errorf("credential %d: %v", i, err)
				}
			}
		})
	}
	wg.Wait()
	close(fillErrs)
	for err := range fillErrs {
		t.Fatal(err)
	}
	if n, _ := callerSessionsAt(t, primary); n != sessionsMax {
		t.Fatalf("%d caller sessions, want the cap %d", n, sessionsMax)
	}
	if err := createStreamAs(t, primary, credentialCaller("jwt:over"), "over"); err != wire.ErrCannotEstablishConnection {
		t.Fatalf("a new token past the cap: %v, want 9", err)
	}
	mustOK(t, "bob's write at the cap", createStreamAs(t, primary, bob, "bob-2"))

	// A logout ends its token's session: a new token takes the place.
	if _, err := primary.Do(testContext(t), bob, wire.CodeLogoutUser, nil); err != nil {
		t.Fatalf("bob's logout: %v", err)
	}
	if _, _, ok := callerSessionOf(t, primary, "jwt:bob"); ok {
		t.Fatal("bob's session outlived his logout")
	}
	waitSessionEnded(t, servers, bobClient)
	mustOK(t, "a new token after a logout", createStreamAs(t, primary, credentialCaller("jwt:over"), "over"))

	// An expired token's session makes room at the cap.
	if _, err := primary.Do(testContext(t), credentialCaller("pat:fill-0"), wire.CodeLogoutUser, nil); err != nil {
		t.Fatalf("a logout: %v", err)
	}
	expired := credentialCaller("jwt:expired")
	expired.ExpiryMicros = uint64(time.Now().Add(-time.Minute).UnixMicro())
	mustOK(t, "an expired token's write", createStreamAs(t, primary, expired, "expired"))
	expiredClient, _, _ := callerSessionOf(t, primary, "jwt:expired")
	mustOK(t, "a new token at the cap with an expired one", createStreamAs(t, primary, credentialCaller("jwt:late"), "late"))
	if _, _, ok := callerSessionOf(t, primary, "jwt:expired"); ok {
		t.Fatal("the expired token kept its session")
	}
	waitSessionEnded(t, servers, expiredClient)
	if n, _ := callerSessionsAt(t, primary); n != sessionsMax {
		t.Fatalf("%d caller sessions at the end, want %d", n, sessionsMax)
	}
}

// TestClusterDoSessionsEndWithTheirPrimary: a primary that a view change made a
// backup ends its callers' sessions on every node (their writes go to the new
// primary, under its sessions), so the callers' share of the client table stays
// one node's cap; the new primary registers its own.
func TestClusterDoSessionsEndWithTheirPrimary(t *testing.T) {
	servers := startCluster(t, clusterConfigs(t, 3, testClusterSecret))
	old := servers[0]
	waitUntil(t, "the primary takes writes", func() bool {
		return createStreamAs(t, old, credentialCaller("jwt:idle"), "idle") == nil
	})
	idle, _, _ := callerSessionOf(t, old, "jwt:idle")
	mustOK(t, "a write", createStreamAs(t, old, credentialCaller("jwt:writing"), "writing-1"))
	writing, _, _ := callerSessionOf(t, old, "jwt:writing")

	// The old primary is cut off in the middle of a write of jwt:writing.
	held := newGate(t)
	holdJournal(old, held)
	answered := make(chan error, 1)
	go func() { answered <- createStreamAs(t, old, credentialCaller("jwt:writing"), "writing-2") }()
	held.awaitReached(t, "the primary's journal write of the CreateStream")
	var leader uint8
	waitUntil(t, "the others elect a new primary", func() (ok bool) { leader, ok = agreedLeader(servers[1:]); return ok && leader != 0 })
	primary := servers[leaderIndex(servers, leader)]
	held.open()
	err := <-answered
	t.Logf("the write cut off: %v", err)

	waitUntil(t, "the old primary drops its callers' sessions", func() bool { n, _ := callerSessionsAt(t, old); return n == 0 })
	waitSessionEnded(t, servers, idle)
	waitSessionEnded(t, servers, writing)
	mustOK(t, "a write at the new primary", createStreamAs(t, primary, credentialCaller("jwt:writing"), "writing-3"))
	if _, _, ok := callerSessionOf(t, primary, "jwt:writing"); !ok {
		t.Fatal("the new primary registered no session")
	}
}

// TestHTTPSessionPerToken: over the HTTP API, two logins of one user write under
// two sessions; past the cap a new token's write is answered as the reference
// answers it (503, id 9, retry-after) while a token with a session writes on; a
// logout ends its token's session and frees its place.
func TestHTTPSessionPerToken(t *testing.T) {
	cfg := testConfig(t.TempDir(), 2)
	cfg.callerSessionsMax = 2
	s := startTestServer(t, cfg)
	h := newHTTPSide(t, s)
	first, second, third := h.as("iggy", "iggy"), h.as("iggy", "iggy"), h.as("iggy", "iggy")
	if code := first.call("POST", "/streams", map[string]any{"name": "one"}, nil); code != 0 {
		t.Fatalf("the first token's write: %d", code)
	}
	if code := second.call("POST", "/streams", map[string]any{"name": "two"}, nil); code != 0 {
		t.Fatalf("the second token's write: %d", code)
	}
	if n, _ := callerSessionsAt(t, s); n != 2 {
		t.Fatalf("%d sessions after two tokens' writes, want 2", n)
	}
	status, body := third.raw("POST", "/streams", map[string]any{"name": "three"})
	want := `{"id":9,"code":"cannot_establish_connection","reason":"Cannot establish connection","field":null}`
	if status != 503 || string(body) != want {
		t.Fatalf("a third token past the cap: %d %s, want 503 %s", status, body, want)
	}
	if code := first.call("POST", "/streams", map[string]any{"name": "one-again"}, nil); code != 0 {
		t.Fatalf("the first token's write at the cap: %d", code)
	}
	if status, body := second.raw("DELETE", "/users/logout", nil); status != 204 {
		t.Fatalf("logout: %d %s", status, body)
	}
	if n, _ := callerSessionsAt(t, s); n != 1 {
		t.Fatalf("%d sessions after a logout, want 1", n)
	}
	if code := third.call("POST", "/streams", map[string]any{"name": "three"}, nil); code != 0 {
		t.Fatalf("the third token's write after a logout: %d", code)
	}
}
