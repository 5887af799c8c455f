package server

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/iggy-shard/iggy-shard/client"
	"github.com/iggy-shard/iggy-shard/request"
	"github.com/iggy-shard/iggy-shard/wire"
)

// The seam for a second transport (caller.go): every kind of command through Do
// against the same through a binary client.

var testCallerAddr = netip.MustParseAddrPort("127.0.0.1:40000")

func rootCaller() Caller { return Caller{UserID: 0, LoggedIn: true, Addr: testCallerAddr} }

func tokenLoginBody(t testing.TB, token string) []byte {
	t.Helper()
	r := wire.LoginRegisterWithPAT{Version: wire.ClientVersionInfo{ProtocolVersion: wire.ServerProtocolVersion, SDKName: []byte("test"), SDKVersion: []byte("1")},
		Token: []byte(token)}
	b, err := r.Append(nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func appendBody(t testing.TB, a interface{ Append([]byte) ([]byte, error) }) []byte {
	t.Helper()
	b, err := a.Append(nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func callSendBody(t testing.TB, stream, topic string, partition uint32, payloads ...string) []byte {
	t.Helper()
	meta := wire.SendMessages{StreamID: wire.StringIdentifier([]byte(stream)), TopicID: wire.StringIdentifier([]byte(topic)),
		Partitioning: wire.Partitioning{Kind: wire.PartitioningPartitionID, PartitionID: partition}, MessagesCount: uint32(len(payloads))}
	body, err := meta.AppendMetadata(nil)
	if err != nil {
		t.Fatal(err)
	}
	var bb wire.BatchBuilder
	bb.Reset(body)
	for i, p := range payloads {
		if err := bb.Append(wire.Uint128{Lo: uint64(i + 1)}, uint64(time.Now().UnixMicro()), []byte(p), nil); err != nil {
			t.Fatal(err)
		}
	}
	body, err = bb.Finish()
	if err != nil {
		t.Fatal(err)
	}
	return body
}

func pollBody(t testing.TB, stream, topic string, partition uint32) []byte {
	t.Helper()
	return appendBody(t, &wire.PollMessages{Consumer: wire.Consumer{Kind: wire.ConsumerSingle, ID: wire.NumericIdentifier(7)},
		StreamID: wire.StringIdentifier([]byte(stream)), TopicID: wire.StringIdentifier([]byte(topic)),
		Partition: wire.OptionalPartition{Set: true, ID: partition}, Strategy: wire.PollingStrategy{Kind: wire.PollingOffset}, Count: 100})
}

func offsetTarget(stream, topic string, partition uint32) (wire.Consumer, wire.Identifier, wire.Identifier, wire.OptionalPartition) {
	return wire.Consumer{Kind: wire.ConsumerSingle, ID: wire.NumericIdentifier(7)}, wire.StringIdentifier([]byte(stream)),
		wire.StringIdentifier([]byte(topic)), wire.OptionalPartition{Set: true, ID: partition}
}

// sameAnswer fails unless Do and the binary client answered alike: equal bytes, or
// the same error code.
func sameAnswer(t *testing.T, what string, viaDo []byte, doErr error, viaBinary []byte, binaryErr error) {
	t.Helper()
	if doErr != nil || binaryErr != nil {
		var a, b wire.ErrorCode
		if !errors.As(doErr, &a) || !errors.As(binaryErr, &b) || a != b {
			t.Fatalf("%s: Do answered %v, the binary client %v", what, doErr, binaryErr)
		}
		return
	}
	if !bytes.Equal(viaDo, viaBinary) {
		t.Fatalf("%s: Do answered %x, the binary client %x", what, viaDo, viaBinary)
	}
}

func TestDoAnswersAsTheBinaryProtocol(t *testing.T) {
	s := testServer(t, t.TempDir(), 2)
	ctx := testContext(t)
	root := dialRoot(t, s)
	do := func(caller Caller, code wire.CommandCode, body []byte) ([]byte, error) {
		return s.Do(ctx, caller, code, body)
	}

	// PING, and the refusals before a login.
	if reply, err := do(Caller{}, wire.CodePing, nil); err != nil || len(reply) != 0 {
		t.Fatalf("PING: %x, %v", reply, err)
	}
	_, err := do(Caller{Addr: testCallerAddr}, wire.CodeGetStreams, nil)
	_, binaryErr := dialAnonymous(t, s).SendRaw(ctx, wire.CodeGetStreams, nil)
	sameAnswer(t, "GET_STREAMS before a login", nil, err, nil, binaryErr)
	wantCode(t, "GET_STREAMS before a login", err, wire.ErrUnauthenticated)

	// A login checks the credentials and answers the identity.
	reply, err := do(Caller{Addr: testCallerAddr}, wire.CodeLoginRegister, loginBody(t, wire.ServerProtocolVersion, "iggy", "iggy"))
	if err != nil || !bytes.Equal(reply, []byte{0, 0, 0, 0}) {
		t.Fatalf("login: %x, %v; want the root's id", reply, err)
	}
	_, err = do(Caller{Addr: testCallerAddr}, wire.CodeLoginRegister, loginBody(t, wire.ServerProtocolVersion, "iggy", "wrong"))
	wantCode(t, "login with a wrong password", err, wire.ErrInvalidCredentials)
	_, err = do(Caller{Addr: testCallerAddr}, wire.CodeLoginUser, nil)
	wantCode(t, "the legacy login code", err, wire.ErrInvalidCommand)

	// A metadata write, and the reads of what it made.
	reply, err = do(rootCaller(), wire.CodeCreateStream, appendBody(t, &wire.CreateStream{Name: []byte("via-do")}))
	mustOK(t, "CreateStream through Do", err)
	var created wire.StreamDetails
	if err := created.Decode(reply); err != nil || string(created.Name) != "via-do" {
		t.Fatalf("CreateStream reply %x: %+v, %v", reply, created, err)
	}
	_, err = do(rootCaller(), wire.CodeCreateStream, appendBody(t, &wire.CreateStream{Name: []byte("via-do")}))
	_, binaryErr = root.CreateStream(ctx, "via-do")
	sameAnswer(t, "a second CreateStream of the name", nil, err, nil, binaryErr)
	for _, r := range []struct {
		code wire.CommandCode
		body []byte
	}{
		{wire.CodeGetStream, appendBody(t, wire.StringIdentifier([]byte("via-do")))},
		{wire.CodeGetStreams, nil},
		{wire.CodeGetUsers, nil},
		{wire.CodeGetStream, appendBody(t, wire.StringIdentifier([]byte("no-such-stream")))},
	} {
		viaDo, doErr := do(rootCaller(), r.code, r.body)
		viaBinary, binaryErr := root.SendRaw(ctx, r.code, r.body)
		sameAnswer(t, r.code.String(), viaDo, doErr, viaBinary, binaryErr)
	}
	_, err = do(rootCaller(), wire.CodeCreateTopic, appendBody(t, &wire.CreateTopic{StreamID: wire.StringIdentifier([]byte("via-do")),
		PartitionsCount: 2, Name: []byte("t")}))
	mustOK(t, "CreateTopic through Do", err)

	// A send through each, then the polls of both answer the same bytes.
	reply, err = do(rootCaller(), wire.CodeSendMessages, callSendBody(t, "via-do", "t", 1, "one", "two"))
	mustOK(t, "SendMessages through Do", err)
	var confirmations wire.SendConfirmations
	if err := confirmations.Decode(reply); err != nil {
		t.Fatalf("SendMessages reply %x: %v", reply, err)
	}
	_, err = root.SendRaw(ctx, wire.CodeSendMessages, callSendBody(t, "via-do", "t", 1, "three"))
	mustOK(t, "SendMessages through the binary client", err)
	viaDo, doErr := do(rootCaller(), wire.CodePollMessages, pollBody(t, "via-do", "t", 1))
	viaBinary, binaryErr := root.SendRaw(ctx, wire.CodePollMessages, pollBody(t, "via-do", "t", 1))
	sameAnswer(t, "PollMessages", viaDo, doErr, viaBinary, binaryErr)
	var polled wire.PolledMessages
	if err := polled.Decode(viaDo); err != nil || polled.MessagesCount != 3 {
		t.Fatalf("PollMessages through Do: %d messages, %v; want 3", polled.MessagesCount, err)
	}

	// An offset stored through Do reads back the same through both.
	consumer, stream, topic, part := offsetTarget("via-do", "t", 1)
	_, err = do(rootCaller(), wire.CodeStoreConsumerOffset, appendBody(t, &wire.StoreConsumerOffset{Consumer: consumer, StreamID: stream, TopicID: topic,
		Partition: part, Offset: 1}))
	mustOK(t, "StoreConsumerOffset through Do", err)
	get := appendBody(t, &wire.GetConsumerOffset{Consumer: consumer, StreamID: stream, TopicID: topic, Partition: part})
	viaDo, doErr = do(rootCaller(), wire.CodeGetConsumerOffset, get)
	viaBinary, binaryErr = root.SendRaw(ctx, wire.CodeGetConsumerOffset, get)
	sameAnswer(t, "GetConsumerOffset", viaDo, doErr, viaBinary, binaryErr)
	var offset wire.ConsumerOffset
	if err := offset.Decode(viaDo); err != nil || offset.StoredOffset != 1 {
		t.Fatalf("GetConsumerOffset through Do: %+v, %v; want 1 stored", offset, err)
	}

	// A new user (its password hashed by the workers), who logs in, and is refused
	// what its permissions do not grant, as over the binary protocol.
	_, err = do(rootCaller(), wire.CodeCreateUser, appendBody(t, &wire.CreateUser{Username: []byte("limited"), Password: []byte("secret"),
		Status: wire.UserActive}))
	mustOK(t, "CreateUser through Do", err)
	reply, err = do(Caller{Addr: testCallerAddr}, wire.CodeLoginRegister, loginBody(t, wire.ServerProtocolVersion, "limited", "secret"))
	mustOK(t, "login of the new user through Do", err)
	limited := Caller{UserID: binary.LittleEndian.Uint32(reply), LoggedIn: true, Addr: testCallerAddr}
	limitedClient := dialAs(t, s, "limited", "secret")
	for _, r := range []struct {
		code wire.CommandCode
		body []byte
	}{
		{wire.CodeCreateStream, appendBody(t, &wire.CreateStream{Name: []byte("not-allowed")})},
		{wire.CodeSendMessages, callSendBody(t, "via-do", "t", 0, "no")},
		{wire.CodePollMessages, pollBody(t, "via-do", "t", 1)},
		{wire.CodeGetStats, nil},
		{wire.CodeGetClients, nil},
		{wire.CodeGetStream, appendBody(t, wire.StringIdentifier([]byte("via-do")))},
	} {
		viaDo, doErr := do(limited, r.code, r.body)
		viaBinary, binaryErr := limitedClient.SendRaw(ctx, r.code, r.body)
		if doErr == nil {
			t.Fatalf("%s as a user without permissions: answered %x", r.code, viaDo)
		}
		sameAnswer(t, r.code.String()+" as a user without permissions", viaDo, doErr, viaBinary, binaryErr)
	}

	// A personal access token, and a login with it.
	reply, err = do(rootCaller(), wire.CodeCreatePersonalAccessToken, appendBody(t, &wire.CreatePersonalAccessToken{Name: []byte("pat")}))
	mustOK(t, "CreatePersonalAccessToken through Do", err)
	var token wire.CreatedToken
	if err := token.Decode(reply); err != nil {
		t.Fatalf("CreatePersonalAccessToken reply %x: %v", reply, err)
	}
	reply, err = do(Caller{Addr: testCallerAddr}, wire.CodeLoginRegisterWithPAT, tokenLoginBody(t, string(token.Token)))
	if err != nil || !bytes.Equal(reply, []byte{0, 0, 0, 0}) {
		t.Fatalf("token login: %x, %v", reply, err)
	}
	_, err = do(Caller{Addr: testCallerAddr}, wire.CodeLoginRegisterWithPAT, tokenLoginBody(t, "no-such-token"))
	wantCode(t, "login with an unknown token", err, wire.ErrInvalidPersonalAccessToken)

	// What a sessionless caller gets for the commands of a connection's session.
	if reply, err := do(rootCaller(), wire.CodeLogoutUser, nil); err != nil || len(reply) != 0 {
		t.Fatalf("LOGOUT: %x, %v; want empty", reply, err)
	}
	_, err = do(rootCaller(), wire.CodeJoinConsumerGroup, nil)
	wantCode(t, "JOIN_CONSUMER_GROUP", err, wire.ErrFeatureUnavailable)
	reply, err = do(rootCaller(), wire.CodeGetMe, nil)
	mustOK(t, "GET_ME", err)
	var me wire.ClientDetails
	if err := me.Decode(reply); err != nil || me.ClientHeader.UserID != 0 || string(me.ClientHeader.Address) != testCallerAddr.String() ||
		me.ClientHeader.Transport != wire.ClientTransportHTTP {
		t.Fatalf("GET_ME: %+v, %v", me.ClientHeader, err)
	}
	// A caller is no client of the node's: the list holds the three connections.
	clients, err := root.GetClients(ctx)
	mustOK(t, "GetClients", err)
	if len(clients) != 3 {
		t.Fatalf("GetClients lists %d clients, want the 3 connections", len(clients))
	}
	for _, c := range clients {
		if c.Transport != wire.ClientTransportTCP {
			t.Fatalf("GetClients lists %+v", c)
		}
	}

	// Bounds as TCP's.
	_, err = do(rootCaller(), wire.CodeSendMessages, make([]byte, s.cfg.FrameSizeMaxBytes))
	wantCode(t, "a body over the frame size", err, wire.ErrInvalidCommand)
	_, err = do(rootCaller(), wire.CommandCode(9999), nil)
	wantCode(t, "an unknown code", err, wire.ErrInvalidCommand)
}

// TestDoWritesOneAtATimePerUser: many concurrent metadata writes of one user
// through Do each commit once (its session's requests are numbered in turn).
func TestDoWritesOneAtATimePerUser(t *testing.T) {
	s := testServer(t, t.TempDir(), 2)
	ctx := testContext(t)
	const writers = 16
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for i := range writers {
		wg.Go(func() {
			_, err := s.Do(ctx, rootCaller(), wire.CodeCreateStream, appendBody(t, &wire.CreateStream{Name: []byte(fmt.Sprint("s-", i))}))
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		mustOK(t, "CreateStream through Do", err)
	}
	if n := len(streamNames(t, dialRoot(t, s))); n != writers {
		t.Fatalf("%d streams, want %d", n, writers)
	}
}

func TestDoContextExpiry(t *testing.T) {
	s := testServer(t, t.TempDir(), 2)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Do(ctx, rootCaller(), wire.CodePing, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("Do with a done context: %v", err)
	}
	// A login waits for its password check: a deadline shorter than argon2id's
	// run ends the wait, and the server serves on.
	short, cancelShort := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancelShort()
	if _, err := s.Do(short, Caller{Addr: testCallerAddr}, wire.CodeLoginRegister, loginBody(t, wire.ServerProtocolVersion, "iggy", "iggy")); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a login past its deadline: %v", err)
	}
	if _, err := s.Do(testContext(t), Caller{Addr: testCallerAddr}, wire.CodeLoginRegister, loginBody(t, wire.ServerProtocolVersion, "iggy", "iggy")); err != nil {
		t.Fatalf("a login after: %v", err)
	}
}

// TestDoServerStops: calls made while the server stops all return (answered, or
// ErrStopped), and none is left running after.
func TestDoServerStops(t *testing.T) {
	cfg := testConfig(t.TempDir(), 2)
	s, err := start(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ctx := testContext(t)
	_, err = s.Do(ctx, rootCaller(), wire.CodeCreateStream, appendBody(t, &wire.CreateStream{Name: []byte("s")}))
	mustOK(t, "CreateStream", err)
	_, err = s.Do(ctx, rootCaller(), wire.CodeCreateTopic, appendBody(t, &wire.CreateTopic{StreamID: wire.StringIdentifier([]byte("s")),
		PartitionsCount: 4, Name: []byte("t")}))
	mustOK(t, "CreateTopic", err)
	goroutinesBefore := runtime.NumGoroutine()

	const callers = 32
	var wg sync.WaitGroup
	stopped := make(chan struct{})
	var answered, refused [callers]int
	for i := range callers {
		wg.Go(func() {
			for n := 0; n < 100_000; n++ { // bounded: the server stops long before
				var err error
				switch n % 4 {
				case 0:
					_, err = s.Do(ctx, rootCaller(), wire.CodeSendMessages, callSendBody(t, "s", "t", uint32(i%4), "m"))
				case 1:
					_, err = s.Do(ctx, rootCaller(), wire.CodePollMessages, pollBody(t, "s", "t", uint32(i%4)))
				case 2:
					_, err = s.Do(ctx, rootCaller(), wire.CodeCreateStream, appendBody(t, &wire.CreateStream{Name: []byte(fmt.Sprint(i, "-", n))}))
				default:
					_, err = s.Do(ctx, Caller{Addr: testCallerAddr}, wire.CodeLoginRegister, loginBody(t, wire.ServerProtocolVersion, "iggy", "iggy"))
				}
				switch {
				case errors.Is(err, ErrStopped):
					refused[i]++
					return
				case err == nil:
					answered[i]++
				}
				select {
				case <-stopped:
					if n%4 == 3 {
						return
					}
				default:
				}
			}
		})
	}
	time.Sleep(200 * time.Millisecond) // let the calls flow: the stop must find some on their way
	stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Shutdown(stopCtx); err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	close(stopped)
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("calls still waiting 10 s after the server stopped")
	}
	total := 0
	for i := range answered {
		total += answered[i]
	}
	if total == 0 {
		t.Fatal("no call was answered before the stop")
	}
	stoppedCalls := 0
	for i := range refused {
		stoppedCalls += refused[i]
	}
	t.Logf("%d calls answered, %d refused as the server stopped", total, stoppedCalls)
	if _, err := s.Do(ctx, rootCaller(), wire.CodePing, nil); !errors.Is(err, ErrStopped) {
		t.Fatalf("Do after the stop: %v, want ErrStopped", err)
	}
	// The calls' goroutines are the test's; the server's are gone with it.
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > goroutinesBefore && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > goroutinesBefore {
		t.Fatalf("%d goroutines after the stop, %d before the calls", n, goroutinesBefore)
	}
}

// TestDoInACluster: at the metadata primary Do writes, sends and polls; at a
// backup a metadata write answers 58 as a binary client's does; MetadataRole
// names the primary on every node.
func TestDoInACluster(t *testing.T) {
	servers := startCluster(t, clusterConfigs(t, 3, testClusterSecret))
	ctx := testContext(t)
	var leader uint8
	waitUntil(t, "the cluster agrees on a leader", func() (ok bool) { leader, ok = agreedLeader(servers); return ok })
	for _, s := range servers {
		role := s.MetadataRole()
		if !role.PrimaryKnown || role.PrimaryID != leader || role.Primary != (s.cluster.self == leader) {
			t.Fatalf("node %d: %+v, leader %d", s.cluster.self, role, leader)
		}
	}
	primary := servers[leader]
	backup := servers[(int(leader)+1)%len(servers)]

	// Until a node applied the cluster's root user, a login is 58 (as a binary
	// client's is).
	var reply []byte
	var err error
	for _, s := range servers {
		waitUntil(t, "a login", func() bool {
			reply, err = s.Do(ctx, Caller{Addr: testCallerAddr}, wire.CodeLoginRegister, loginBody(t, wire.ServerProtocolVersion, "iggy", "iggy"))
			if !errors.Is(err, wire.ErrTransientNotAccepted) {
				mustOK(t, "login", err)
				return true
			}
			return false
		})
	}
	reply, err = backup.Do(ctx, Caller{Addr: testCallerAddr}, wire.CodeLoginRegister, loginBody(t, wire.ServerProtocolVersion, "iggy", "iggy"))
	if err != nil || !bytes.Equal(reply, []byte{0, 0, 0, 0}) {
		t.Fatalf("login at a backup: %x, %v", reply, err)
	}
	_, err = primary.Do(ctx, rootCaller(), wire.CodeCreateStream, appendBody(t, &wire.CreateStream{Name: []byte("s")}))
	mustOK(t, "CreateStream at the primary", err)
	_, err = primary.Do(ctx, rootCaller(), wire.CodeCreateTopic, appendBody(t, &wire.CreateTopic{StreamID: wire.StringIdentifier([]byte("s")),
		PartitionsCount: 1, Name: []byte("t")}))
	mustOK(t, "CreateTopic at the primary", err)
	_, err = backup.Do(ctx, rootCaller(), wire.CodeCreateStream, appendBody(t, &wire.CreateStream{Name: []byte("at-a-backup")}))
	_, binaryErr := dialCluster(t, backup).SendRaw(ctx, wire.CodeCreateStream, appendBody(t, &wire.CreateStream{Name: []byte("at-a-backup-2")}))
	if role := backup.MetadataRole(); !role.Primary && role.PrimaryID == leader {
		wantCode(t, "CreateStream at a backup", err, wire.ErrTransientNotAccepted)
		sameAnswer(t, "CreateStream at a backup", nil, err, nil, binaryErr)
	}
	_, err = primary.Do(ctx, rootCaller(), wire.CodeSendMessages, callSendBody(t, "s", "t", 0, "one", "two"))
	mustOK(t, "SendMessages at the primary", err)
	viaDo, doErr := primary.Do(ctx, rootCaller(), wire.CodePollMessages, pollBody(t, "s", "t", 0))
	viaBinary, binaryErr := dialCluster(t, primary).SendRaw(ctx, wire.CodePollMessages, pollBody(t, "s", "t", 0))
	sameAnswer(t, "PollMessages at the primary", viaDo, doErr, viaBinary, binaryErr)
	// Reads are served at a backup from its view, once it applied the stream.
	waitUntil(t, "the backup has the stream", func() bool {
		_, err := backup.Do(ctx, rootCaller(), wire.CodeGetStream, appendBody(t, wire.StringIdentifier([]byte("s"))))
		return err == nil
	})
}

// TestCallInboxBounded: a shard's inbox takes callInboxWaitingMax calls, refuses
// the next until the shard takes them, keeps their order, and refuses all once
// closed, answering those still waiting.
func TestCallInboxBounded(t *testing.T) {
	var b callInbox
	wakes := 0
	b.attach(func() { wakes++ })
	calls := make([]*request.Call, callInboxWaitingMax+1)
	for i := range calls {
		calls[i] = request.NewCall(Caller{}, wire.CodePing, nil)
	}
	for i, c := range calls[:callInboxWaitingMax] {
		if got := b.push(c); got != pushQueued {
			t.Fatalf("push %d: %d, want queued", i, got)
		}
	}
	if got := b.push(calls[callInboxWaitingMax]); got != pushFull || wakes != callInboxWaitingMax {
		t.Fatalf("a push beyond the bound: %d (%d wakes), want full", got, wakes)
	}
	taken := b.take()
	if len(taken) != callInboxWaitingMax || taken[0] != calls[0] || taken[len(taken)-1] != calls[callInboxWaitingMax-1] {
		t.Fatalf("took %d calls, out of order or not all", len(taken))
	}
	if got := b.push(calls[callInboxWaitingMax]); got != pushQueued {
		t.Fatalf("a push once the shard took its calls: %d", got)
	}
	b.close()
	if _, err := calls[callInboxWaitingMax].Wait(context.Background(), nil); !errors.Is(err, ErrStopped) {
		t.Fatalf("a call waiting as the shard stopped: %v", err)
	}
	if got := b.push(calls[0]); got != pushStopped {
		t.Fatalf("a push once closed: %d", got)
	}
}

// BenchmarkDoPing is what the seam costs: a PING through Do from one goroutine
// (the call's trip into a shard's inbox, its wake, the reply), beside the same
// through a binary connection.
func BenchmarkDoPing(b *testing.B) {
	cfg := testConfig(b.TempDir(), 2)
	s, err := start(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Shutdown(context.Background())
	ctx := context.Background()
	b.Run("do", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := s.Do(ctx, rootCaller(), wire.CodePing, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("binary", func(b *testing.B) {
		c, err := client.Dial(ctx, s.Addr().String(), client.WithCredentials("iggy", "iggy"))
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		b.ReportAllocs()
		for b.Loop() {
			if err := c.Ping(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
}
