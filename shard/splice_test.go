package shard

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/iggy-shard/iggy-shard/segment"
	"github.com/iggy-shard/iggy-shard/wire"
)

// spliceFile is a test's stand-in for a segment file: known bytes at every offset.
type spliceFile struct {
	path string
	file *os.File
	data []byte
}

func newSpliceFile(t testing.TB, sizeBytes int) *spliceFile {
	t.Helper()
	data := make([]byte, sizeBytes)
	for i := range data {
		data[i] = byte(i*7 + i>>11)
	}
	path := filepath.Join(t.TempDir(), "00000000000000000000.log")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return &spliceFile{path: path, file: f, data: data}
}

// openDescriptors counts the process's descriptors of the file at path.
func (f *spliceFile) openDescriptors(t testing.TB) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		if target, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && target == f.path {
			n++
		}
	}
	return n
}

// A file-runs request (PollMessages, so that nothing else answers it) asks for a
// reply of a 256-byte header, a 16-byte prefix and runs of the test file; its body:
//
//	mode u8 (0 splice if CanSplice, 1 copy, 2 splice), deadline ms u32, run count u8,
//	then per run offset u64, length u64
const (
	spliceModeAny  = 0
	spliceModeCopy = 1
	spliceModeWait = 2 // splice even when CanSplice says it would wait for a pipe
)

type spliceRun struct{ offset, length int64 }

func fileRunsRequest(request uint64, mode byte, deadline time.Duration, runs ...spliceRun) []byte {
	body := make([]byte, 6+16*len(runs))
	body[0] = mode
	binary.LittleEndian.PutUint32(body[1:], uint32(deadline.Milliseconds()))
	body[5] = byte(len(runs))
	for i, r := range runs {
		binary.LittleEndian.PutUint64(body[6+16*i:], uint64(r.offset))
		binary.LittleEndian.PutUint64(body[14+16*i:], uint64(r.length))
	}
	frame := requestHeader(len(body), wire.OperationNonReplicated, uint32(wire.CodePollMessages), request)
	copy(frame[256:], body)
	return frame
}

// expectedFileRunsReply is what either way must put on the wire.
func expectedFileRunsReply(f *spliceFile, request uint64, runs ...spliceRun) []byte {
	total := 0
	for _, r := range runs {
		total += int(r.length)
	}
	out := make([]byte, 256+16, 256+16+total)
	fileRunsHead(out, request, total)
	for _, r := range runs {
		out = append(out, f.data[r.offset:r.offset+r.length]...)
	}
	return out
}

// fileRunsHead writes the reply header and prefix of a reply of bodyRunsBytes of runs.
func fileRunsHead(b []byte, request uint64, bodyRunsBytes int) {
	var h wire.ReplyHeader
	h.Size = uint32(256 + 16 + bodyRunsBytes)
	h.Command = wire.CommandReply
	h.Request = request
	h.Operation = wire.OperationNonReplicated
	h.Put(b[:256])
	for i := range 16 {
		b[256+i] = byte(0xA0 + i)
	}
}

// spliceCounts is what the handlers of a test runtime did, across its shards.
type spliceCounts struct {
	spliced, copied, released, closed atomic.Int64
}

// spliceHandler answers file-runs requests, and PINGs, through testHandler.
type spliceHandler struct {
	testHandler
	file   *spliceFile
	counts *spliceCounts
}

// closeRuns is a spliced reply's Releaser: it closes the reply's own descriptors.
type closeRuns struct {
	runs   []segment.Run
	counts *spliceCounts
}

func (r *closeRuns) Release() {
	for _, run := range r.runs {
		unix.Close(run.FD)
	}
	r.counts.released.Add(1)
}

func (h *spliceHandler) ServeRequest(c *Conn, req *Request) {
	if req.Header.NonReplicatedCode != wire.CodePollMessages {
		h.testHandler.ServeRequest(c, req)
		return
	}
	body := req.Body
	mode := body[0]
	deadline := time.Duration(binary.LittleEndian.Uint32(body[1:])) * time.Millisecond
	runs := make([]spliceRun, body[5])
	total := 0
	for i := range runs {
		runs[i] = spliceRun{int64(binary.LittleEndian.Uint64(body[6+16*i:])), int64(binary.LittleEndian.Uint64(body[14+16*i:]))}
		total += int(runs[i].length)
	}
	var head [256 + 16]byte
	fileRunsHead(head[:], req.Header.Request, total)
	if mode == spliceModeWait || mode == spliceModeAny && c.CanSplice() {
		planned := &closeRuns{counts: h.counts}
		for _, r := range runs {
			fd, err := unix.FcntlInt(h.file.file.Fd(), unix.F_DUPFD_CLOEXEC, 0)
			if err != nil {
				panic(err)
			}
			planned.runs = append(planned.runs, segment.Run{FD: fd, Offset: r.offset, Length: r.length})
		}
		err := c.SendFileRuns(head[:], planned.runs, c.Shard().NowNs()+int64(deadline), planned)
		if err == nil {
			h.counts.spliced.Add(1)
			return
		}
		planned.Release()
		h.counts.released.Add(-1)
		if !errors.Is(err, ErrSpliceUnavailable) {
			return
		}
	}
	h.counts.copied.Add(1)
	b, err := c.Reserve(len(head))
	if err != nil {
		return
	}
	copy(b, head[:])
	for _, r := range runs {
		for off := r.offset; off < r.offset+r.length; {
			n := min(r.offset+r.length-off, sendBufferBytesMax)
			b, err := c.Reserve(int(n))
			if err != nil {
				return
			}
			copy(b, h.file.data[off:off+n])
			off += n
		}
	}
}

func (h *spliceHandler) ConnClosed(c *Conn) {
	h.testHandler.ConnClosed(c)
	h.counts.closed.Add(1)
}

type spliceRig struct {
	t      *testing.T
	rt     *Runtime
	file   *spliceFile
	counts *spliceCounts
}

func startSpliceRig(t *testing.T, cfg Config, fileBytes int) *spliceRig {
	t.Helper()
	g := &spliceRig{t: t, file: newSpliceFile(t, fileBytes), counts: new(spliceCounts)}
	cfg.NewHandler = func(s *Shard) Handler {
		return &spliceHandler{testHandler: testHandler{shard: s}, file: g.file, counts: g.counts}
	}
	g.rt = startTestRuntime(t, cfg)
	return g
}

// stats sums the shards' splice figures.
func (g *spliceRig) stats() Stats {
	g.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var mu sync.Mutex
	var sum Stats
	err := g.rt.Inspect(ctx, func(s *Shard) {
		st := s.Stats()
		mu.Lock()
		defer mu.Unlock()
		sum.PipesLent += st.PipesLent
		sum.PipesCreated += st.PipesCreated
		sum.PipesClosedDirty += st.PipesClosedDirty
		sum.PipeWaits += st.PipeWaits
		sum.SplicedReplies += st.SplicedReplies
		sum.SplicedBytes += st.SplicedBytes
		sum.SpliceRingWakes += st.SpliceRingWakes
	})
	if err != nil {
		g.t.Fatal(err)
	}
	return sum
}

// pipes returns the pipes lent and made, and those closed dirty, over every shard.
func (g *spliceRig) pipes() (lent int, created, closedDirty uint64) {
	st := g.stats()
	return st.PipesLent, st.PipesCreated, st.PipesClosedDirty
}

// settled waits until every spliced reply was released and no pipe is lent, and
// checks that no descriptor of the file is left but the test's own.
func (g *spliceRig) settled() {
	g.t.Helper()
	waitFor(g.t, 10*time.Second, "every spliced reply released", func() bool {
		lent, _, _ := g.pipes()
		return lent == 0 && g.counts.released.Load() == g.counts.spliced.Load()
	})
	if n := g.file.openDescriptors(g.t); n != 1 {
		g.t.Fatalf("%d descriptors of the file open, want 1 (the test's own)", n)
	}
}

// ask sends a file-runs request and checks the reply byte for byte.
func (g *spliceRig) ask(c *testClient, request uint64, mode byte, runs ...spliceRun) {
	g.t.Helper()
	if _, err := c.conn.Write(fileRunsRequest(request, mode, time.Minute, runs...)); err != nil {
		g.t.Fatal(err)
	}
	g.expect(c, request, runs...)
}

func (g *spliceRig) expect(c *testClient, request uint64, runs ...spliceRun) {
	g.t.Helper()
	want := expectedFileRunsReply(g.file, request, runs...)
	got := make([]byte, len(want))
	c.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(c.conn, got); err != nil {
		g.t.Fatalf("reading a reply of %d bytes: %v", len(want), err)
	}
	if !bytes.Equal(got, want) {
		i := 0
		for got[i] == want[i] {
			i++
		}
		g.t.Fatalf("reply %d differs from byte %d of %d", request, i, len(want))
	}
}

// TestSpliceRepliesMatchCopies: replies of one run, of several runs, and of runs
// many times longer than the pipe (several chains of pipe's worths) reach the
// client byte for byte as the copy sends them, in order with the PINGs between
// them; every pipe comes back and every descriptor is closed.
func TestSpliceRepliesMatchCopies(t *testing.T) {
	const pipeBytes = 64 << 10 // the kernel's default, and least, pipe size: many pieces
	g := startSpliceRig(t, Config{ShardCount: 1, PipeSizeBytes: pipeBytes}, 8<<20)
	c := dial(t, g.rt)
	cases := [][]spliceRun{
		{{0, 1000}},
		{{4096, 300 << 10}},
		{{1, 5000}, {100 << 10, 200 << 10}, {7 << 20, 12345}, {3 << 20, 1 << 20}},
		{{5, spliceChainPiecesMax*pipeBytes*2 + 777}}, // more than two chains
	}
	request := uint64(1)
	for _, runs := range cases {
		for _, mode := range []byte{spliceModeCopy, spliceModeAny} {
			g.ask(c, request, mode, runs...)
			request++
			c.ping(request)
			request++
		}
	}
	// Pipelined: several spliced replies queued behind each other and a PING.
	for i := range 4 {
		frame := fileRunsRequest(request+uint64(i), spliceModeAny, time.Minute, spliceRun{int64(i) << 20, 1<<20 + int64(i)})
		if _, err := c.conn.Write(frame); err != nil {
			t.Fatal(err)
		}
	}
	c.conn.Write(pingFrame(request + 4))
	for i := range 4 {
		g.expect(c, request+uint64(i), spliceRun{int64(i) << 20, 1<<20 + int64(i)})
	}
	checkReply(t, c.readFrame(), request+4, 0)
	g.settled()
	if got := g.counts.spliced.Load(); got != int64(len(cases)+4) {
		t.Fatalf("%d replies spliced, want %d", got, len(cases)+4)
	}
	// A pipe is lent to the reply being sent only: one connection needs one.
	st := g.stats()
	if st.PipesCreated != 1 {
		t.Fatalf("%d pipes made for one connection, want 1", st.PipesCreated)
	}
	wantBytes := uint64(0)
	for _, runs := range cases {
		for _, r := range runs {
			wantBytes += uint64(r.length)
		}
	}
	for i := range 4 {
		wantBytes += 1<<20 + uint64(i)
	}
	if st.SplicedReplies != uint64(len(cases)+4) || st.SplicedBytes != wantBytes || st.PipeWaits != 0 {
		t.Fatalf("stats: %d spliced replies of %d bytes, %d waits; want %d of %d, 0", st.SplicedReplies, st.SplicedBytes, st.PipeWaits, len(cases)+4, wantBytes)
	}
}

// TestSpliceToASlowReader: a client with a small receive buffer that reads a little
// at a time gets a 4 MiB spliced reply whole: short splices break the chain and the
// reply goes on step by step.
func TestSpliceToASlowReader(t *testing.T) {
	g := startSpliceRig(t, Config{ShardCount: 1}, 8<<20)
	c := dial(t, g.rt)
	c.conn.(*net.TCPConn).SetReadBuffer(16 << 10)
	runs := []spliceRun{{3, 4 << 20}}
	if _, err := c.conn.Write(fileRunsRequest(1, spliceModeAny, time.Minute, runs...)); err != nil {
		t.Fatal(err)
	}
	want := expectedFileRunsReply(g.file, 1, runs...)
	got := make([]byte, 0, len(want))
	buf := make([]byte, 32<<10)
	c.conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	for reads := 0; len(got) < len(want); reads++ {
		n, err := c.conn.Read(buf[:min(len(buf), len(want)-len(got))])
		if err != nil {
			t.Fatalf("after %d bytes: %v", len(got), err)
		}
		got = append(got, buf[:n]...)
		if reads%8 == 0 {
			time.Sleep(time.Millisecond) // pacing a slow reader, not synchronisation
		}
	}
	if !bytes.Equal(got, want) {
		t.Fatal("the slowly read reply differs from the file")
	}
	c.ping(2)
	g.settled()
	if g.counts.spliced.Load() != 1 {
		t.Fatalf("%d spliced, want 1", g.counts.spliced.Load())
	}
}

// TestSplicePeerClosesMidway: clients that close while their spliced replies are
// being sent (one partly read, one never read, each with more replies queued)
// leave nothing behind: the steps in flight end, the pipes come back (closed when
// they held bytes) and every reply's descriptors are closed; the shard serves on.
func TestSplicePeerClosesMidway(t *testing.T) {
	g := startSpliceRig(t, Config{ShardCount: 1}, 8<<20)
	for round := range 4 {
		c := dial(t, g.rt)
		c.conn.(*net.TCPConn).SetReadBuffer(16 << 10)
		for i := range 3 {
			c.conn.Write(fileRunsRequest(uint64(i+1), spliceModeAny, time.Minute, spliceRun{int64(i), 4 << 20}))
		}
		if round%2 == 0 {
			io.ReadFull(c.conn, make([]byte, 100<<10))
		}
		c.conn.(*net.TCPConn).SetLinger(0) // a reset, at once
		c.conn.Close()
	}
	waitFor(t, 10*time.Second, "the connections closed", func() bool { return g.counts.closed.Load() == 4 })
	g.settled()
	bystander := dial(t, g.rt)
	g.ask(bystander, 1, spliceModeAny, spliceRun{10, 2 << 20})
	g.settled()
}

// TestSpliceOverduePlanClosesTheConnection: a reply still sending at its plan's
// deadline (a client that stopped reading) is cut short: its steps are cancelled,
// the connection closed, the pipe and descriptors given back, long before
// SendTimeout would have acted.
func TestSpliceOverduePlanClosesTheConnection(t *testing.T) {
	g := startSpliceRig(t, Config{ShardCount: 1, FrameTimeout: 100 * time.Millisecond, SendTimeout: time.Hour}, 16<<20)
	c := dial(t, g.rt)
	c.conn.(*net.TCPConn).SetReadBuffer(16 << 10)
	start := time.Now()
	c.conn.Write(fileRunsRequest(1, spliceModeAny, 200*time.Millisecond, spliceRun{0, 12 << 20}))
	waitFor(t, 10*time.Second, "the connection closed", func() bool { return g.counts.closed.Load() == 1 })
	if waited := time.Since(start); waited < 200*time.Millisecond {
		t.Fatalf("closed after %v, before the plan's deadline", waited)
	}
	g.settled()
	// The client sees the head of the reply, then the end: never a whole reply.
	c.conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, _ := io.Copy(io.Discard, c.conn)
	if n >= 256+16+12<<20 {
		t.Fatalf("read %d bytes, the whole reply", n)
	}
}

// TestSpliceSendTimeout: a client that stops reading a spliced reply is cut off
// after SendTimeout, as for a copied one.
func TestSpliceSendTimeout(t *testing.T) {
	const sendTimeout = 300 * time.Millisecond
	g := startSpliceRig(t, Config{ShardCount: 1, SendTimeout: sendTimeout}, 16<<20)
	c := dial(t, g.rt)
	c.conn.(*net.TCPConn).SetReadBuffer(16 << 10)
	start := time.Now()
	c.conn.Write(fileRunsRequest(1, spliceModeAny, time.Hour, spliceRun{0, 12 << 20}))
	waitFor(t, 10*time.Second, "the connection closed", func() bool { return g.counts.closed.Load() == 1 })
	if waited := time.Since(start); waited < sendTimeout {
		t.Fatalf("closed after %v, before SendTimeout", waited)
	}
	g.settled()
}

// TestSplicePoolExhausted: with every pipe of the shard lent (to replies a client
// does not read), CanSplice says no and the reply is copied, byte for byte; a
// reply spliced all the same waits for a pipe, and goes once one comes back.
func TestSplicePoolExhausted(t *testing.T) {
	g := startSpliceRig(t, Config{ShardCount: 1, PipesPerShardMax: 2}, 16<<20)
	var stuck [2]*testClient
	for i := range stuck {
		stuck[i] = dial(t, g.rt)
		stuck[i].conn.(*net.TCPConn).SetReadBuffer(16 << 10)
		stuck[i].conn.Write(fileRunsRequest(1, spliceModeAny, time.Minute, spliceRun{0, 8 << 20}))
	}
	waitFor(t, 5*time.Second, "both pipes lent", func() bool { lent, _, _ := g.pipes(); return lent == 2 })
	c := dial(t, g.rt)
	g.ask(c, 1, spliceModeAny, spliceRun{77, 1 << 20})
	if g.counts.copied.Load() != 1 || g.counts.spliced.Load() != 2 {
		t.Fatalf("copied %d and spliced %d, want 1 and 2", g.counts.copied.Load(), g.counts.spliced.Load())
	}
	waiting := dial(t, g.rt)
	waitingRun := spliceRun{1000, 3 << 20}
	waiting.conn.Write(fileRunsRequest(1, spliceModeWait, time.Minute, waitingRun))
	waitFor(t, 5*time.Second, "the reply queued", func() bool { return g.counts.spliced.Load() == 3 })
	// The head may go ahead (it is queued before the runs); the runs wait.
	want := expectedFileRunsReply(g.file, 1, waitingRun)
	got := make([]byte, len(want))
	waiting.conn.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	early, _ := io.ReadAtLeast(waiting.conn, got, len(got))
	if early > 256+16 {
		t.Fatalf("read %d bytes of a reply that has no pipe", early)
	}
	for _, c := range stuck {
		c.conn.Close()
	}
	waiting.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(waiting.conn, got[early:]); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("the reply that waited for a pipe differs")
	}
	if waits := g.stats().PipeWaits; waits != 1 {
		t.Fatalf("%d waits for a pipe, want 1", waits)
	}
	g.ask(c, 2, spliceModeAny, spliceRun{77, 1 << 20})
	if g.counts.spliced.Load() != 4 {
		t.Fatalf("spliced %d once the pipes came back, want 4", g.counts.spliced.Load())
	}
	g.settled()
}

// TestSpliceManyConnections: connections on two shards ask for spliced replies at
// once, more than the pipes: half copy when CanSplice says no, half splice all the
// same and wait in line for a pipe; every reply arrives whole and in order, and
// nothing is left lent or open.
func TestSpliceManyConnections(t *testing.T) {
	const connCount, repliesPerConn = 16, 6
	g := startSpliceRig(t, Config{ShardCount: 2, PipesPerShardMax: 3, PipeSizeBytes: 256 << 10}, 8<<20)
	var wg sync.WaitGroup
	errs := make(chan error, connCount)
	for i := range connCount {
		c := dial(t, g.rt)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range repliesPerConn {
				runs := []spliceRun{{int64(i*4096 + k), int64(256<<10 + i*1000 + k*77)}, {int64(k) << 20, 300 << 10}}
				mode := byte(spliceModeAny)
				if i%2 == 1 {
					mode = spliceModeWait
				}
				frame := fileRunsRequest(uint64(k+1), mode, time.Minute, runs...)
				if _, err := c.conn.Write(frame); err != nil {
					errs <- err
					return
				}
				want := expectedFileRunsReply(g.file, uint64(k+1), runs...)
				got := make([]byte, len(want))
				c.conn.SetReadDeadline(time.Now().Add(20 * time.Second))
				if _, err := io.ReadFull(c.conn, got); err != nil {
					errs <- err
					return
				}
				if !bytes.Equal(got, want) {
					errs <- fmt.Errorf("connection %d reply %d differs", i, k)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if got := g.counts.spliced.Load() + g.counts.copied.Load(); got != connCount*repliesPerConn {
		t.Fatalf("%d replies, want %d", got, connCount*repliesPerConn)
	}
	st := g.stats()
	t.Logf("spliced %d, copied %d, waits for a pipe %d, pipes made %d", g.counts.spliced.Load(), g.counts.copied.Load(), st.PipeWaits, st.PipesCreated)
	if st.PipesCreated > 6 {
		t.Fatalf("%d pipes made, more than the 2 shards' 3", st.PipesCreated)
	}
	g.settled()
}

// TestSpliceDeclinedOnTLS: a TLS connection has no kernel TLS to splice into, so
// CanSplice says no and SendFileRuns refuses with ErrSpliceUnavailable, queuing
// nothing: the handler copies, and the client reads the reply whole.
func TestSpliceDeclinedOnTLS(t *testing.T) {
	file := newSpliceFile(t, 4<<20)
	counts := new(spliceCounts)
	_, server := startTLSRuntime(t, Config{ShardCount: 1, NewHandler: func(s *Shard) Handler {
		return &spliceHandler{testHandler: testHandler{shard: s}, file: file, counts: counts}
	}})
	c := dialTLS(t, server, false)
	for i, mode := range []byte{spliceModeAny, spliceModeWait} {
		runs := []spliceRun{{9, 1 << 20}, {2 << 20, 5000}}
		c.send(fileRunsRequest(uint64(i+1), mode, time.Minute, runs...))
		want := expectedFileRunsReply(file, uint64(i+1), runs...)
		if got := c.readPlain(len(want)); !bytes.Equal(got, want) {
			t.Fatalf("mode %d: the reply differs", mode)
		}
	}
	if counts.spliced.Load() != 0 || counts.copied.Load() != 2 {
		t.Fatalf("spliced %d, copied %d; want 0 and 2", counts.spliced.Load(), counts.copied.Load())
	}
	c.ping(3)
}

// TestSpliceLongLife: at the production defaults, thousands of spliced replies on
// one connection (pipelined a few at a time, of sizes from a byte to more than a
// pipe) reuse one pipe and the same records, and the process's descriptors are
// where they were: every reply's descriptors closed, no pipe made past the first.
func TestSpliceLongLife(t *testing.T) {
	const replies, depth = 2000, 4
	g := startSpliceRig(t, Config{ShardCount: 1}, 8<<20)
	c := dial(t, g.rt)
	g.ask(c, 0, spliceModeAny, spliceRun{0, 1})
	g.settled()
	descriptorsBefore := countDescriptors(t)
	runOf := func(i int) spliceRun {
		return spliceRun{int64(i*4099) % (6 << 20), int64(1 + (i*7919)%(1<<20+4096))}
	}
	for i := 1; i <= replies; i += depth {
		for k := range depth {
			if _, err := c.conn.Write(fileRunsRequest(uint64(i+k), spliceModeAny, time.Minute, runOf(i+k))); err != nil {
				t.Fatal(err)
			}
		}
		for k := range depth {
			g.expect(c, uint64(i+k), runOf(i+k))
		}
	}
	g.settled()
	st := g.stats()
	if st.SplicedReplies != replies+1 || st.PipesCreated != 1 || st.PipesClosedDirty != 0 {
		t.Fatalf("%d replies spliced, %d pipes made, %d closed dirty; want %d, 1, 0", st.SplicedReplies, st.PipesCreated, st.PipesClosedDirty, replies+1)
	}
	if after := countDescriptors(t); after != descriptorsBefore {
		t.Fatalf("%d descriptors open after the replies, %d before", after, descriptorsBefore)
	}
}

func countDescriptors(t testing.TB) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(entries)
}
