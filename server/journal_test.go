package server

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/iggy-shard/iggy-shard/client"
	"github.com/iggy-shard/iggy-shard/metafiles"
	"github.com/iggy-shard/iggy-shard/vsr"
	"github.com/iggy-shard/iggy-shard/wire"
)

// TestMetadataWriteDoesNotStallShardZero: while a metadata write waits for its
// journal fdatasync, shard 0 goes on serving, and the writes behind it wait their turn.
// With one shard every request lands on shard 0; the test holds the journal before
// the fdatasync of a CreateStream, then: a PING and a read are answered at once (the
// read without the stream: it is not committed), a second CreateStream from another
// client waits, and once the journal is let go both commit, in order, and survive a
// restart.
func TestMetadataWriteDoesNotStallShardZero(t *testing.T) {
	dir := t.TempDir()
	s := testServer(t, dir, 1)
	first, second, reader := dialRoot(t, s), dialRoot(t, s), dialRoot(t, s)
	ctx := testContext(t)

	held := newGate(t)
	w := s.handlers[0].meta.Journal()
	w.SetBeforeSync(held.hold)

	type created struct {
		stream *wire.StreamDetails
		err    error
	}
	firstDone, secondDone := make(chan created, 1), make(chan created, 1)
	go func() {
		st, err := first.CreateStream(ctx, "first")
		firstDone <- created{st, err}
	}()
	held.awaitReached(t, "the CreateStream at the journal")
	if err := reader.Ping(ctx); err != nil {
		t.Fatalf("PING while the journal is held: %v", err)
	}
	if streams, err := reader.GetStreams(ctx); err != nil || len(streams) != 0 {
		t.Fatalf("streams while the first is journaling: %+v, %v; want none yet", streams, err)
	}
	go func() {
		st, err := second.CreateStream(ctx, "second")
		secondDone <- created{st, err}
	}()
	// The second write reaches shard 0 and waits behind the first.
	waitForCondition(t, "the second write waiting", func() bool {
		return s.handlers[0].meta.Plane().WritesWaiting() == 1
	})
	if err := reader.Ping(ctx); err != nil {
		t.Fatalf("PING while a write waits: %v", err)
	}
	select {
	case c := <-firstDone:
		t.Fatalf("the first CreateStream finished while its journal was held: %+v", c)
	case c := <-secondDone:
		t.Fatalf("the second CreateStream finished before the first: %+v", c)
	default:
	}
	held.open()
	a, b := <-firstDone, <-secondDone
	if a.err != nil || b.err != nil {
		t.Fatalf("creates after the release: %v, %v", a.err, b.err)
	}
	if !(a.stream.ID < b.stream.ID) {
		t.Fatalf("stream ids %d, %d: want the first committed first", a.stream.ID, b.stream.ID)
	}

	stopServer(t, s)
	s2 := testServer(t, dir, 1)
	streams, err := dialRoot(t, s2).GetStreams(ctx)
	if err != nil || len(streams) != 2 || string(streams[0].Name) != "first" || string(streams[1].Name) != "second" {
		t.Fatalf("streams after a restart: %+v, %v", streams, err)
	}
}

// TestShutdownFinishesTheJournaledWrite: a shutdown that finds a metadata write
// waiting for its fdatasync, and another waiting behind it, finishes both: the
// journaled one is waited for, the other journaled inline, and a restart finds both.
func TestShutdownFinishesTheJournaledWrite(t *testing.T) {
	dir := t.TempDir()
	s := testServer(t, dir, 2)
	first, second := dialRoot(t, s), dialRoot(t, s)
	ctx := testContext(t)

	held := newGate(t)
	w := s.handlers[0].meta.Journal()
	w.SetBeforeSync(held.hold)
	go first.CreateStream(ctx, "journaled")
	held.awaitReached(t, "the CreateStream at the journal")
	go second.CreateStream(ctx, "waiting")
	waitForCondition(t, "the second write waiting", func() bool {
		return s.handlers[0].meta.Plane().WritesWaiting() == 1
	})
	stopped := make(chan error, 1)
	go func() { stopped <- s.Shutdown(ctx) }()
	held.open()
	if err := <-stopped; err != nil {
		t.Fatalf("Shutdown with metadata writes in flight: %v", err)
	}
	s2 := testServer(t, dir, 2)
	streams, err := dialRoot(t, s2).GetStreams(ctx)
	if err != nil || len(streams) != 2 || string(streams[0].Name) != "journaled" || string(streams[1].Name) != "waiting" {
		t.Fatalf("streams after the restart: %+v, %v", streams, err)
	}
}

// TestJournalFailureRefusesWrites: when the journal cannot be written, the write that
// hit it and every later one are refused as not committed (an op was numbered and
// cannot be taken back), reads and PINGs go on, and a restart recovers what the
// journal held.
func TestJournalFailureRefusesWrites(t *testing.T) {
	dir := t.TempDir()
	s := testServer(t, dir, 1)
	ctx := testContext(t)
	// Without replays: the client would otherwise replay a 57 for 30 s.
	root, err := client.Dial(ctx, s.Addr().String(), client.WithCredentials("iggy", "iggy"),
		client.WithTransientRetry(client.TransientRetry{}))
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	if _, err := root.CreateStream(ctx, "before"); err != nil {
		t.Fatal(err)
	}
	// Swap a read-only descriptor in under the journal's: its next write fails with
	// EBADF, as a failing disk would fail it.
	readOnly, err := os.Open(filepath.Join(dir, "metadata", metafiles.JournalFileName))
	if err != nil {
		t.Fatal(err)
	}
	defer readOnly.Close()
	if err := unix.Dup2(int(readOnly.Fd()), int(s.meta.Files.JournalFile().Fd())); err != nil {
		t.Fatal(err)
	}
	_, err = root.CreateStream(ctx, "after")
	wantCode(t, "CreateStream on a failing journal", err, wire.ErrTransientNotCommitted)
	_, err = root.CreateStream(ctx, "again")
	wantCode(t, "CreateStream after the journal failed", err, wire.ErrTransientNotCommitted)
	if err := root.Ping(ctx); err != nil {
		t.Fatalf("PING after the journal failed: %v", err)
	}
	streams, err := root.GetStreams(ctx)
	if err != nil || len(streams) != 1 || string(streams[0].Name) != "before" {
		t.Fatalf("streams after the journal failed: %+v, %v", streams, err)
	}

	stopServer(t, s)
	s2 := testServer(t, dir, 1)
	streams, err = dialRoot(t, s2).GetStreams(ctx)
	if err != nil || len(streams) != 1 || string(streams[0].Name) != "before" {
		t.Fatalf("streams after a restart: %+v, %v", streams, err)
	}
}

// TestWritesWaitingShareOneFsync: group commit through the router. While one
// client's CreateStream is held before its fdatasync, five other clients' writes
// reach shard 0 and wait; released, the five commit together in one append and one
// fdatasync: two journal fdatasyncs in all (journalFsyncs counts the appends' only,
// not a snapshot's files).
func TestWritesWaitingShareOneFsync(t *testing.T) {
	s := testServer(t, t.TempDir(), 2)
	ctx := testContext(t)
	const others = 5
	first := dialRoot(t, s)
	clients := make([]*client.Client, others)
	for i := range clients {
		clients[i] = dialRoot(t, s)
	}
	held := newGate(t)
	w := s.handlers[0].meta.Journal()
	w.SetBeforeSync(held.hold)
	fsyncsBefore := s.journalFsyncs.snapshot().count
	done := make(chan error, others+1)
	go func() {
		_, err := first.CreateStream(ctx, "first")
		done <- err
	}()
	held.awaitReached(t, "the first CreateStream at the journal")
	for i, c := range clients {
		go func() {
			_, err := c.CreateStream(ctx, fmt.Sprint("waiting-", i))
			done <- err
		}()
	}
	waitForCondition(t, "the other writes waiting", func() bool {
		return s.handlers[0].meta.Plane().WritesWaiting() == others
	})
	held.open()
	for range others + 1 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if fsyncs := s.journalFsyncs.snapshot().count - fsyncsBefore; fsyncs != 2 {
		t.Fatalf("%d writes, the last %d waiting together, took %d fdatasyncs; want 2", others+1, others, fsyncs)
	}
	streams, err := first.GetStreams(ctx)
	if err != nil || len(streams) != others+1 {
		t.Fatalf("streams: %d, %v", len(streams), err)
	}
}

// TestLoginWaitsForAccountWrites: logins are decided on the committed state, so
// one that arrives while a DeleteUser of its user is in flight waits for it,
// and is then refused, rather than commit a session for a user deleted before it.
func TestLoginWaitsForAccountWrites(t *testing.T) {
	s := testServer(t, t.TempDir(), 2)
	ctx := testContext(t)
	root := dialRoot(t, s)
	if _, err := root.CreateUser(ctx, "doomed", "doomed-password", wire.UserActive, nil); err != nil {
		t.Fatal(err)
	}
	held := newGate(t)
	w := s.handlers[0].meta.Journal()
	w.SetBeforeSync(held.hold)
	deleted := make(chan error, 1)
	go func() { deleted <- root.DeleteUser(ctx, wire.StringIdentifier([]byte("doomed"))) }()
	held.awaitReached(t, "the DeleteUser at the journal")
	login := make(chan error, 1)
	go func() {
		c, err := client.Dial(ctx, s.Addr().String(), client.WithCredentials("doomed", "doomed-password"),
			client.WithTransientRetry(client.TransientRetry{}))
		if err == nil {
			c.Close()
		}
		login <- err
	}()
	waitForCondition(t, "the login waiting for the DeleteUser", func() bool {
		return s.handlers[0].meta.Plane().LoginsWaiting() == 1
	})
	held.open()
	if err := <-deleted; err != nil {
		t.Fatal(err)
	}
	if err := <-login; err == nil {
		t.Fatal("a login decided while its user's DeleteUser was in flight logged in")
	}
}

// TestClusterRepairsACorruptJournalEntry: a backup of a cluster of three stops,
// and an entry in the middle of its metadata journal rots (intact entries follow,
// so no torn write explains it). It still starts (a single node would refuse: it
// has no peer to repair from), reports the op as faulty, and repairs the entry
// from its peers: its journal reads intact again and it holds every write.
func TestClusterRepairsACorruptJournalEntry(t *testing.T) {
	cfgs := clusterConfigs(t, 3, testClusterSecret)
	servers := startCluster(t, cfgs)
	pc := dialCluster(t, servers[0])
	const streams = 6
	for i := range streams {
		if _, err := pc.CreateStream(testContext(t), fmt.Sprintf("rot-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	bc := dialCluster(t, servers[2])
	waitUntil(t, "the backup holds every write", func() bool { return hasStream(t, bc, fmt.Sprintf("rot-%d", streams-1)) })
	bc.Close()
	stopServer(t, servers[2])

	path := filepath.Join(cfgs[2].SystemPath, "metadata", metafiles.JournalFileName)
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var offsets []int
	var ops []uint64
	if _, err := vsr.ScanJournal(raw, metafiles.FrameMax, func(h *wire.PrepareHeader, _ []byte) error {
		ops = append(ops, h.Op)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := vsr.ScanJournalHoles(raw, metafiles.FrameMax, func(_ *wire.PrepareHeader, _ []byte, offset int) error {
		offsets = append(offsets, offset)
		return nil
	}, nil); err != nil {
		t.Fatal(err)
	}
	if len(offsets) < 3 {
		t.Fatalf("the backup's journal holds %d entries, want at least 3", len(offsets))
	}
	rotten := len(offsets) / 2
	raw[offsets[rotten]+40] ^= 0x10 // in the header: its identity no longer matches
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}

	servers[2] = startTestServer(t, cfgs[2])
	waitUntil(t, "the restarted backup rejoins", func() bool { l, ok := agreedLeader(servers); return ok && l == 0 })
	bc = dialCluster(t, servers[2])
	waitUntil(t, "the restarted backup holds every write", func() bool {
		for i := range streams {
			if !hasStream(t, bc, fmt.Sprintf("rot-%d", i)) {
				return false
			}
		}
		return true
	})
	waitUntil(t, fmt.Sprintf("the corrupt entry of op %d is repaired on disk", ops[rotten]), func() bool {
		raw, err := os.ReadFile(path)
		if err != nil {
			return false
		}
		found := false
		_, err = vsr.ScanJournal(raw, metafiles.FrameMax, func(h *wire.PrepareHeader, _ []byte) error {
			found = found || h.Op == ops[rotten]
			return nil
		})
		return err == nil && found
	})
	if _, err := pc.CreateStream(testContext(t), "after"); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the repaired backup follows", func() bool { return hasStream(t, bc, "after") })
}
