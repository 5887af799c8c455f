package shard

import (
	"context"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/iggy-shard/iggy-shard/fdpass"
	"github.com/iggy-shard/iggy-shard/wire"
)

// socketCopies sums, over the shards, the sockets whose copy is in the splice
// ring's table, and the open connections on registered sockets (those handed
// over by msg_ring: the rest are plain descriptors, with nothing to copy).
func (g *spliceRig) socketCopies() (copies, registered int) {
	g.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var mu sync.Mutex
	err := g.rt.Inspect(ctx, func(s *Shard) {
		mu.Lock()
		defer mu.Unlock()
		copies += s.spliceFilesInstalled()
		for _, c := range s.clients.conns.items {
			if c != nil && c.state == linkOpen && c.direct {
				registered++
			}
		}
	})
	if err != nil {
		g.t.Fatal(err)
	}
	return copies, registered
}

// spliceRings counts the shards that made their splice ring.
func (g *spliceRig) spliceRings() int {
	g.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var mu sync.Mutex
	n := 0
	err := g.rt.Inspect(ctx, func(s *Shard) {
		mu.Lock()
		defer mu.Unlock()
		if s.splice.ring != nil {
			n++
		}
	})
	if err != nil {
		g.t.Fatal(err)
	}
	return n
}

// oneCopyEach waits until every open registered connection has its copy and no
// other copy is left, and returns how many there are.
func (g *spliceRig) oneCopyEach(what string) int {
	g.t.Helper()
	var copies, registered int
	waitFor(g.t, 5*time.Second, what, func() bool {
		copies, registered = g.socketCopies()
		return copies == registered
	})
	return copies
}

// closedCount waits until the handler saw n connections close.
func (g *spliceRig) closedCount(n int64) {
	g.t.Helper()
	waitFor(g.t, 5*time.Second, "connections closed", func() bool { return g.counts.closed.Load() == n })
}

// closedByServer checks that the server closed the connection: the client reads
// to the end of the stream, not to a deadline. A socket the splice ring still
// held would never send its FIN.
func closedByServer(t *testing.T, c *testClient, what string) {
	t.Helper()
	c.conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.Copy(io.Discard, c.conn); err != nil {
		t.Fatalf("%s: the client never saw the connection end: %v", what, err)
	}
}

// TestSpliceSocketCopyEndsWithItsConnection: a registered socket's copy in the
// splice ring's table is made at its first spliced reply, on every shard, and
// dropped on every way a connection ends: the client's close, the server's
// (an eviction, and a spliced reply cut short at its plan's deadline) and
// shutdown. Each time the server closes, the client sees the end of the stream,
// which a copy left in the table would hold back. Many connections through the
// same slots each get a copy of their own socket, and the copies take no
// descriptor of the process (a shard's splice ring and its eventfd take two).
func TestSpliceSocketCopyEndsWithItsConnection(t *testing.T) {
	g := startSpliceRig(t, Config{ShardCount: 3, FdPass: fdpass.ModeMsgRing, PipeSizeBytes: 64 << 10, FrameTimeout: 100 * time.Millisecond, SpliceRing: true}, 16<<20)
	reply := spliceRun{4097, 200 << 10} // several pieces, from inside a page
	clients := make([]*testClient, 4)
	for i := range clients {
		clients[i] = dial(t, g.rt)
		if i == 2 { // it stops reading a reply below: a small window from the start
			clients[i].conn.(*net.TCPConn).SetReadBuffer(16 << 10)
		}
		clients[i].ping(1)
	}
	fdsBefore := openFdCount(t)
	for _, c := range clients {
		g.ask(c, 2, spliceModeWait, reply)
		g.ask(c, 3, spliceModeWait, reply) // the copy made once serves the next
	}
	if n := g.oneCopyEach("a copy for each connection spliced"); n < 2 {
		t.Fatalf("%d of 4 connections on registered sockets: too few to test", n)
	}
	g.settled()
	_, pipesCreated, _ := g.pipes()
	rings := g.spliceRings()
	if fds := openFdCount(t); fds != fdsBefore+2*int(pipesCreated)+2*rings {
		t.Fatalf("%d descriptors open, want %d before the splices, 2 for each of %d pipes made and 2 for each of %d splice rings",
			fds, fdsBefore, pipesCreated, rings)
	}

	// The client closes.
	clients[0].conn.Close()
	g.closedCount(1)
	g.oneCopyEach("the client's close drops its copy")

	// The server evicts.
	if _, err := clients[1].conn.Write(requestHeader(0, wire.OperationNonReplicated, uint32(wire.CodeGetPersonalAccessTokens), 4)); err != nil {
		t.Fatal(err)
	}
	closedByServer(t, clients[1], "an eviction")
	g.closedCount(2)
	g.oneCopyEach("the eviction drops its copy")

	// The server cuts short a spliced reply the client does not read, with its
	// steps in the kernel.
	if _, err := clients[2].conn.Write(fileRunsRequest(5, spliceModeWait, 100*time.Millisecond, spliceRun{0, 12 << 20})); err != nil {
		t.Fatal(err)
	}
	g.closedCount(3)
	closedByServer(t, clients[2], "a reply cut short")
	g.oneCopyEach("the reply cut short drops its copy")

	// Connections come and go through the same slots: each splices through a copy
	// of its own socket (another's would send the reply to the wrong client).
	for round := range 40 {
		c := dial(t, g.rt)
		g.ask(c, uint64(round), spliceModeWait, reply)
		c.conn.Close()
	}
	g.oneCopyEach("the copies of closed connections dropped")
	g.settled()

	// Shutdown closes the last.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := g.rt.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	closedByServer(t, clients[3], "shutdown")
}

// spliceFilesInstalled counts the sockets whose copy is in the splice ring's
// table now: one per connection that spliced a reply and is not closed yet.
func (s *Shard) spliceFilesInstalled() int {
	n := 0
	for _, f := range s.splice.files {
		if f == socketCopyInstalled {
			n++
		}
	}
	return n
}

// TestSpliceOnTheConnectionRing: a shard that could not make its splice ring
// splices on the connection ring, byte for byte the same, and makes the ring
// when it tries again.
func TestSpliceOnTheConnectionRing(t *testing.T) {
	g := startSpliceRig(t, Config{ShardCount: 2, FdPass: fdpass.ModeMsgRing, PipeSizeBytes: 64 << 10, SpliceRing: true}, 4<<20)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	failedNow := func(s *Shard) { s.splice.ringTriedNs = s.NowNs() }
	if err := g.rt.Inspect(ctx, failedNow); err != nil {
		t.Fatal(err)
	}
	var clients []*testClient
	for i := range 4 {
		c := dial(t, g.rt)
		clients = append(clients, c)
		g.ask(c, uint64(i), spliceModeWait, spliceRun{4097, 300 << 10}, spliceRun{100, 5000})
	}
	if n := g.spliceRings(); n != 0 {
		t.Fatalf("%d splice rings made within a second of a failure", n)
	}
	if n, _ := g.socketCopies(); n != 0 {
		t.Fatalf("%d socket copies without a splice ring", n)
	}
	g.settled()
	retryNow := func(s *Shard) { s.splice.ringTriedNs = s.NowNs() - spliceRingRetryNs }
	if err := g.rt.Inspect(ctx, retryNow); err != nil {
		t.Fatal(err)
	}
	for i, c := range clients {
		g.ask(c, uint64(10+i), spliceModeWait, spliceRun{4097, 300 << 10})
	}
	if n := g.spliceRings(); n != 2 {
		t.Fatalf("%d splice rings made on the retry, want 2", n)
	}
	g.oneCopyEach("a copy for each registered connection")
	g.settled()
}

// TestSpliceRingWakesOnlyForWhatWaits: the splice ring's completions wake the
// shard only when something waits on them. A consumer's replies, each read
// before the next request, are reaped at the turn the next request starts, not
// by a wake-up each (with the lazy bound a minute long, only a request that
// overtakes its reply's last completion may arm the eventfd); replies queued
// behind a spliced reply in flight are sent without waiting for the bound;
// and at the default bound the last reply's plan is released though no other
// event comes.
func TestSpliceRingWakesOnlyForWhatWaits(t *testing.T) {
	lazyNs := spliceReapLazyNs
	t.Cleanup(func() { spliceReapLazyNs = lazyNs }) // after the runtimes' shutdown
	spliceReapLazyNs = int64(time.Minute)
	g := startSpliceRig(t, Config{ShardCount: 1, PipeSizeBytes: 64 << 10, SpliceRing: true}, 4<<20)
	c := dial(t, g.rt)
	const replies = 64
	reply := spliceRun{4097, 300 << 10} // several pieces, from inside a page
	for i := range replies {
		g.ask(c, uint64(i), spliceModeWait, reply)
	}
	if wakes := g.stats().SpliceRingWakes; wakes > replies/4 {
		t.Fatalf("%d wake-ups by the splice ring for %d replies read one by one", wakes, replies)
	}
	const pipelined = 4
	start := time.Now()
	for i := range pipelined {
		if _, err := c.conn.Write(fileRunsRequest(uint64(replies+i), spliceModeWait, time.Minute, reply)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range pipelined {
		g.expect(c, uint64(replies+i), reply)
	}
	if waited := time.Since(start); waited > 5*time.Second {
		t.Fatalf("replies queued behind a spliced reply took %v: the shard was not woken for them", waited)
	}
	g.settled()

	spliceReapLazyNs = lazyNs // the shard above is idle; the next reads it at start
	g = startSpliceRig(t, Config{ShardCount: 1, PipeSizeBytes: 64 << 10, SpliceRing: true}, 4<<20)
	c = dial(t, g.rt)
	g.ask(c, 1, spliceModeWait, reply)
	waitFor(t, 5*time.Second, "the reply's plan released", func() bool { // no Inspect: it would wake the shard
		return g.counts.released.Load() == 1
	})
}
