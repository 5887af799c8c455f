package client

import (
	"bytes"
	"encoding/hex"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/iggy-shard/iggy-shard/wire"
)

// readGolden parses a hand-written hex file: two hex digits per byte, whitespace
// free, '#' to the end of a line a comment.
func readGolden(t *testing.T, path string) []byte {
	t.Helper()
	text, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []byte
	for i, line := range strings.Split(string(text), "\n") {
		if hash := strings.IndexByte(line, '#'); hash >= 0 {
			line = line[:hash]
		}
		b, err := hex.DecodeString(strings.Join(strings.Fields(line), ""))
		if err != nil {
			t.Fatalf("%s:%d: %v", path, i+1, err)
		}
		out = append(out, b...)
	}
	return out
}

// The login sequence's bytes are those the Go SDK sends (apache/iggy
// foreign/go/internal/vsr).
func TestLoginSequenceGolden(t *testing.T) {
	s := newFakeServer(t, session(func(req *wire.RequestHeader, body []byte) ([]byte, bool) {
		switch req.Operation {
		case wire.OperationCreateStream:
			details := wire.StreamDetails{StreamHeader: wire.StreamHeader{ID: 0, Name: []byte("orders")}}
			return reply(req, details.Append(nil)), false
		}
		return reply(req, nil), false
	}))
	c := dialTest(t, s, WithRandom(&countingReader{}), WithSDKIdentity("go-sdk", "0.9.0-edge.4"),
		WithRequestChecksums(false))
	ctx := testContext(t)
	id, err := c.Login(ctx, "iggy", "iggy")
	if err != nil {
		t.Fatal(err)
	}
	if id.UserID != 0 || id.Session != testSession || id.ServerVersion != "0.11.0" {
		t.Fatalf("identity = %+v", id)
	}
	stream, err := c.CreateStream(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	if string(stream.Name) != "orders" {
		t.Fatalf("stream name %q", stream.Name)
	}
	if _, err := c.GetStreams(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Logout(ctx); err != nil {
		t.Fatal(err)
	}
	var got []byte
	for _, f := range s.recorded() {
		got = append(got, f.raw...)
	}
	want := readGolden(t, "testdata/login_sequence.hex")
	if !bytes.Equal(got, want) {
		at := 0
		for at < len(got) && at < len(want) && got[at] == want[at] {
			at++
		}
		t.Fatalf("login sequence differs at byte %d (frame %d, offset %d)\n got: % x\nwant: % x",
			at, at/256, at%256, got, want)
	}
}

// Request numbers, sessions, operations, codes and checksums per request kind (as the
// Go SDK numbers them, apache/iggy foreign/go/internal/vsr), from before login through
// logout.
func TestRequestNumbering(t *testing.T) {
	s := newFakeServer(t, session(func(req *wire.RequestHeader, body []byte) ([]byte, bool) {
		switch req.Operation {
		case wire.OperationCreateStream:
			d := wire.StreamDetails{StreamHeader: wire.StreamHeader{Name: []byte("s")}}
			return reply(req, d.Append(nil)), false
		case wire.OperationSendMessages:
			return reply(req, wire.AppendSendConfirmations(nil, wire.SendConfirmation{})), false
		}
		return reply(req, nil), false
	}))
	c := dialTest(t, s)
	ctx := testContext(t)
	firstID := c.ClientID()
	if err := c.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Login(ctx, "iggy", "iggy"); err != nil {
		t.Fatal(err)
	}
	loginID := c.ClientID()
	if _, err := c.CreateStream(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	if err := c.CreatePartitions(ctx, ID(0), ID(0), 1); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetStreams(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.SendMessages(ctx, ID(0), ID(0), wire.Partitioning{Kind: wire.PartitioningPartitionID},
		[]Message{{Payload: []byte("x")}}); err != nil {
		t.Fatal(err)
	}
	store := wire.StoreConsumerOffset{Consumer: SingleConsumer(ID(1)), StreamID: ID(0), TopicID: ID(0), Ack: wire.AckQuorum}
	if err := c.StoreConsumerOffset(ctx, &store); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteStream(ctx, ID(0)); err != nil {
		t.Fatal(err)
	}
	if err := c.Logout(ctx); err != nil {
		t.Fatal(err)
	}
	afterLogout := c.ClientID()
	if err := c.Ping(ctx); err != nil {
		t.Fatal(err)
	}

	type want struct {
		op       wire.Operation
		code     wire.CommandCode
		request  uint64
		session  uint64
		client   wire.Uint128
		checksum bool
	}
	wants := []want{
		{wire.OperationNonReplicated, wire.CodePing, 1, 0, firstID, false},
		{wire.OperationRegister, 0, 0, 0, loginID, false},
		{wire.OperationNonReplicated, wire.CodeGetClusterMetadata, 1, testSession, loginID, false},
		{wire.OperationCreateStream, 0, 1, testSession, loginID, true},
		{wire.OperationCreatePartitions, 0, 2, testSession, loginID, true},
		{wire.OperationNonReplicated, wire.CodeGetStreams, 3, testSession, loginID, false},
		{wire.OperationSendMessages, 0, 3, testSession, loginID, false},
		{wire.OperationStoreConsumerOffset, 0, 3, testSession, loginID, false},
		{wire.OperationDeleteStream, 0, 3, testSession, loginID, true},
		{wire.OperationLogout, 0, 4, testSession, loginID, false},
		{wire.OperationNonReplicated, wire.CodePing, 5, 0, afterLogout, false},
	}
	frames := s.recorded()
	if len(frames) != len(wants) {
		t.Fatalf("server got %d requests, want %d", len(frames), len(wants))
	}
	for i, w := range wants {
		h := frames[i].header
		var checksum wire.Uint128
		if w.checksum {
			checksum = wire.RequestChecksum(frames[i].body)
		}
		if h.Operation != w.op || h.NonReplicatedCode != w.code || h.Request != w.request ||
			h.Session != w.session || h.Client != w.client || h.RequestChecksum != checksum {
			t.Errorf("request %d: op %v code %v request %d session %#x client %v checksum %v; want %+v (checksum %v)",
				i, h.Operation, h.NonReplicatedCode, h.Request, h.Session, h.Client, h.RequestChecksum, w, checksum)
		}
	}
	if firstID == loginID || loginID == afterLogout || firstID.IsZero() {
		t.Errorf("client ids not fresh per login: %v %v %v", firstID, loginID, afterLogout)
	}
}

// Writes that need a session are refused locally before login, never sent.
func TestWritesBeforeLoginRefusedLocally(t *testing.T) {
	s := newFakeServer(t, session(nil))
	c := dialTest(t, s)
	ctx := testContext(t)
	_, err := c.CreateStream(ctx, "s")
	mustCode(t, err, wire.ErrUnauthenticated)
	_, err = c.SendMessages(ctx, ID(0), ID(0), wire.Partitioning{Kind: wire.PartitioningBalanced}, []Message{{Payload: []byte("x")}})
	mustCode(t, err, wire.ErrUnauthenticated)
	mustCode(t, c.Logout(ctx), wire.ErrUnauthenticated)
	if n := len(s.recorded()); n != 0 {
		t.Fatalf("server got %d requests", n)
	}
	// The connection is still fine.
	if err := c.Ping(ctx); err != nil {
		t.Fatal(err)
	}
}

// Login while logged in logs out first, then registers under a fresh client id.
func TestReloginLogsOutFirst(t *testing.T) {
	s := newFakeServer(t, session(nil))
	c := loggedIn(t, s, WithClusterMetadataOnLogin(false))
	first := c.ClientID()
	if _, err := c.LoginWithPersonalAccessToken(testContext(t), "token"); err != nil {
		t.Fatal(err)
	}
	frames := s.recorded()
	ops := []wire.Operation{wire.OperationRegister, wire.OperationLogout, wire.OperationRegister}
	if len(frames) != len(ops) {
		t.Fatalf("got %d requests", len(frames))
	}
	for i, op := range ops {
		if frames[i].header.Operation != op {
			t.Fatalf("request %d op %v want %v", i, frames[i].header.Operation, op)
		}
	}
	var pat wire.LoginRegisterWithPAT
	if err := pat.Decode(frames[2].body); err != nil || string(pat.Token) != "token" {
		t.Fatalf("PAT body %x: %v", frames[2].body, err)
	}
	if frames[2].header.Client == first {
		t.Fatal("relogin reused the client id")
	}
}

// A login reply with a zero session cannot bind: the connection is dropped.
func TestLoginZeroSessionBreaksConnection(t *testing.T) {
	s := newFakeServer(t, func(req *wire.RequestHeader, body []byte) ([]byte, bool) {
		payload := loginPayload()
		clear(payload[4:12]) // session
		return reply(req, payload), false
	})
	c := dialTest(t, s)
	_, err := c.Login(testContext(t), "iggy", "iggy")
	var ce *ConnectionError
	if !errors.As(err, &ce) || !errors.Is(err, wire.ErrInvalidSession) {
		t.Fatalf("err = %v", err)
	}
}

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// A random source that only yields zero ids cannot make a client (a zero client id
// is refused by every server).
func TestZeroRandomSource(t *testing.T) {
	s := newFakeServer(t, session(nil))
	if _, err := Dial(testContext(t), s.addr(), WithRandom(zeroReader{})); !errors.Is(err, errZeroRandom) {
		t.Fatalf("err = %v", err)
	}
}
