package httpapi

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/iggy-shard/iggy-shard/wire"
)

// replyBackend answers SendMessages and PollMessages with fixed replies and keeps
// nothing: the JSON's cost alone, without a server behind it.
type replyBackend struct{ poll []byte }

func (b *replyBackend) Do(_ context.Context, _ Caller, code wire.CommandCode, _ []byte) ([]byte, error) {
	switch code {
	case wire.CodeSendMessages:
		return wire.AppendSendConfirmations(nil, wire.SendConfirmation{StreamID: 1, TopicID: 1}), nil
	case wire.CodePollMessages:
		return b.poll, nil
	}
	return nil, nil
}

func (b *replyBackend) Cluster() ClusterState { return ClusterState{Primary: true} }

func (b *replyBackend) RevokeToken(context.Context, Caller, string, time.Time) error { return nil }

func (b *replyBackend) TokenRevoked(string, time.Time) bool { return false }

// discardWriter is a ResponseWriter that counts what it is sent.
type discardWriter struct {
	header http.Header
	status int
	bytes  int
}

func (w *discardWriter) Header() http.Header         { return w.header }
func (w *discardWriter) WriteHeader(status int)      { w.status = status }
func (w *discardWriter) Write(b []byte) (int, error) { w.bytes += len(b); return len(b), nil }

// BenchmarkMessagesJSON: BenchmarkTransports' send and poll of 1000 messages of
// 1000 bytes through the API alone (no sockets, no server), which is what the JSON
// costs; the headers cases give each message benchUserHeaders.
//
//	go test ./httpapi -run '^$' -bench BenchmarkMessagesJSON -benchmem
func BenchmarkMessagesJSON(b *testing.B) {
	b.Run("send", func(b *testing.B) { benchMessagesJSON(b, "send", nil) })
	b.Run("poll", func(b *testing.B) { benchMessagesJSON(b, "poll", nil) })
	headers := benchUserHeaders(b)
	b.Run("send_headers", func(b *testing.B) { benchMessagesJSON(b, "send", headers) })
	b.Run("poll_headers", func(b *testing.B) { benchMessagesJSON(b, "poll", headers) })
}

// benchUserHeaders is three headers as an SDK sets them, in no particular order: a
// string, a u64 and a bool.
func benchUserHeaders(b testing.TB) []byte {
	block, err := wire.AppendTLV(nil, wire.HeaderString, []byte("trace_id"), wire.HeaderString, []byte("0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"))
	if err == nil {
		block, err = wire.AppendTLV(block, wire.HeaderString, []byte("attempt"), wire.HeaderUint64, []byte{3, 0, 0, 0, 0, 0, 0, 0})
	}
	if err == nil {
		block, err = wire.AppendTLV(block, wire.HeaderString, []byte("replay"), wire.HeaderBool, []byte{1})
	}
	if err != nil {
		b.Fatal(err)
	}
	return block
}

func benchMessagesJSON(b *testing.B, route string, headers []byte) {
	const messages, payloadBytes = 1000, 1000
	var bb wire.BatchBuilder
	for i := range messages {
		if err := bb.Append(wire.Uint128{Lo: uint64(i + 1)}, createdAt, bytes.Repeat([]byte{'x'}, payloadBytes), headers); err != nil {
			b.Fatal(err)
		}
	}
	batch, err := bb.Finish()
	if err != nil {
		b.Fatal(err)
	}
	wire.StampBatch(batch, 0, 0, createdAt)
	backend := &replyBackend{poll: (&wire.PolledMessages{CurrentOffset: messages - 1, MessagesCount: messages, Records: batch}).Append(nil)}
	a, err := New(Options{HTTP: testConfig(), Backend: backend, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: time.Now})
	if err != nil {
		b.Fatal(err)
	}
	tok, err := a.tokens.issue(0)
	if err != nil {
		b.Fatal(err)
	}
	method, target, want := "GET", "/streams/1/topics/1/messages?partition_id=0&kind=offset&value=0&count=1000", http.StatusOK
	var body []byte
	if route == "send" {
		method, target, want = "POST", "/streams/1/topics/1/messages", http.StatusCreated
		body = sendJSONWithHeaders(messages, payloadBytes, headers)
	}
	b.SetBytes(messages * payloadBytes)
	b.ReportAllocs()
	rd := bytes.NewReader(nil)
	for b.Loop() {
		rd.Reset(body)
		r := httptest.NewRequest(method, target, rd)
		r.Header.Set("Authorization", "Bearer "+tok.token)
		r.Header.Set("Content-Type", "application/json")
		w := &discardWriter{header: http.Header{}}
		a.ServeHTTP(w, r)
		if w.status != want {
			b.Fatalf("%s %s: %d", method, target, w.status)
		}
	}
}
