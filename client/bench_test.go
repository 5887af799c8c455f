package client

import (
	"context"
	"fmt"
	"io"
	"net"
	"testing"

	"github.com/iggy-shard/iggy-shard/wire"
)

// The hot paths against the fake server on loopback, each beside a baseline measured
// in the same run: the same request and reply bytes moved over a plain net.Conn with
// no encoding, no checksums and no decoding. The difference is the client's own
// overhead per request.

const (
	benchMessages     = 1000
	benchPayloadBytes = 1000
)

// benchSendServer confirms every request without looking at it and without
// allocating: the reply is rebuilt in one reused buffer.
func benchSendServer(b *testing.B) *fakeServer {
	var out []byte
	s := newFakeServer(b, session(func(req *wire.RequestHeader, body []byte) ([]byte, bool) {
		const confirmationBytes = 4 + wire.SendConfirmationSize
		h := wire.ReplyTo(req, 0, confirmationBytes, true)
		out = out[:0]
		out = append(out, h.Bytes()[:]...)
		out = wire.AppendSendConfirmations(out, wire.SendConfirmation{BaseOffset: 1})
		return out, false
	}))
	s.record = false
	return s
}

func benchMessagesOf(n, size int) []Message {
	payload := make([]byte, size)
	for i := range payload {
		payload[i] = byte(i)
	}
	msgs := make([]Message, n)
	for i := range msgs {
		msgs[i] = Message{ID: wire.Uint128{Lo: uint64(i + 1)}, Payload: payload}
	}
	return msgs
}

func BenchmarkSendMessages(b *testing.B) {
	msgs := benchMessagesOf(benchMessages, benchPayloadBytes)
	partitioning := wire.Partitioning{Kind: wire.PartitioningPartitionID}
	b.Run(fmt.Sprintf("client/%dx%dB", benchMessages, benchPayloadBytes), func(b *testing.B) {
		s := benchSendServer(b)
		c := loggedIn(b, s)
		ctx := context.Background()
		if _, err := c.SendMessages(ctx, ID(0), ID(0), partitioning, msgs); err != nil {
			b.Fatal(err)
		}
		b.SetBytes(benchMessages * benchPayloadBytes)
		b.ReportAllocs()
		b.ResetTimer()
		for b.Loop() {
			if _, err := c.SendMessages(ctx, ID(0), ID(0), partitioning, msgs); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run(fmt.Sprintf("raw-io-baseline/%dx%dB", benchMessages, benchPayloadBytes), func(b *testing.B) {
		s := benchSendServer(b)
		c := loggedIn(b, s)
		// The client's frame, encoded once, then moved by hand.
		frame := capturedSendFrame(b, c, msgs)
		conn, err := net.Dial("tcp", s.addr())
		if err != nil {
			b.Fatal(err)
		}
		defer conn.Close()
		reply := make([]byte, wire.HeaderSize+4+wire.SendConfirmationSize)
		b.SetBytes(benchMessages * benchPayloadBytes)
		b.ReportAllocs()
		b.ResetTimer()
		for b.Loop() {
			if _, err := conn.Write(frame); err != nil {
				b.Fatal(err)
			}
			if _, err := io.ReadFull(conn, reply); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// capturedSendFrame encodes msgs exactly as SendMessages would and returns a copy of
// the frame.
func capturedSendFrame(b *testing.B, c *Client, msgs []Message) []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	meta := wire.SendMessages{StreamID: ID(0), TopicID: ID(0),
		Partitioning: wire.Partitioning{Kind: wire.PartitioningPartitionID}, MessagesCount: uint32(len(msgs))}
	body, err := meta.AppendMetadata(c.frame())
	if err != nil {
		b.Fatal(err)
	}
	c.batch.Reset(body)
	for i := range msgs {
		if err := c.batch.Append(msgs[i].ID, 1, msgs[i].Payload, nil); err != nil {
			b.Fatal(err)
		}
	}
	frame, err := c.batch.Finish()
	if err != nil {
		b.Fatal(err)
	}
	if _, err := c.stamp(frame, wire.OperationSendMessages, wire.CodeSendMessages); err != nil {
		b.Fatal(err)
	}
	return append([]byte(nil), frame...)
}

func BenchmarkPollMessages(b *testing.B) {
	body := polledBody(b, 0, 0, benchMessages)
	// Payloads of benchPayloadBytes: rebuild the record with bigger messages.
	var bb wire.BatchBuilder
	bb.Reset(nil)
	payload := make([]byte, benchPayloadBytes)
	for i := range benchMessages {
		if err := bb.Append(wire.Uint128{Lo: uint64(i + 1)}, 10, payload, nil); err != nil {
			b.Fatal(err)
		}
	}
	batch, err := bb.Finish()
	if err != nil {
		b.Fatal(err)
	}
	wire.StampBatch(batch, 0, 0, 99)
	p := wire.PolledMessages{MessagesCount: benchMessages, CurrentOffset: benchMessages - 1, Records: batch}
	body = p.Append(nil)
	var out []byte
	newServer := func(b *testing.B) *fakeServer {
		s := newFakeServer(b, session(func(req *wire.RequestHeader, _ []byte) ([]byte, bool) {
			h := wire.ReplyTo(req, 0, len(body), true)
			out = append(append(out[:0], h.Bytes()[:]...), body...)
			return out, false
		}))
		s.record = false
		return s
	}
	req := wire.PollMessages{Consumer: SingleConsumer(ID(1)), StreamID: ID(0), TopicID: ID(0),
		Partition: wire.SomePartition(0), Strategy: wire.PollingStrategy{Kind: wire.PollingOffset}, Count: benchMessages}
	b.Run(fmt.Sprintf("client/%dx%dB", benchMessages, benchPayloadBytes), func(b *testing.B) {
		c := loggedIn(b, newServer(b))
		ctx := context.Background()
		b.SetBytes(int64(benchMessages * benchPayloadBytes))
		b.ReportAllocs()
		b.ResetTimer()
		for b.Loop() {
			polled, err := c.PollMessages(ctx, &req)
			if err != nil {
				b.Fatal(err)
			}
			n := 0
			for it := polled.Messages(); it.Next(); {
				n += len(it.Message().Payload())
			}
			if n != benchMessages*benchPayloadBytes {
				b.Fatalf("iterated %d payload bytes", n)
			}
		}
	})
	b.Run(fmt.Sprintf("raw-io-baseline/%dx%dB", benchMessages, benchPayloadBytes), func(b *testing.B) {
		s := newServer(b)
		c := loggedIn(b, s)
		c.mu.Lock()
		frame, err := req.Append(c.frame())
		if err == nil {
			_, err = c.stamp(frame, wire.OperationNonReplicated, wire.CodePollMessages)
		}
		frame = append([]byte(nil), frame...)
		c.mu.Unlock()
		if err != nil {
			b.Fatal(err)
		}
		conn, err := net.Dial("tcp", s.addr())
		if err != nil {
			b.Fatal(err)
		}
		defer conn.Close()
		reply := make([]byte, wire.HeaderSize+len(body))
		b.SetBytes(int64(benchMessages * benchPayloadBytes))
		b.ReportAllocs()
		b.ResetTimer()
		for b.Loop() {
			if _, err := conn.Write(frame); err != nil {
				b.Fatal(err)
			}
			if _, err := io.ReadFull(conn, reply); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// The small-request path: a Ping round trip, against the same bytes by hand.
func BenchmarkPing(b *testing.B) {
	newServer := func(b *testing.B) *fakeServer {
		var out []byte
		s := newFakeServer(b, func(req *wire.RequestHeader, _ []byte) ([]byte, bool) {
			h := wire.ReplyTo(req, 0, 0, true)
			out = append(out[:0], h.Bytes()[:]...)
			return out, false
		})
		s.record = false
		return s
	}
	b.Run("client", func(b *testing.B) {
		c := dialTest(b, newServer(b))
		ctx := context.Background()
		b.ReportAllocs()
		for b.Loop() {
			if err := c.Ping(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("raw-io-baseline", func(b *testing.B) {
		s := newServer(b)
		c := dialTest(b, s)
		c.mu.Lock()
		frame := c.frame()
		_, err := c.stamp(frame, wire.OperationNonReplicated, wire.CodePing)
		frame = append([]byte(nil), frame...)
		c.mu.Unlock()
		if err != nil {
			b.Fatal(err)
		}
		conn, err := net.Dial("tcp", s.addr())
		if err != nil {
			b.Fatal(err)
		}
		defer conn.Close()
		reply := make([]byte, wire.HeaderSize)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := conn.Write(frame); err != nil {
				b.Fatal(err)
			}
			if _, err := io.ReadFull(conn, reply); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// The hot paths allocate nothing once warm. AllocsPerRun counts the whole process,
// the fake server included, which is why its benchmark handlers reuse one buffer.
func TestHotPathsDoNotAllocate(t *testing.T) {
	if testing.Short() {
		t.Skip("allocation counts need a quiet process")
	}
	msgs := benchMessagesOf(10, 100)
	var out []byte
	login := session(nil)
	polled := polledBody(t, 0, 0, 10)
	topic := (&wire.TopicDetails{TopicHeader: wire.TopicHeader{Name: []byte("t"), PartitionsCount: 2},
		Partitions: make([]wire.PartitionInfo, 2)}).Append(nil)
	s := newFakeServer(t, func(req *wire.RequestHeader, body []byte) ([]byte, bool) {
		switch req.Operation {
		case wire.OperationRegister:
			return login(req, body)
		case wire.OperationNonReplicated:
			payload := []byte(nil)
			switch req.NonReplicatedCode {
			case wire.CodeGetTopic:
				payload = topic
			case wire.CodePollMessages:
				payload = polled
			}
			h := wire.ReplyTo(req, 0, len(payload), true)
			out = append(append(out[:0], h.Bytes()[:]...), payload...)
		case wire.OperationSendMessages:
			h := wire.ReplyTo(req, 0, 4+wire.SendConfirmationSize, true)
			out = append(out[:0], h.Bytes()[:]...)
			out = wire.AppendSendConfirmations(out, wire.SendConfirmation{})
		default:
			h := wire.ReplyTo(req, 0, 0, true)
			out = append(out[:0], h.Bytes()[:]...)
		}
		return out, false
	})
	s.record = false
	c := loggedIn(t, s, WithClusterMetadataOnLogin(false))
	ctx := context.Background()
	partitioning := wire.Partitioning{Kind: wire.PartitioningPartitionID}
	producer := c.NewProducer(ID(0), ID(0), partitioning)
	balanced := c.NewProducer(ID(0), ID(0), wire.Partitioning{Kind: wire.PartitioningBalanced})
	consumer := c.NewConsumer(ConsumerConfig{Consumer: SingleConsumer(ID(1)), Stream: ID(0), Topic: ID(0),
		Strategy: wire.PollingStrategy{Kind: wire.PollingNext}, BatchSize: 10})
	poll := wire.PollMessages{Consumer: SingleConsumer(ID(1)), StreamID: ID(0), TopicID: ID(0),
		Strategy: wire.PollingStrategy{Kind: wire.PollingNext}, Count: 10}
	cases := map[string]func() error{
		"Ping": func() error { return c.Ping(ctx) },
		"SendMessages": func() error {
			_, err := c.SendMessages(ctx, ID(0), ID(0), partitioning, msgs)
			return err
		},
		"Producer.Send": func() error {
			_, err := producer.Send(ctx, msgs)
			return err
		},
		"Producer.Send balanced": func() error {
			_, err := balanced.Send(ctx, msgs)
			return err
		},
		"PollMessages": func() error {
			p, err := c.PollMessages(ctx, &poll)
			for it := p.Messages(); it.Next(); {
				_ = it.Message().Payload()
			}
			return err
		},
		"Consumer.Poll": func() error {
			_, err := consumer.Poll(ctx)
			return err
		},
	}
	for name, run := range cases {
		if err := run(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var runErr error
		allocs := testing.AllocsPerRun(100, func() {
			if err := run(); err != nil {
				runErr = err
			}
		})
		if runErr != nil {
			t.Fatalf("%s: %v", name, runErr)
		}
		if allocs != 0 {
			t.Errorf("%s allocates %v times per call", name, allocs)
		}
	}
}

// echoConn answers every write with one fixed reply frame, its request number
// patched to echo the request: an in-memory server with no cost of its own, so that
// a benchmark sees only the client's encoding, checksums and decoding.
type echoConn struct {
	scriptConn
	reply  []byte
	unread []byte
}

func (c *echoConn) Write(p []byte) (int, error) {
	copy(c.reply[200:208], p[168:176]) // reply.request = request.request
	c.unread = c.reply
	return len(p), nil
}

func (c *echoConn) Read(p []byte) (int, error) {
	if len(c.unread) == 0 {
		return 0, io.EOF
	}
	n := copy(p, c.unread)
	c.unread = c.unread[n:]
	return n, nil
}

// BenchmarkSendMessagesInMemory is SendMessages without a network: building the batch
// (copying every payload, XXH3 of every frame, the batch checksum), stamping the
// header and decoding the confirmation. The baseline copies the same payload bytes
// once, the least any encoder must do.
func BenchmarkSendMessagesInMemory(b *testing.B) {
	msgs := benchMessagesOf(benchMessages, benchPayloadBytes)
	b.Run(fmt.Sprintf("client/%dx%dB", benchMessages, benchPayloadBytes), func(b *testing.B) {
		var h wire.ReplyHeader
		h.Size, h.Command, h.Operation = wire.HeaderSize+4+wire.SendConfirmationSize, wire.CommandReply, wire.OperationSendMessages
		reply := make([]byte, wire.HeaderSize)
		h.Put(reply)
		reply = wire.AppendSendConfirmations(reply, wire.SendConfirmation{BaseOffset: 1})
		c := scriptedClient(b, &echoConn{reply: reply})
		c.session = testSession
		ctx := context.Background()
		partitioning := wire.Partitioning{Kind: wire.PartitioningPartitionID}
		b.SetBytes(benchMessages * benchPayloadBytes)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := c.SendMessages(ctx, ID(0), ID(0), partitioning, msgs); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run(fmt.Sprintf("copy-baseline/%dx%dB", benchMessages, benchPayloadBytes), func(b *testing.B) {
		dst := make([]byte, 0, benchMessages*(benchPayloadBytes+wire.FrameHeaderSize)+1024)
		b.SetBytes(benchMessages * benchPayloadBytes)
		b.ReportAllocs()
		for b.Loop() {
			dst = dst[:0]
			for i := range msgs {
				dst = append(dst, msgs[i].Payload...)
			}
		}
	})
}

// BenchmarkPollMessagesInMemory is PollMessages without a network: encoding the
// request, checking the reply's records (Decode walks every frame) and iterating
// every message. The baseline walks the same frames with wire's iterator alone.
func BenchmarkPollMessagesInMemory(b *testing.B) {
	var bb wire.BatchBuilder
	bb.Reset(nil)
	payload := make([]byte, benchPayloadBytes)
	for i := range benchMessages {
		if err := bb.Append(wire.Uint128{Lo: uint64(i + 1)}, 10, payload, nil); err != nil {
			b.Fatal(err)
		}
	}
	batch, err := bb.Finish()
	if err != nil {
		b.Fatal(err)
	}
	wire.StampBatch(batch, 0, 0, 99)
	body := (&wire.PolledMessages{MessagesCount: benchMessages, Records: batch}).Append(nil)
	req := wire.PollMessages{Consumer: SingleConsumer(ID(1)), StreamID: ID(0), TopicID: ID(0),
		Partition: wire.SomePartition(0), Strategy: wire.PollingStrategy{Kind: wire.PollingOffset}, Count: benchMessages}
	b.Run(fmt.Sprintf("client/%dx%dB", benchMessages, benchPayloadBytes), func(b *testing.B) {
		var h wire.ReplyHeader
		h.Size, h.Command, h.Operation = uint32(wire.HeaderSize+len(body)), wire.CommandReply, wire.OperationNonReplicated
		reply := make([]byte, wire.HeaderSize)
		h.Put(reply)
		reply = append(reply, body...)
		c := scriptedClient(b, &echoConn{reply: reply})
		ctx := context.Background()
		b.SetBytes(benchMessages * benchPayloadBytes)
		b.ReportAllocs()
		for b.Loop() {
			polled, err := c.PollMessages(ctx, &req)
			if err != nil {
				b.Fatal(err)
			}
			n := 0
			for it := polled.Messages(); it.Next(); {
				n += len(it.Message().Payload())
			}
			if n != benchMessages*benchPayloadBytes {
				b.Fatal(n)
			}
		}
	})
	b.Run(fmt.Sprintf("iterate-baseline/%dx%dB", benchMessages, benchPayloadBytes), func(b *testing.B) {
		b.SetBytes(benchMessages * benchPayloadBytes)
		b.ReportAllocs()
		for b.Loop() {
			n := 0
			for it := wire.Frames(batch); it.Next(); {
				n += len(it.Frame().Payload())
			}
			if n != benchMessages*benchPayloadBytes {
				b.Fatal(n)
			}
		}
	})
}
