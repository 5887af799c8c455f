package server

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/iggy-shard/iggy-shard/client"
	"github.com/iggy-shard/iggy-shard/vsr"
	"github.com/iggy-shard/iggy-shard/wire"
)

// Sessions, retries and the client table in a three-node cluster: the table
// changes only through committed ops, on every node alike (checked at each test's
// end, checkReplicatedStateAtEnd), and a request is executed once per session.

// holdJournal holds node s's journal writer at its next fdatasync, until g opens.
func holdJournal(s *Server, g *gate) {
	w := s.handlers[0].meta.Journal()
	w.SetBeforeSync(g.hold)
}

// hasStreamOn reports whether s's metadata plane has applied a stream named name.
func hasStreamOn(t *testing.T, s *Server, name string) bool {
	found := false
	onMetaShard(t, s, func(p *metaPlane) {
		for st := range p.State().Streams() {
			if st.Name == name {
				found = true
			}
		}
	})
	return found
}

// sessionOn is client's session epoch in s's client table (0: none).
func sessionOn(t *testing.T, s *Server, client wire.Uint128) uint64 {
	var epoch uint64
	onMetaShard(t, s, func(p *metaPlane) { epoch, _, _ = p.Session(client) })
	return epoch
}

// result reads a CreateStream reply and returns its status and committed result.
func (r *rawConn) result() (wire.ErrorCode, wire.ErrorCode) {
	r.t.Helper()
	h, body := r.reply()
	return createResult(r.t, h, body)
}

// createResult is a CreateStream reply's status and committed result.
func createResult(t *testing.T, h *wire.ReplyHeader, body []byte) (wire.ErrorCode, wire.ErrorCode) {
	t.Helper()
	if h.Status != 0 {
		return h.Status, 0
	}
	_, result, err := wire.SplitResult(body)
	if err != nil {
		t.Fatalf("CreateStream reply: %v", err)
	}
	return 0, result
}

// TestClusterPreparedWriteIsNeverAnswered58: the primary takes a CreateStream
// and sends its prepare, which a backup journals and acknowledges; then the
// primary stops (its journal write held: its core takes no input) and the others
// elect a new primary, whose view commits the op. When the old primary runs again
// it learns the view and steps down: the write it had prepared is answered with
// its commit (or 57 if it could not learn it in time), never 58, which says the
// request was never admitted: a client would send it again elsewhere and be told
// the stream exists. (The plane answered every write in flight 58 when its
// replica stopped leading; here the old primary learns the view and the commit in
// one Ready, and the old plane passed too: metaplane's
// TestPreparedWriteOfAStepDownWaitsForItsFate takes the two apart.)
func TestClusterPreparedWriteIsNeverAnswered58(t *testing.T) {
	servers := startCluster(t, clusterConfigs(t, 3, testClusterSecret))
	waitUntil(t, "the root user", func() bool { return dialCluster(t, servers[0]) != nil })
	r := dialRaw(t, servers[0])
	client := wire.Uint128{Lo: 0x5758, Hi: 1}
	epoch := r.login(client)

	held := newGate(t)
	holdJournal(servers[0], held)
	r.send(rawRequest{client: client, session: epoch, request: 1, op: wire.OperationCreateStream, body: createStreamBody(t, "fate")})
	held.awaitReached(t, "the primary's journal write of the CreateStream")
	waitUntil(t, "the others elect a new primary", func() bool { l, ok := agreedLeader(servers[1:]); return ok && l != 0 })
	waitUntil(t, "the new view commits the op", func() bool { return hasStreamOn(t, servers[1], "fate") })
	held.open()

	status, result := r.result()
	switch {
	case status == wire.ErrTransientNotAccepted:
		t.Fatal("a write prepared by a primary that stepped down, committed by the next view, answered 58 (not admitted)")
	case status == wire.ErrTransientNotCommitted:
		t.Log("answered 57: the old primary did not learn the op's fate in time")
	case status != 0 || result != 0:
		t.Fatalf("CreateStream: status %d result %d", status, result)
	}
	for i, s := range servers {
		waitUntil(t, fmt.Sprintf("node %d has the stream", i), func() bool { return hasStreamOn(t, s, "fate") })
	}
}

// TestClusterRetryAtANewPrimary: an op prepared in the old view, committed in the
// new one, retried at the new primary by the same client id registered again
// (its table entry rebound, its requests numbered on): the retry is answered with
// the reply cached for the op, not executed again (1012, the stream exists).
func TestClusterRetryAtANewPrimary(t *testing.T) {
	servers := startCluster(t, clusterConfigs(t, 3, testClusterSecret))
	waitUntil(t, "the root user", func() bool { return dialCluster(t, servers[0]) != nil })
	r := dialRaw(t, servers[0])
	client := wire.Uint128{Lo: 0x7e7, Hi: 1}
	epoch := r.login(client)
	body := createStreamBody(t, "retried")

	held := newGate(t)
	holdJournal(servers[0], held)
	r.send(rawRequest{client: client, session: epoch, request: 1, op: wire.OperationCreateStream, body: body})
	held.awaitReached(t, "the primary's journal write of the CreateStream")
	var leader uint8
	waitUntil(t, "the others elect a new primary", func() (ok bool) { leader, ok = agreedLeader(servers[1:]); return ok && leader != 0 })
	primary := servers[leaderIndex(servers, leader)]
	waitUntil(t, "the new primary applies the op", func() bool { return hasStreamOn(t, primary, "retried") })

	retry := dialRaw(t, primary)
	again := retry.login(client)
	if again <= epoch {
		t.Fatalf("registered again at epoch %d, not above %d", again, epoch)
	}
	retry.send(rawRequest{client: client, session: again, request: 1, op: wire.OperationCreateStream, body: body})
	h, reply := retry.reply()
	status, result := createResult(t, h, reply)
	if status != 0 || result != 0 {
		t.Fatalf("the retry at the new primary: status %d result %d, want the cached success", status, result)
	}
	held.open()
	r.frameOrNil() // the old primary's answer, whatever it is
	count := 0
	onMetaShard(t, primary, func(p *metaPlane) {
		for st := range p.State().Streams() {
			if st.Name == "retried" {
				count++
			}
		}
	})
	if count != 1 {
		t.Fatalf("%d streams named retried", count)
	}
}

// TestClusterReconnectAndRetry: the scenario of the issue. A client logs in with
// client id C and creates a stream as request 1; its connection closes, which ends
// the session on every node (an EndSessions op); it logs in again with C and sends
// request 1 again: a new session's request, executed anew (1012: at least once
// across sessions), and every node's table holds the same entry for C.
func TestClusterReconnectAndRetry(t *testing.T) {
	servers := startCluster(t, clusterConfigs(t, 3, testClusterSecret))
	waitUntil(t, "the root user", func() bool { return dialCluster(t, servers[0]) != nil })
	client := wire.Uint128{Lo: 0xC, Hi: 7}
	body := createStreamBody(t, "again")
	r := dialRaw(t, servers[0])
	epoch := r.login(client)
	r.send(rawRequest{client: client, session: epoch, request: 1, op: wire.OperationCreateStream, body: body})
	if status, result := r.result(); status != 0 || result != 0 {
		t.Fatalf("request 1: status %d result %d", status, result)
	}
	r.conn.Close()
	for i, s := range servers {
		waitUntil(t, fmt.Sprintf("the session ends on node %d", i), func() bool { return sessionOn(t, s, client) == 0 })
	}
	r2 := dialRaw(t, servers[0])
	epoch2 := r2.login(client)
	r2.send(rawRequest{client: client, session: epoch2, request: 1, op: wire.OperationCreateStream, body: body})
	if status, result := r2.result(); status != 0 || result != wire.ErrStreamNameAlreadyExists {
		t.Fatalf("request 1 of the new session: status %d result %d, want executed: %d", status, result, wire.ErrStreamNameAlreadyExists)
	}
	for i, s := range servers {
		waitUntil(t, fmt.Sprintf("node %d holds the new session", i), func() bool { return sessionOn(t, s, client) == epoch2 })
	}
	sameMetadata(t, servers)
}

// TestClusterTwoRequestsThenCloseAndANewSession: two requests, a close (the
// session ends on every node, its entry gone), a new session under a fresh id
// that numbers its requests from 1 again.
func TestClusterTwoRequestsThenCloseAndANewSession(t *testing.T) {
	servers := startCluster(t, clusterConfigs(t, 3, testClusterSecret))
	waitForRootUser(t, servers[1])
	first := wire.Uint128{Lo: 0x2, Hi: 1}
	r := dialRaw(t, servers[1]) // at a backup: the login and the close are forwarded
	epoch := r.login(first)
	primary := dialRaw(t, servers[0])
	pe := primary.login(first) // the same id at the primary: the backup's session is fenced
	for request := uint64(1); request <= 2; request++ {
		primary.send(rawRequest{client: first, session: pe, request: request, op: wire.OperationCreateStream, body: createStreamBody(t, fmt.Sprint("two-", request))})
		if status, result := primary.result(); status != 0 || result != 0 {
			t.Fatalf("request %d: status %d result %d", request, status, result)
		}
	}
	// The backup's connection of the older session closes: the newer session
	// stays (the end names the epoch that closed).
	r.conn.Close()
	primary.send(rawRequest{client: first, session: pe, request: 3, op: wire.OperationNonReplicated, code: wire.CodeGetStreams})
	if h, _ := primary.reply(); h.Status != 0 {
		t.Fatalf("the newer session after the older one's close: status %d", h.Status)
	}
	sameMetadata(t, servers)
	if got := sessionOn(t, servers[2], first); got != pe {
		t.Fatalf("node 2 holds epoch %d for the client, want the newer session's %d (the older was %d)", got, pe, epoch)
	}
	primary.conn.Close()
	for i, s := range servers {
		waitUntil(t, fmt.Sprintf("the session ends on node %d", i), func() bool { return sessionOn(t, s, first) == 0 })
	}
	second := wire.Uint128{Lo: 0x3, Hi: 1}
	r3 := dialRaw(t, servers[0])
	e3 := r3.login(second)
	r3.send(rawRequest{client: second, session: e3, request: 1, op: wire.OperationCreateStream, body: createStreamBody(t, "two-3")})
	if status, result := r3.result(); status != 0 || result != 0 {
		t.Fatalf("the new session's request 1: status %d result %d", status, result)
	}
}

// TestClusterRetryWhileInThePipeline: a request sent again on its connection while
// its op is still in the primary's pipeline (the primary's journal write held)
// waits its turn and is answered from the client table once the op commits: the
// same reply bytes, one op.
func TestClusterRetryWhileInThePipeline(t *testing.T) {
	servers := startCluster(t, clusterConfigs(t, 3, testClusterSecret))
	waitUntil(t, "the root user", func() bool { return dialCluster(t, servers[0]) != nil })
	r := dialRaw(t, servers[0])
	client := wire.Uint128{Lo: 0x919e, Hi: 1}
	epoch := r.login(client)
	held := newGate(t)
	holdJournal(servers[0], held)
	q := rawRequest{client: client, session: epoch, request: 1, op: wire.OperationCreateStream, body: createStreamBody(t, "piped")}
	r.send(q)
	held.awaitReached(t, "the primary's journal write")
	r.send(q)
	// Let go before a view change can take the primary's place.
	held.open()
	h1, b1 := r.reply()
	h2, b2 := r.reply()
	if s1, r1 := createResult(t, h1, b1); s1 != 0 || r1 != 0 {
		t.Fatalf("the request: status %d result %d", s1, r1)
	}
	if h2.Status != 0 || h2.Op != h1.Op || string(b2) != string(b1) {
		t.Fatalf("the retry: status %d op %d, want the cached reply of op %d", h2.Status, h2.Op, h1.Op)
	}
}

// waitForRootUser waits until s applied the root user's creation: a login at a
// backup before is refused 58.
func waitForRootUser(t *testing.T, s *Server) {
	t.Helper()
	waitUntil(t, "the node knows the root user", func() bool {
		return newHTTPSide(t, s).login("iggy", "iggy") != uint32(wire.ErrTransientNotAccepted)
	})
}

// TestClusterLogoutInFlight: a logout at a backup is forwarded; while it is in
// flight (the primary's journal write held) the connection closes too. The
// session ends once, on every node, and the backup answers the logout.
func TestClusterLogoutInFlight(t *testing.T) {
	servers := startCluster(t, clusterConfigs(t, 3, testClusterSecret))
	waitForRootUser(t, servers[2])
	client := wire.Uint128{Lo: 0x10, Hi: 9}
	r := dialRaw(t, servers[2])
	epoch := r.login(client)
	for i, s := range servers {
		waitUntil(t, fmt.Sprintf("node %d holds the session", i), func() bool { return sessionOn(t, s, client) == epoch })
	}
	held := newGate(t)
	holdJournal(servers[0], held)
	r.send(rawRequest{client: client, session: epoch, request: 1, op: wire.OperationLogout})
	held.awaitReached(t, "the primary's journal write of the logout")
	held.open()
	if h, _ := r.reply(); h.Status != 0 && h.Status != wire.ErrTransientNotCommitted {
		t.Fatalf("the logout: status %d", h.Status)
	}
	r.conn.Close()
	for i, s := range servers {
		waitUntil(t, fmt.Sprintf("the session ends on node %d", i), func() bool { return sessionOn(t, s, client) == 0 })
	}
}

// TestClusterManyRegistrationsKeepTheTableBounded: more logins over time than the
// client table holds (8,192): each connection closes after its login, and its
// session ends through the log, so the table stays small on every node and the
// sessions held open all along are never evicted.
func TestClusterManyRegistrationsKeepTheTableBounded(t *testing.T) {
	servers := startCluster(t, clusterConfigs(t, 3, testClusterSecret))
	root := dialCluster(t, servers[0])
	// Every request is bounded by its client's request timeout: the logins
	// together took longer than testContext's 30 s on a loaded machine, and the
	// rest of them failed.
	ctx := t.Context()
	token, err := root.CreatePersonalAccessToken(ctx, "churn", 0)
	mustOK(t, "CreatePersonalAccessToken", err)
	live := make([]*client.Client, 3)
	for i := range live {
		live[i] = dialCluster(t, servers[i])
	}
	const logins, workers = vsr.ClientsTableMaxDefault + 200, 16
	started := time.Now()
	var wg sync.WaitGroup
	var failures atomic.Int64
	var firstFailure atomic.Pointer[error]
	for w := range workers {
		wg.Go(func() {
			for i := w; i < logins; i += workers {
				c, err := client.Dial(ctx, servers[i%3].Addr().String(), client.WithPersonalAccessToken(token), client.WithLeaderRedirection(false),
					client.WithTransientRetry(client.TransientRetry{Interval: 20 * time.Millisecond, NotCommittedWindow: 5 * time.Second, NotAcceptedWindow: 5 * time.Second}))
				if err != nil {
					failures.Add(1)
					firstFailure.CompareAndSwap(nil, &err)
					continue
				}
				c.Close()
			}
		})
	}
	wg.Wait()
	t.Logf("%d logins and closes in %v (%d failed)", logins, time.Since(started).Round(time.Millisecond), failures.Load())
	if failures.Load() > 0 {
		t.Fatalf("%d logins failed, the first: %v", failures.Load(), *firstFailure.Load())
	}
	sameMetadata(t, servers)
	for i, s := range servers {
		var sessions int
		onMetaShard(t, s, func(p *metaPlane) { sessions = p.Table().Len() })
		waitUntil(t, fmt.Sprintf("node %d's table back to the live sessions", i), func() bool {
			onMetaShard(t, s, func(p *metaPlane) { sessions = p.Table().Len() })
			return sessions <= len(live)+1
		})
	}
	for i, c := range live {
		if _, err := c.CreateStream(ctx, fmt.Sprint("live-", i)); err != nil && !errors.Is(err, wire.ErrTransientNotAccepted) {
			t.Fatalf("live session %d after the churn: %v", i, err)
		}
		if err := c.Ping(ctx); err != nil {
			t.Fatalf("live session %d after the churn: %v", i, err)
		}
	}
}
