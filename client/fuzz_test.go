package client

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/iggy-shard/iggy-shard/wire"
)

// scriptConn is an in-memory net.Conn standing in for a server: each request the
// client writes gets the bytes answer returns for it, and once those run out every
// read is io.EOF, so a client that wants more than the script holds ends instead of
// hanging.
type scriptConn struct {
	answer  func(request []byte) []byte
	pending []byte
}

func (c *scriptConn) Write(p []byte) (int, error) {
	if c.answer != nil {
		c.pending = append(c.pending, c.answer(p)...)
	}
	return len(p), nil
}

func (c *scriptConn) Read(p []byte) (int, error) {
	if len(c.pending) == 0 {
		return 0, io.EOF
	}
	n := copy(p, c.pending)
	c.pending = c.pending[n:]
	return n, nil
}

func (c *scriptConn) Close() error                     { return nil }
func (c *scriptConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (c *scriptConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (c *scriptConn) SetDeadline(time.Time) error      { return nil }
func (c *scriptConn) SetReadDeadline(time.Time) error  { return nil }
func (c *scriptConn) SetWriteDeadline(time.Time) error { return nil }

func scriptedClient(tb testing.TB, conn net.Conn) *Client {
	o := defaultOptions()
	o.random = &countingReader{}
	o.transientRetry = TransientRetry{} // no replays: a script answers once
	o.requestTimeout = 0
	c, err := newClient(conn, o)
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// fuzzCommands runs command i against c and consumes whatever it returns.
func fuzzCommand(c *Client, i uint8) {
	ctx := context.Background()
	id := ID(1)
	switch i % 24 {
	case 0:
		_ = c.Ping(ctx)
	case 1:
		_, _ = c.GetStats(ctx)
	case 2:
		_, _ = c.GetStream(ctx, id)
	case 3:
		_, _ = c.GetStreams(ctx)
	case 4:
		_, _ = c.GetTopic(ctx, id, id)
	case 5:
		_, _ = c.GetTopics(ctx, id)
	case 6:
		_, _ = c.GetUser(ctx, id)
	case 7:
		_, _ = c.GetUsers(ctx)
	case 8:
		_, _ = c.GetConsumerGroup(ctx, id, id, id)
	case 9:
		_, _ = c.SyncConsumerGroup(ctx, id, id, id)
	case 10:
		_, _ = c.GetClusterMetadata(ctx)
	case 11:
		_, _ = c.GetMe(ctx)
	case 12:
		_, _ = c.GetClients(ctx)
	case 13:
		_, _ = c.DescribeOptions(ctx, wire.OptionsScopeTopic)
	case 14:
		_, _ = c.GetPersonalAccessTokens(ctx)
	case 15:
		_, _ = c.CreatePersonalAccessToken(ctx, "t", 0)
	case 16:
		_, _ = c.CreateStream(ctx, "s")
	case 17:
		_, _, _ = c.GetConsumerOffset(ctx, &wire.GetConsumerOffset{Consumer: SingleConsumer(id), StreamID: id, TopicID: id})
	case 18:
		polled, err := c.PollMessages(ctx, &wire.PollMessages{Consumer: SingleConsumer(id), StreamID: id, TopicID: id,
			Strategy: wire.PollingStrategy{Kind: wire.PollingNext}, Count: 1})
		if err == nil {
			for it := polled.Messages(); it.Next(); {
				m := it.Message()
				_, _ = m.Payload(), m.UserHeaders()
			}
		}
	case 19:
		conf, err := c.SendMessages(ctx, id, id, wire.Partitioning{Kind: wire.PartitioningPartitionID},
			[]Message{{Payload: []byte("p")}})
		if err == nil {
			for j := range conf.Len() {
				_ = conf.At(j)
			}
		}
	case 20:
		_, _ = c.Login(ctx, "iggy", "iggy")
	case 21:
		_, _ = c.GetSnapshot(ctx, wire.SnapshotStored, wire.SnapshotAll)
	case 22:
		p := c.NewProducer(id, id, wire.Partitioning{Kind: wire.PartitioningMessagesKey, Key: []byte("k")})
		_, _ = p.Send(ctx, []Message{{Payload: []byte("p")}})
	case 23:
		k := c.NewConsumer(ConsumerConfig{Consumer: GroupConsumer(id), Stream: id, Topic: id,
			Strategy: wire.PollingStrategy{Kind: wire.PollingNext}, BatchSize: 1})
		if polled, err := k.Poll(ctx); err == nil {
			for it := polled.Messages(); it.Next(); {
				_ = it.Message().Payload()
			}
		}
	}
}

// FuzzReplyBody answers one command with a well-framed reply (the request number
// echoed) of any operation byte, status and body: every decoder behind every command
// meets arbitrary bytes. Nothing may panic or hang.
func FuzzReplyBody(f *testing.F) {
	f.Add(uint8(3), uint8(wire.OperationNonReplicated), uint32(0), []byte{})
	f.Add(uint8(2), uint8(wire.OperationNonReplicated), uint32(0), (&wire.StreamDetails{StreamHeader: wire.StreamHeader{
		Name: []byte("s"), TopicsCount: 1}, Topics: []wire.TopicHeader{{Name: []byte("t")}}}).Append(nil))
	f.Add(uint8(16), uint8(wire.OperationCreateStream), uint32(0), wire.AppendResultRejection(nil, wire.ErrStreamNameAlreadyExists))
	f.Add(uint8(18), uint8(wire.OperationNonReplicated), uint32(0), polledBody(f, 0, 5, 2))
	f.Add(uint8(19), uint8(wire.OperationSendMessages), uint32(0), wire.AppendSendConfirmations(nil, wire.SendConfirmation{}))
	f.Add(uint8(20), uint8(wire.OperationRegister), uint32(0), append(wire.AppendResultSuccess(nil), loginPayload()...))
	f.Add(uint8(10), uint8(wire.OperationNonReplicated), uint32(0), clusterPayload())
	f.Add(uint8(9), uint8(wire.OperationNonReplicated), uint32(0), (&wire.Assignment{PartitionIDs: []uint32{1, 2}}).Append(nil))
	f.Add(uint8(1), uint8(wire.OperationNonReplicated), uint32(wire.ErrUnauthorized), []byte{})
	f.Add(uint8(15), uint8(wire.OperationCreatePersonalAccessToken), uint32(0), []byte{0, 0, 0, 0, 3, 'a', 'b', 'c'})
	f.Add(uint8(22), uint8(wire.OperationNonReplicated), uint32(0), (&wire.TopicDetails{TopicHeader: wire.TopicHeader{
		Name: []byte("t"), PartitionsCount: 1}, Partitions: []wire.PartitionInfo{{}}}).Append(nil))
	f.Fuzz(func(t *testing.T, command, op uint8, status uint32, body []byte) {
		conn := &scriptConn{}
		conn.answer = func(request []byte) []byte {
			h := wire.ReplyHeader{}
			h.Size = uint32(wire.HeaderSize + len(body))
			h.Command = wire.CommandReply
			h.Request = binary.LittleEndian.Uint64(request[168:])
			h.Operation = wire.Operation(op)
			h.Status = wire.ErrorCode(status)
			out := make([]byte, wire.HeaderSize, wire.HeaderSize+len(body))
			h.Put(out)
			return append(out, body...)
		}
		c := scriptedClient(t, conn)
		c.session = testSession // so that writes are sent rather than refused locally
		fuzzCommand(c, command)
		fuzzCommand(c, command+1)
	})
}

// FuzzReplyStream feeds arbitrary bytes as everything the server ever sends, to the
// framing itself: header validation, evictions, echo checks, short reads.
func FuzzReplyStream(f *testing.F) {
	ping := func(request uint64) []byte {
		var h wire.ReplyHeader
		h.Size, h.Command, h.Request, h.Operation = wire.HeaderSize, wire.CommandReply, request, wire.OperationNonReplicated
		out := make([]byte, wire.HeaderSize)
		h.Put(out)
		return out
	}
	f.Add(uint8(0), ping(1))
	f.Add(uint8(0), append(ping(1), ping(1)...))
	ev := make([]byte, wire.HeaderSize)
	wire.PutEviction(ev, wire.Uint128{Lo: 1}, wire.EvictionIncompatibleProtocol, uint32(wire.ServerProtocolVersion), 1)
	f.Add(uint8(20), ev)
	f.Add(uint8(3), ping(2)[:100])
	f.Fuzz(func(t *testing.T, command uint8, stream []byte) {
		conn := &scriptConn{pending: stream}
		c := scriptedClient(t, conn)
		c.session = testSession
		fuzzCommand(c, command)
		fuzzCommand(c, command+7)
	})
}
