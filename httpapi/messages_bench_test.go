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
// costs.
//
//	go test ./httpapi -run '^$' -bench BenchmarkMessagesJSON -benchmem
func BenchmarkMessagesJSON(b *testing.B) {
	const messages, payloadBytes = 1000, 1000
	var bb wire.BatchBuilder
	for i := range messages {
		if err := bb.Append(wire.Uint128{Lo: uint64(i + 1)}, createdAt, bytes.Repeat([]byte{'x'}, payloadBytes), nil); err != nil {
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
	send := sendJSON(messages, payloadBytes)
	run := func(b *testing.B, method, target string, body []byte, want int) {
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
	b.Run("send", func(b *testing.B) { run(b, "POST", "/streams/1/topics/1/messages", send, http.StatusCreated) })
	b.Run("poll", func(b *testing.B) {
		run(b, "GET", "/streams/1/topics/1/messages?partition_id=0&kind=offset&value=0&count=1000", nil, http.StatusOK)
	})
}
