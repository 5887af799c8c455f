package server

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/iggy-shard/iggy-shard/client"
	"github.com/iggy-shard/iggy-shard/wire"
)

// BenchmarkTransports: the send and poll of batches of 1000 messages of
// 1000 bytes over HTTP (JSON, base64 payloads, one keep-alive connection), beside
// the same over TCP (the binary protocol through client/) against the same
// server in the same run; and a PING's round trip over TCP, through Server.Do
// alone (the seam HTTP takes, without HTTP) and over HTTP, which bounds what the
// seam costs each request.
//
//	go test ./server -run '^$' -bench BenchmarkTransports -benchmem -count 3
func BenchmarkTransports(b *testing.B) {
	s, c := benchServer(b)
	h := newHTTPSide(b, s)
	if code := h.login("iggy", "iggy"); code != 0 {
		b.Fatal(code)
	}
	ctx := context.Background()
	batch := benchBatch(b)
	payload := base64.StdEncoding.EncodeToString(make([]byte, benchPayloadBytes))
	messages := make([]map[string]any, benchMessagesPerBatch)
	for i := range messages {
		messages[i] = map[string]any{"id": i + 1, "payload": payload}
	}
	sendJSON, err := json.Marshal(map[string]any{
		"partitioning": map[string]string{"kind": "partition_id", "value": le32(0)}, "messages": messages})
	if err != nil {
		b.Fatal(err)
	}
	const stored = 64 // batches polled round-robin
	for range stored {
		if _, err := c.SendBatch(ctx, client.NameID("bench"), client.NameID("t"), wire.Partitioning{Kind: wire.PartitioningPartitionID}, batch); err != nil {
			b.Fatal(err)
		}
	}
	httpDo := func(b *testing.B, method, path string, body []byte, wantStatus int) int {
		var rd io.Reader
		if body != nil {
			rd = bytes.NewReader(body)
		}
		req, err := http.NewRequest(method, h.base+path, rd)
		if err != nil {
			b.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+h.token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := h.http.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		n, err := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != wantStatus {
			b.Fatalf("%s %s: %d, %v", method, path, resp.StatusCode, err)
		}
		return int(n)
	}

	b.Run("send/tcp", func(b *testing.B) {
		b.SetBytes(benchBatchBytes)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := c.SendBatch(ctx, client.NameID("bench"), client.NameID("t"), wire.Partitioning{Kind: wire.PartitioningPartitionID}, batch); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("send/http", func(b *testing.B) {
		b.SetBytes(benchBatchBytes)
		b.ReportAllocs()
		for b.Loop() {
			httpDo(b, "POST", "/streams/bench/topics/t/messages", sendJSON, http.StatusCreated)
		}
	})
	req := wire.PollMessages{Consumer: client.SingleConsumer(client.ID(1)), StreamID: client.NameID("bench"), TopicID: client.NameID("t"),
		Partition: wire.SomePartition(0), Count: benchMessagesPerBatch}
	b.Run("poll/tcp", func(b *testing.B) {
		b.SetBytes(benchBatchBytes)
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			req.Strategy = wire.PollingStrategy{Kind: wire.PollingOffset, Value: uint64(i%stored) * benchMessagesPerBatch}
			polled, err := c.PollMessages(ctx, &req)
			if err != nil || polled.MessagesCount != benchMessagesPerBatch {
				b.Fatalf("polled %d messages: %v", polled.MessagesCount, err)
			}
			i++
		}
	})
	b.Run("poll/http", func(b *testing.B) {
		b.SetBytes(benchBatchBytes)
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			path := fmt.Sprintf("/streams/bench/topics/t/messages?consumer_id=1&partition_id=0&kind=offset&value=%d&count=%d",
				uint64(i%stored)*benchMessagesPerBatch, benchMessagesPerBatch)
			if n := httpDo(b, "GET", path, nil, http.StatusOK); n < benchBatchBytes {
				b.Fatalf("a poll answered %d bytes", n)
			}
			i++
		}
	})
	b.Run("poll/do", func(b *testing.B) {
		b.SetBytes(benchBatchBytes)
		b.ReportAllocs()
		caller := credentialCaller("jwt:bench")
		i := 0
		for b.Loop() {
			req.Strategy = wire.PollingStrategy{Kind: wire.PollingOffset, Value: uint64(i%stored) * benchMessagesPerBatch}
			body, err := req.Append(nil)
			if err != nil {
				b.Fatal(err)
			}
			reply, err := s.Do(ctx, caller, wire.CodePollMessages, body)
			if err != nil || len(reply) < benchBatchBytes {
				b.Fatalf("a poll answered %d bytes: %v", len(reply), err)
			}
			s.GiveBack(reply)
			i++
		}
	})
	b.Run("ping/tcp", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := c.Ping(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("ping/do", func(b *testing.B) {
		b.ReportAllocs()
		caller := Caller{LoggedIn: true}
		for b.Loop() {
			if _, err := s.Do(ctx, caller, wire.CodePing, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("ping/http", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			httpDo(b, "GET", "/ping", nil, http.StatusOK)
		}
	})
}
