package server

import (
	"context"
	"encoding/binary"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/iggy-shard/iggy-shard/client"
	"github.com/iggy-shard/iggy-shard/metadata"
	"github.com/iggy-shard/iggy-shard/metafiles"
	"github.com/iggy-shard/iggy-shard/passwords"
	"github.com/iggy-shard/iggy-shard/wire"
)

// TestDeniedPasswordWritesNeitherHashNorJournal: a user without permissions sends
// CreateUser, ChangePassword of another user and ChangePassword of itself with a
// wrong current password, over and over. Each is refused with the code a commit
// would have carried (41, 41, 42, in the result section), none is hashed, and none
// reaches the journal; only the wrong current passwords are verified (off the
// metadata writes' path). Its own ChangePassword with the right password still
// commits.
func TestDeniedPasswordWritesNeitherHashNorJournal(t *testing.T) {
	dir := t.TempDir()
	s := testServer(t, dir, 1)
	ctx := testContext(t)
	root := dialRoot(t, s)
	for _, name := range []string{"mallory", "alice"} {
		_, err := root.CreateUser(ctx, name, name+"-password", wire.UserActive, nil)
		mustOK(t, "CreateUser "+name, err)
	}
	mallory := dialAs(t, s, "mallory", "mallory-password")

	var verified, hashed atomic.Int32
	v := s.handlers[0].meta.Passwords()
	v.Intercept(func(hash string, password []byte) bool {
		verified.Add(1)
		return metadata.VerifyPassword(hash, password)
	}, func(n *passwords.NewPassword) ([]byte, error) {
		hashed.Add(1)
		return n.Propose()
	})
	journal := filepath.Join(dir, "metadata", metafiles.JournalFileName)
	before, err := os.Stat(journal)
	if err != nil {
		t.Fatal(err)
	}

	const rounds = 8
	for i := range rounds {
		_, err := mallory.CreateUser(ctx, "eve"+strconv.Itoa(i), "eve-password", wire.UserActive, nil)
		wantCode(t, "CreateUser without manage_users", err, wire.ErrUnauthorized)
		wantCode(t, "ChangePassword of another user without manage_users",
			mallory.ChangePassword(ctx, wire.StringIdentifier([]byte("alice")), "alice-password", "taken"), wire.ErrUnauthorized)
		wantCode(t, "ChangePassword with a wrong current password",
			mallory.ChangePassword(ctx, wire.StringIdentifier([]byte("mallory")), "wrong", "new-password"), wire.ErrInvalidCredentials)
	}
	if n := hashed.Load(); n != 0 {
		t.Errorf("%d new passwords hashed for denied requests, want 0", n)
	}
	if n := verified.Load(); n != rounds {
		t.Errorf("%d passwords verified, want the %d wrong current passwords only", n, rounds)
	}
	if after, err := os.Stat(journal); err != nil || after.Size() != before.Size() {
		t.Fatalf("journal %d bytes before the denied requests, %d after (%v)", before.Size(), after.Size(), err)
	}

	mustOK(t, "ChangePassword of oneself", mallory.ChangePassword(ctx, wire.StringIdentifier([]byte("mallory")), "mallory-password", "new-password"))
	if n := hashed.Load(); n != 1 {
		t.Errorf("%d new passwords hashed, want the one allowed", n)
	}
	dialAs(t, s, "mallory", "new-password")
}

// TestPasswordChecksTakeTurnsBySource: one source address floods the password
// workers with wrong passwords; a login from another address is verified next,
// not after the flood, the flooding source's checks beyond its bound are refused
// with 58 at once, and so is its next login once its failures are counted. The verifier is held while the queue fills, so the
// order it sees is decided by the queue alone (and the workers' race for the
// first two after the release).
func TestPasswordChecksTakeTurnsBySource(t *testing.T) {
	s := testServer(t, t.TempDir(), 1)
	held := newGate(t)
	var orderMu sync.Mutex
	var order []string
	v := s.handlers[0].meta.Passwords()
	v.Intercept(func(hash string, password []byte) bool {
		orderMu.Lock()
		order = append(order, string(password))
		orderMu.Unlock()
		held.hold()
		return metadata.VerifyPassword(hash, password)
	}, nil)

	const flood = passwords.WorkersCount + passwords.WaitingPerSourceMax
	attackers := make([]*rawConn, flood+1)
	for i := range attackers {
		attackers[i] = dialRawFrom(t, s, "127.0.0.2")
	}
	wrong := func(i int) {
		attackers[i].send(rawRequest{client: wire.Uint128{Lo: uint64(i + 1), Hi: 2}, op: wire.OperationRegister,
			body: loginBody(t, wire.ServerProtocolVersion, "iggy", "wrong-"+strconv.Itoa(i))})
	}
	verifying := func() int {
		orderMu.Lock()
		defer orderMu.Unlock()
		return len(order)
	}
	// The workers take theirs first: the bound counts what waits for them.
	for i := range passwords.WorkersCount {
		wrong(i)
	}
	waitForCondition(t, "the workers busy", func() bool { return verifying() == passwords.WorkersCount })
	for i := passwords.WorkersCount; i < flood; i++ {
		wrong(i)
	}
	waitForCondition(t, "the flood waiting", func() bool { return v.Waiting() == passwords.WaitingPerSourceMax })
	over := attackers[flood]
	over.send(rawRequest{client: wire.Uint128{Lo: 99, Hi: 2}, op: wire.OperationRegister,
		body: loginBody(t, wire.ServerProtocolVersion, "iggy", "wrong-over")})
	if h, _ := over.reply(); h.Status != wire.ErrTransientNotAccepted {
		t.Fatalf("a check beyond its source's bound: status %d, want %d", h.Status, wire.ErrTransientNotAccepted)
	}

	good := dialRaw(t, s) // from 127.0.0.1
	good.send(rawRequest{client: wire.Uint128{Lo: 1, Hi: 1}, op: wire.OperationRegister,
		body: loginBody(t, wire.ServerProtocolVersion, "iggy", "iggy")})
	waitForCondition(t, "the good login waiting", func() bool { return v.Waiting() == passwords.WaitingPerSourceMax+1 })
	held.open()
	if h, _ := good.reply(); h.Status != 0 || h.Operation != wire.OperationRegister {
		t.Fatalf("the good login: status %d operation %d", h.Status, h.Operation)
	}
	for _, a := range attackers[:flood] {
		a.wantEviction(wire.EvictionInvalidCredentials)
	}
	// 18 failures spent the flooding source's budget: its next login is refused at
	// once, the right password or not, and costs no argon2id run.
	late := dialRawFrom(t, s, "127.0.0.2")
	late.send(rawRequest{client: wire.Uint128{Lo: 100, Hi: 2}, op: wire.OperationRegister,
		body: loginBody(t, wire.ServerProtocolVersion, "iggy", "iggy")})
	if h, _ := late.reply(); h.Status != wire.ErrTransientNotAccepted {
		t.Fatalf("a login from a source past its failures: status %d, want %d", h.Status, wire.ErrTransientNotAccepted)
	}
	orderMu.Lock()
	defer orderMu.Unlock()
	if len(order) != flood+1 {
		t.Fatalf("%d passwords verified, want the %d of the flood and the good login's", len(order), flood+1)
	}
	// After the held checks, the flooding source's turn comes at most once before
	// the good login's (a new source joins the end of the round).
	if at := slices.Index(order, "iggy"); at < 0 || at > passwords.WorkersCount+1 {
		t.Fatalf("the good login was verified %d-th (order %q), want within one round after the %d held checks", at+1, order, passwords.WorkersCount)
	}
}

// dialRawFrom connects to s from the loopback address local (127.0.0.0/8 is all
// loopback on Linux), so a test can have several source addresses.
func dialRawFrom(t *testing.T, s *Server, local string) *rawConn {
	t.Helper()
	d := net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
	conn, err := d.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &rawConn{t: t, conn: conn}
}

// BenchmarkMetadataWriteDuringUnauthorizedFlood: root's CreateStream latency (one
// shard: shard 0 serves everything) while 8 connections of a user without
// permissions send CreateUser, ChangePassword of another user and ChangePassword of
// itself with a wrong current password in a loop, against the same writes with
// nothing else going on.
func BenchmarkMetadataWriteDuringUnauthorizedFlood(b *testing.B) {
	for _, flooding := range []bool{false, true} {
		name := "idle"
		if flooding {
			name = "flood"
		}
		b.Run(name, func(b *testing.B) {
			_, dial := benchPasswordServer(b)
			root := dial("iggy", "iggy")
			ctx := context.Background()
			if _, err := root.CreateUser(ctx, "mallory", "mallory-password", wire.UserActive, nil); err != nil {
				b.Fatal(err)
			}
			if _, err := root.CreateUser(ctx, "alice", "alice-password", wire.UserActive, nil); err != nil {
				b.Fatal(err)
			}
			stop := make(chan struct{})
			var flood sync.WaitGroup
			var denied atomic.Int64
			if flooding {
				for range 8 {
					mallory := dial("mallory", "mallory-password")
					flood.Go(func() {
						for i := 0; ; i++ {
							select {
							case <-stop:
								return
							default:
							}
							var err error
							switch i % 3 {
							case 0:
								_, err = mallory.CreateUser(ctx, "eve"+strconv.Itoa(i), "eve-password", wire.UserActive, nil)
							case 1:
								err = mallory.ChangePassword(ctx, wire.StringIdentifier([]byte("alice")), "x", "y")
							default:
								err = mallory.ChangePassword(ctx, wire.StringIdentifier([]byte("mallory")), "wrong", "y")
							}
							if err == nil {
								b.Error("a denied request succeeded")
								return
							}
							denied.Add(1)
						}
					})
				}
			}
			latencies := make([]time.Duration, 0, b.N)
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				start := time.Now()
				if _, err := root.CreateStream(ctx, "s"+strconv.Itoa(i)); err != nil {
					b.Fatal(err)
				}
				latencies = append(latencies, time.Since(start))
			}
			b.StopTimer()
			close(stop)
			flood.Wait()
			reportLatencies(b, latencies)
			b.ReportMetric(float64(denied.Load()), "denied")
		})
	}
}

// BenchmarkLoginDuringWrongPasswordStorm: good logins (connect, LOGIN_REGISTER,
// close) from 127.0.0.1 while 16 connections from 127.0.0.2 log in with a wrong
// password over and over, as an SDK would: a refusal (eviction) closes the
// connection and the attacker dials again; a 58 is retried on the same connection
// 50 ms later. Against the same logins with no storm. Before the per-source queues
// the workers served the checks first come first served, so each good login waited
// behind the whole storm's backlog; before the failure budget the storm had both
// workers to itself.
func BenchmarkLoginDuringWrongPasswordStorm(b *testing.B) {
	for _, storming := range []bool{false, true} {
		name := "idle"
		if storming {
			name = "storm"
		}
		b.Run(name, func(b *testing.B) {
			s, _ := benchPasswordServer(b)
			ctx, cancel := context.WithCancel(context.Background())
			var storm sync.WaitGroup
			var evicted, refused atomic.Int64
			if storming {
				for i := range 16 {
					storm.Go(func() { stormLogins(ctx, s.Addr().String(), uint64(i), &evicted, &refused) })
				}
				// Let the storm fill the workers' queue before measuring.
				for evicted.Load() < 16 && ctx.Err() == nil {
					time.Sleep(time.Millisecond)
				}
			}
			latencies := make([]time.Duration, 0, b.N)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				start := time.Now()
				c, err := client.Dial(ctx, s.Addr().String(), client.WithCredentials("iggy", "iggy"))
				if err != nil {
					b.Fatal(err)
				}
				latencies = append(latencies, time.Since(start))
				c.Close()
			}
			b.StopTimer()
			cancel()
			storm.Wait()
			reportLatencies(b, latencies)
			b.ReportMetric(float64(evicted.Load())/b.Elapsed().Seconds(), "wrong-logins/s")
			b.ReportMetric(float64(refused.Load())/b.Elapsed().Seconds(), "refused-58/s")
		})
	}
}

// stormLogins logs in from 127.0.0.2 with a wrong password until ctx ends, the way
// an SDK retries: a new connection after each eviction, the same frame again 50 ms
// after a 58.
func stormLogins(ctx context.Context, addr string, n uint64, evicted, refused *atomic.Int64) {
	body, err := (&wire.LoginRegister{
		Version:  wire.ClientVersionInfo{ProtocolVersion: wire.ServerProtocolVersion, SDKName: []byte("storm"), SDKVersion: []byte("1")},
		Username: []byte("iggy"), Password: []byte("wrong-password"),
	}).Append(nil)
	if err != nil {
		return
	}
	var h wire.RequestHeader
	h.Size = uint32(wire.HeaderSize + len(body))
	h.Command, h.Operation = wire.CommandRequest, wire.OperationRegister
	h.Client = wire.Uint128{Lo: n + 1, Hi: 0x5707}
	h.RequestChecksum = wire.RequestChecksum(body)
	frame := make([]byte, h.Size)
	h.Put(frame)
	copy(frame[wire.HeaderSize:], body)
	d := net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}
	header := make([]byte, wire.HeaderSize)
	for ctx.Err() == nil {
		conn, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return
		}
		for ctx.Err() == nil {
			conn.SetDeadline(time.Now().Add(30 * time.Second))
			if _, err := conn.Write(frame); err != nil {
				break
			}
			if _, err := io.ReadFull(conn, header); err != nil {
				break
			}
			if header[60] == byte(wire.CommandEviction) {
				evicted.Add(1)
				break
			}
			if rest := int(binary.LittleEndian.Uint32(header[wire.SizeFieldOffset:])) - wire.HeaderSize; rest > 0 {
				io.CopyN(io.Discard, conn, int64(rest))
			}
			refused.Add(1)
			time.Sleep(50 * time.Millisecond)
		}
		conn.Close()
	}
}

// benchPasswordServer starts a one-shard server for the password benchmarks and
// returns a dialer of logged-in clients closed at the end.
func benchPasswordServer(b *testing.B) (*Server, func(user, password string) *client.Client) {
	cfg := defaultSetup()
	cfg.TCPAddress, cfg.SystemPath, cfg.ShardCount, cfg.PinCPUs = "127.0.0.1:0", b.TempDir(), 1, false
	s, err := start(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s.Shutdown(ctx)
	})
	return s, func(user, password string) *client.Client {
		c, err := client.Dial(context.Background(), s.Addr().String(), client.WithCredentials(user, password))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { c.Close() })
		return c
	}
}

// TestHugePollsStayWithinTheirMemory: 100 connections poll a partition of 6 MiB at
// once, each asking for 2^32-1 messages, so each read takes the whole partition.
// The shard's polls hold at most config.Config.PollMemoryBytesMax (64 MiB here) at once:
// the process's resident memory grows by less than that plus a margin for the rest,
// while every poll is answered with every message. (Before the bound each poll read
// into a buffer of its own, which its job kept: 100 of them, about 600 MiB, for
// good.) The replies are read and dropped as they arrive, so the test's own clients
// hold next to nothing.
func TestHugePollsStayWithinTheirMemory(t *testing.T) {
	const (
		polls            = 100
		pollMemoryBytes  = 64 << 20
		marginBytes      = 48 << 20
		batches          = 8
		messagesPerBatch = 8
		payloadBytes     = 96 << 10
	)
	cfg := defaultSetup()
	cfg.TCPAddress, cfg.SystemPath, cfg.ShardCount, cfg.PinCPUs = "127.0.0.1:0", t.TempDir(), 2, false
	cfg.FrameSizeMaxBytes = 1 << 20 // a poll's reservation: 32 MiB and one frame
	cfg.PollMemoryBytesMax = pollMemoryBytes
	s, err := start(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopServer(t, s) })
	ctx := testContext(t)
	root := dialRoot(t, s)
	st, err := root.CreateStream(ctx, "huge")
	mustOK(t, "CreateStream", err)
	stream := wire.NumericIdentifier(st.ID)
	tp, err := root.CreateTopic(ctx, stream, "polls", 1, nil)
	mustOK(t, "CreateTopic", err)
	topic := wire.NumericIdentifier(tp.ID)
	batch := make([]client.Message, messagesPerBatch)
	for i := range batch {
		batch[i].Payload = make([]byte, payloadBytes)
	}
	for range batches {
		_, err := root.SendMessages(ctx, stream, topic, wire.Partitioning{Kind: wire.PartitioningPartitionID}, batch)
		mustOK(t, "SendMessages", err)
	}
	token, err := root.CreatePersonalAccessToken(ctx, "polls", 0)
	mustOK(t, "CreatePersonalAccessToken", err)
	login, err := (&wire.LoginRegisterWithPAT{
		Version: wire.ClientVersionInfo{ProtocolVersion: wire.ServerProtocolVersion, SDKName: []byte("raw-test"), SDKVersion: []byte("1")},
		Token:   []byte(token),
	}).Append(nil)
	mustOK(t, "LoginRegisterWithPAT", err)
	poll, err := (&wire.PollMessages{
		Consumer: wire.Consumer{Kind: wire.ConsumerSingle, ID: wire.NumericIdentifier(1)},
		StreamID: stream, TopicID: topic, Partition: wire.OptionalPartition{ID: 0, Set: true},
		Strategy: wire.PollingStrategy{Kind: wire.PollingFirst}, Count: ^uint32(0),
	}).Append(nil)
	mustOK(t, "PollMessages", err)

	conns := make([]*rawConn, polls)
	sessions := make([]uint64, polls)
	for i := range conns {
		conns[i] = dialRaw(t, s)
		client := wire.Uint128{Lo: uint64(i + 1), Hi: 0x9011}
		conns[i].send(rawRequest{client: client, op: wire.OperationRegister, body: login})
		h, body := conns[i].reply()
		payload, result, err := wire.SplitResult(body)
		var reply wire.LoginRegisterReply
		if h.Status != 0 || err != nil || result != 0 || reply.Decode(payload) != nil {
			t.Fatalf("token login %d: status %d result %d (%v)", i, h.Status, result, err)
		}
		sessions[i] = reply.Session
	}
	runtime.GC()
	before := residentBytes(t)
	var peak atomic.Int64
	peak.Store(before)
	sampling, sampled := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			if rss := residentBytes(t); rss > peak.Load() {
				peak.Store(rss)
			}
			select {
			case <-sampling:
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()

	for i, c := range conns {
		c.send(rawRequest{client: wire.Uint128{Lo: uint64(i + 1), Hi: 0x9011}, request: 1, session: sessions[i],
			op: wire.OperationNonReplicated, code: wire.CodePollMessages, body: poll})
	}
	counts := make([]uint32, polls)
	var readers sync.WaitGroup
	for i, c := range conns {
		readers.Go(func() { counts[i] = c.pollReplyCount() })
	}
	readers.Wait()
	close(sampling)
	<-sampled
	for i, n := range counts {
		if n != batches*messagesPerBatch {
			t.Errorf("poll %d: %d messages, want %d", i, n, batches*messagesPerBatch)
		}
	}
	growth := peak.Load() - before
	t.Logf("resident memory: %d MiB before the polls, %d MiB more at the peak (bound %d MiB + %d MiB margin)",
		before>>20, growth>>20, pollMemoryBytes>>20, marginBytes>>20)
	if growth > pollMemoryBytes+marginBytes {
		t.Fatalf("100 huge polls grew resident memory by %d MiB, beyond the polls' bound of %d MiB and a %d MiB margin",
			growth>>20, pollMemoryBytes>>20, marginBytes>>20)
	}
}

// pollReplyCount reads a PollMessages reply, dropping its messages as they arrive,
// and returns its messages_count.
func (r *rawConn) pollReplyCount() uint32 {
	r.conn.SetDeadline(time.Now().Add(60 * time.Second))
	var head [wire.HeaderSize + wire.PolledMessagesPrefixSize]byte
	if _, err := io.ReadFull(r.conn, head[:wire.HeaderSize]); err != nil {
		r.t.Errorf("poll reply header: %v", err)
		return 0
	}
	h, err := wire.DecodeReplyHeader(head[:wire.HeaderSize], 64<<20)
	if err != nil || h.Status != 0 || h.BodySizeBytes() < wire.PolledMessagesPrefixSize {
		r.t.Errorf("poll reply: %v (status %d, %d bytes)", err, binary.LittleEndian.Uint32(head[216:]), binary.LittleEndian.Uint32(head[48:]))
		return 0
	}
	rest := h.BodySizeBytes() - wire.PolledMessagesPrefixSize
	if _, err := io.ReadFull(r.conn, head[wire.HeaderSize:]); err != nil {
		r.t.Errorf("poll reply prefix: %v", err)
		return 0
	}
	if _, err := io.CopyN(io.Discard, r.conn, int64(rest)); err != nil {
		r.t.Errorf("poll reply body: %v", err)
		return 0
	}
	return binary.LittleEndian.Uint32(head[wire.HeaderSize+12:])
}

// residentBytes is the process's resident set size (VmRSS).
func residentBytes(t *testing.T) int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		t.Fatal(err)
	}
	fields := strings.Fields(string(b))
	pages, err := strconv.ParseInt(fields[1], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return pages * int64(os.Getpagesize())
}
