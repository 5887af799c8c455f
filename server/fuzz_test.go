package server

import (
	"context"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/iggy-shard/iggy-shard/wire"
)

// FuzzRequestBodies sends arbitrary bodies under every client command to a live
// server: each gets a reply or an eviction (never a panic, a hang or a silent
// drop), and a bystander connection is still served afterwards.
func FuzzRequestBodies(f *testing.F) {
	for _, seed := range []struct {
		code wire.CommandCode
		body []byte
	}{
		{wire.CodeCreateStream, []byte{3, 'a', 'b', 'c'}},
		{wire.CodeGetStream, []byte{1, 4, 0, 0, 0, 0}},
		{wire.CodeCreateTopic, []byte{1, 4, 0, 0, 0, 0, 1, 0, 0, 0, 1, 't', 0, 0, 0, 0}},
		{wire.CodeSendMessages, []byte{1, 4, 0, 0, 0, 0, 1, 4, 0, 0, 0, 0, 1, 0}},
		{wire.CodePollMessages, []byte{1, 1, 4, 1, 0, 0, 0}},
		{wire.CodeStoreConsumerOffset, []byte{1, 1, 4, 1, 0, 0, 0, 1, 4}},
		{wire.CodeJoinConsumerGroup, []byte{1, 4, 0, 0, 0, 0}},
		{wire.CodeGetSnapshot, []byte{1, 1, 4}},
		{wire.CodeGetSnapshot, []byte{4, 2, 4, 6}},
		{wire.CodeGetSnapshot, []byte{5, 1, 4}},
		{wire.CodeGetSnapshot, []byte{6, 1, 4}},
		{wire.CodeGetSnapshot, []byte{3, 1, 4}},
		{wire.CodeCreateUser, []byte{4, 'u', 's', 'e', 'r'}},
		{wire.CodeCreatePersonalAccessToken, []byte{3, 'p', 'a', 't', 0, 0, 0, 0, 0, 0, 0, 0}},
		{wire.CodeDeleteSegments, []byte{1, 4, 0, 0, 0, 0}},
		{wire.CommandCode(60000), nil},
	} {
		f.Add(uint32(seed.code), seed.body)
	}
	s := startFuzzServer(f)
	var conn *rawConn
	var client wire.Uint128
	var epoch, request uint64
	f.Fuzz(func(t *testing.T, code uint32, body []byte) {
		info, known := wire.LookupCommand(wire.CommandCode(code))
		op := wire.OperationNonReplicated
		if known {
			op = info.Operation
		}
		switch wire.CommandCode(code) {
		case wire.CodeLoginUser, wire.CodeLoginWithPersonalAccessToken, wire.CodeLoginRegister,
			wire.CodeLoginRegisterWithPAT, wire.CodeLogoutUser,
			// These could lock the harness out (root renamed or its password changed).
			wire.CodeChangePassword, wire.CodeUpdateUser:
			return
		}
		if conn == nil {
			// Shared by the iterations: not closed by this iteration's cleanup.
			nc, err := net.DialTimeout("tcp", s.Addr().String(), 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			conn = &rawConn{t: t, conn: nc}
			client = wire.Uint128{Lo: request + 1, Hi: 0xF0}
			epoch = conn.login(client)
		}
		conn.t = t
		request++
		conn.send(rawRequest{client: client, request: request, session: epoch, op: op, code: wire.CommandCode(code), body: body})
		header, _ := conn.frame()
		if header[60] == byte(wire.CommandEviction) {
			conn.conn.Close()
			conn = nil
		}
		bystander := dialRaw(t, s)
		bystander.send(rawRequest{client: wire.Uint128{Lo: 1}, request: 1, op: wire.OperationNonReplicated, code: wire.CodePing})
		if h, _ := bystander.reply(); h.Status != 0 {
			t.Fatalf("bystander ping: status %d", h.Status)
		}
		bystander.conn.Close()
	})
}

func startFuzzServer(f *testing.F) *Server {
	cfg := defaultSetup()
	cfg.TCPAddress, cfg.SystemPath, cfg.ShardCount, cfg.PinCPUs = "127.0.0.1:0", f.TempDir(), 2, false
	s, err := start(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s.Shutdown(ctx)
	})
	return s
}
