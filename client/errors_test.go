package client

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"testing"
	"time"

	"github.com/iggy-shard/iggy-shard/wire"
)

// A status denial and a committed rejection are both the code itself, and leave the
// connection usable.
func TestErrorCodesFromStatusAndResult(t *testing.T) {
	s := newFakeServer(t, session(func(req *wire.RequestHeader, body []byte) ([]byte, bool) {
		switch {
		case req.Operation == wire.OperationCreateStream:
			return rejection(req, wire.ErrStreamNameAlreadyExists), false
		case req.Operation == wire.OperationStoreConsumerOffset:
			return rejection(req, wire.ErrUnauthorized), false
		case req.Operation == wire.OperationDeleteConsumerOffset:
			return denial(req, wire.ErrConsumerOffsetNotFound), false
		case req.NonReplicatedCode == wire.CodeGetStats:
			return denial(req, wire.ErrUnauthorized), false
		case req.NonReplicatedCode == wire.CodeFlushUnsavedBuffer:
			return denial(req, wire.ErrFeatureUnavailable), false
		}
		return denial(req, wire.ErrInvalidCommand), false
	}))
	c := loggedIn(t, s)
	ctx := testContext(t)
	_, err := c.CreateStream(ctx, "taken")
	mustCode(t, err, wire.ErrStreamNameAlreadyExists)
	mustCode(t, c.StoreConsumerOffset(ctx, &wire.StoreConsumerOffset{Consumer: SingleConsumer(ID(1)),
		StreamID: ID(0), TopicID: ID(0), Ack: wire.AckQuorum}), wire.ErrUnauthorized)
	mustCode(t, c.DeleteConsumerOffset(ctx, &wire.DeleteConsumerOffset{Consumer: SingleConsumer(ID(1)),
		StreamID: ID(0), TopicID: ID(0), Ack: wire.AckNoAck}), wire.ErrConsumerOffsetNotFound)
	_, err = c.GetStats(ctx)
	mustCode(t, err, wire.ErrUnauthorized)
	mustCode(t, c.FlushUnsavedBuffer(ctx, ID(0), ID(0), 0, true), wire.ErrFeatureUnavailable)
	_, err = c.SendRaw(ctx, 60000, nil)
	mustCode(t, err, wire.ErrInvalidCommand)
	var ce *ConnectionError
	if errors.As(err, &ce) {
		t.Fatal("a status reply broke the connection")
	}
	if err := c.Ping(ctx); err != nil {
		t.Fatal(err)
	}
}

// Result framing follows the reply's operation byte
// (iggy.apache.org/docs/binary-protocol/framing, "Result section"): CreateTopic
// answered with op 64 and DeleteSegments with op 68 are framed, DeleteSegments echoed
// as op 138 is not.
func TestResultFramingByReplyOperation(t *testing.T) {
	deleteSegmentsOp := wire.OperationTruncatePartition
	s := newFakeServer(t, session(func(req *wire.RequestHeader, body []byte) ([]byte, bool) {
		switch req.Operation {
		case wire.OperationCreateTopic:
			d := wire.TopicDetails{TopicHeader: wire.TopicHeader{ID: 3, PartitionsCount: 1, Name: []byte("t")},
				Partitions: []wire.PartitionInfo{{ID: 0}}}
			out := reply(req, d.Append(nil))
			if binary.LittleEndian.Uint32(out[wire.HeaderSize:]) != 0 || out[208] != byte(wire.OperationCreateTopicWithAssignments) {
				t.Errorf("fixture: CreateTopic reply not framed under op 64")
			}
			return out, false
		case wire.OperationDeleteSegments:
			if deleteSegmentsOp == wire.OperationTruncatePartition {
				return rejection(req, wire.ErrPartitionNotFound), false
			}
			h := wire.ReplyTo(req, 0, 0, false) // op 138 echoed, empty body
			out := make([]byte, wire.HeaderSize)
			h.Put(out)
			return out, false
		}
		return reply(req, nil), false
	}))
	c := loggedIn(t, s)
	ctx := testContext(t)
	topic, err := c.CreateTopic(ctx, ID(0), "t", 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if topic.ID != 3 || len(topic.Partitions) != 1 {
		t.Fatalf("topic = %+v", topic)
	}
	mustCode(t, c.DeleteSegments(ctx, ID(0), ID(0), 0, 1), wire.ErrPartitionNotFound)
	deleteSegmentsOp = wire.OperationDeleteSegments
	if err := c.DeleteSegments(ctx, ID(0), ID(0), 0, 1); err != nil {
		t.Fatal(err)
	}
}

// Empty bodies that mean "not found" come back as the Go SDK's codes.
func TestNotFoundReplies(t *testing.T) {
	s := newFakeServer(t, session(func(req *wire.RequestHeader, body []byte) ([]byte, bool) {
		return reply(req, nil), false
	}))
	c := loggedIn(t, s)
	ctx := testContext(t)
	_, err := c.GetStream(ctx, ID(9))
	mustCode(t, err, wire.ErrStreamIdNotFound)
	_, err = c.GetTopic(ctx, ID(9), ID(9))
	mustCode(t, err, wire.ErrTopicIdNotFound)
	_, err = c.GetUser(ctx, NameID("nobody"))
	mustCode(t, err, wire.ErrResourceNotFound)
	_, err = c.GetConsumerGroup(ctx, ID(0), ID(0), ID(9))
	mustCode(t, err, wire.ErrConsumerGroupIdNotFound)
	_, err = c.SyncConsumerGroup(ctx, ID(0), ID(0), ID(9))
	mustCode(t, err, wire.ErrConsumerGroupMemberNotFound)
	_, err = c.GetClient(ctx, 77)
	mustCode(t, err, wire.ErrClientNotFound)
	_, found, err := c.GetConsumerOffset(ctx, &wire.GetConsumerOffset{Consumer: SingleConsumer(ID(1)), StreamID: ID(0), TopicID: ID(0)})
	if err != nil || found {
		t.Fatalf("GetConsumerOffset = %v, %v", found, err)
	}
	streams, err := c.GetStreams(ctx)
	if err != nil || len(streams) != 0 {
		t.Fatalf("GetStreams = %v, %v", streams, err)
	}
}

// Every eviction reason maps to the code the SDKs surface (apache/iggy
// core/common/src/error/eviction.rs), closes the connection, and later calls fail at
// once.
func TestEvictionMapping(t *testing.T) {
	window := wire.AcceptedProtocolWindow
	cases := []struct {
		reason     wire.EvictionReason
		max, min   uint32
		want       wire.ErrorCode
		wantWindow bool
	}{
		{wire.EvictionInvalidCredentials, 0, 0, wire.ErrInvalidCredentials, false},
		{wire.EvictionInvalidToken, 0, 0, wire.ErrInvalidPersonalAccessToken, false},
		{wire.EvictionNoSession, 0, 0, wire.ErrUnauthenticated, false},
		{wire.EvictionSessionTooLow, 0, 0, wire.ErrUnauthenticated, false},
		{wire.EvictionSessionReleaseMismatch, 0, 0, wire.ErrUnauthenticated, false},
		{wire.EvictionUserInactive, 0, 0, wire.ErrUnauthenticated, false},
		{wire.EvictionSessionError, 0, 0, wire.ErrUnauthenticated, false},
		{wire.EvictionStaleClient, 0, 0, wire.ErrStaleClient, false},
		{wire.EvictionIncompatibleProtocol, uint32(window.Max), uint32(window.Min), wire.ErrIncompatibleProtocolVersion, true},
		{wire.EvictionIncompatibleProtocol, uint32(window.Max), 0, wire.ErrUnauthenticated, true},
		{wire.EvictionIncompatibleProtocol, 1, 2, wire.ErrUnauthenticated, true},
		{wire.EvictionMalformedLogin, 0, 0, wire.ErrInvalidFormat, false},
		{wire.EvictionReserved, 0, 0, wire.ErrInvalidCommand, false},
		{wire.EvictionClientReleaseTooLow, 0, 0, wire.ErrInvalidCommand, false},
		{wire.EvictionClientReleaseTooHigh, 0, 0, wire.ErrInvalidCommand, false},
		{wire.EvictionInvalidRequestOperation, 0, 0, wire.ErrInvalidCommand, false},
		{wire.EvictionInvalidRequestBody, 0, 0, wire.ErrInvalidCommand, false},
		{wire.EvictionInvalidRequestBodySize, 0, 0, wire.ErrInvalidCommand, false},
		{200, 0, 0, wire.ErrInvalidCommand, false},
	}
	for _, tc := range cases {
		t.Run(tc.reason.String(), func(t *testing.T) {
			s := newFakeServer(t, func(req *wire.RequestHeader, body []byte) ([]byte, bool) {
				return eviction(req, tc.reason, tc.max, tc.min), false
			})
			c := dialTest(t, s)
			ctx := testContext(t)
			_, err := c.Login(ctx, "iggy", "wrong")
			var ev *EvictionError
			if !errors.As(err, &ev) {
				t.Fatalf("err = %v, want an EvictionError", err)
			}
			if ev.Reason != tc.reason || ev.Code != tc.want || !errors.Is(err, tc.want) {
				t.Fatalf("eviction = %+v, want reason %v code %v", ev, tc.reason, tc.want)
			}
			if tc.wantWindow && (uint32(ev.ServerProtocolVersion) != tc.max || uint32(ev.ServerProtocolVersionMin) != tc.min) {
				t.Fatalf("window = %v..%v", ev.ServerProtocolVersionMin, ev.ServerProtocolVersion)
			}
			err = c.Ping(ctx)
			var ce *ConnectionError
			if !errors.As(err, &ce) || !errors.Is(err, wire.ErrDisconnected) {
				t.Fatalf("after eviction: %v", err)
			}
			if n := len(s.recorded()); n != 1 {
				t.Fatalf("server got %d requests", n)
			}
		})
	}
}

// Frames that break the protocol close the connection with the code the Go SDK
// reports; later calls fail without touching the network.
func TestMalformedReplies(t *testing.T) {
	header := func(req *wire.RequestHeader, mutate func(h *wire.ReplyHeader)) []byte {
		h := wire.ReplyTo(req, 0, 0, false)
		mutate(&h)
		out := make([]byte, wire.HeaderSize)
		h.Put(out)
		return out
	}
	cases := []struct {
		name  string
		build func(req *wire.RequestHeader) []byte
		code  wire.ErrorCode
	}{
		{"size above max", func(req *wire.RequestHeader) []byte {
			return header(req, func(h *wire.ReplyHeader) { h.Size = FrameSizeMax + 1 })
		}, wire.ErrInvalidCommand},
		{"size below header", func(req *wire.RequestHeader) []byte {
			return header(req, func(h *wire.ReplyHeader) { h.Size = 255 })
		}, wire.ErrInvalidCommand},
		{"command prepare", func(req *wire.RequestHeader) []byte {
			return header(req, func(h *wire.ReplyHeader) { h.Command = wire.CommandPrepare })
		}, wire.ErrInvalidCommand},
		{"unknown operation", func(req *wire.RequestHeader) []byte {
			return header(req, func(h *wire.ReplyHeader) { h.Operation = 100 })
		}, wire.ErrInvalidCommand},
		{"status with body", func(req *wire.RequestHeader) []byte {
			out := header(req, func(h *wire.ReplyHeader) { h.Status = wire.ErrUnauthorized; h.Size = wire.HeaderSize + 4 })
			return append(out, 0, 0, 0, 0)
		}, wire.ErrInvalidCommand},
		{"eviction with body", func(req *wire.RequestHeader) []byte {
			out := eviction(req, wire.EvictionStaleClient, 0, 0)
			binary.LittleEndian.PutUint32(out[wire.SizeFieldOffset:], wire.HeaderSize+1)
			return append(out, 0)
		}, wire.ErrInvalidCommand},
		{"echo of another request", func(req *wire.RequestHeader) []byte {
			return header(req, func(h *wire.ReplyHeader) { h.Request++ })
		}, wire.ErrDisconnected},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newFakeServer(t, func(req *wire.RequestHeader, body []byte) ([]byte, bool) {
				return tc.build(req), false
			})
			c := dialTest(t, s)
			ctx := testContext(t)
			err := c.Ping(ctx)
			var ce *ConnectionError
			if !errors.As(err, &ce) || !errors.Is(err, tc.code) {
				t.Fatalf("err = %v, want a ConnectionError with %v", err, tc.code)
			}
			if again := c.Ping(ctx); again != err {
				t.Fatalf("second call: %v, want the same error", again)
			}
			if n := len(s.recorded()); n != 1 {
				t.Fatalf("server got %d requests", n)
			}
		})
	}
}

// A served SendMessages without its confirmations is refused like the Go SDK does.
func TestSendReplyWithoutConfirmations(t *testing.T) {
	s := newFakeServer(t, session(func(req *wire.RequestHeader, body []byte) ([]byte, bool) {
		h := wire.ReplyTo(req, 0, 0, true)
		out := make([]byte, wire.HeaderSize)
		h.Put(out)
		return out, false
	}))
	c := loggedIn(t, s)
	_, err := c.SendMessages(testContext(t), ID(0), ID(0), wire.Partitioning{Kind: wire.PartitioningPartitionID},
		[]Message{{Payload: []byte("x")}})
	mustCode(t, err, wire.ErrInvalidCommand)
}

// A server that closes in the middle of a reply is an error, never a hang.
func TestServerClosesMidReply(t *testing.T) {
	cases := []struct {
		name string
		cut  func(full []byte) []byte
	}{
		{"nothing", func(full []byte) []byte { return nil }},
		{"half a header", func(full []byte) []byte { return full[:100] }},
		{"header only", func(full []byte) []byte { return full[:wire.HeaderSize] }},
		{"part of the body", func(full []byte) []byte { return full[:len(full)-3] }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newFakeServer(t, func(req *wire.RequestHeader, body []byte) ([]byte, bool) {
				return tc.cut(reply(req, clusterPayload())), true
			})
			c := dialTest(t, s)
			_, err := c.GetClusterMetadata(testContext(t))
			var ce *ConnectionError
			if !errors.As(err, &ce) || !errors.Is(err, wire.ErrDisconnected) ||
				!(errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)) {
				t.Fatalf("err = %v", err)
			}
		})
	}
}

// A server that never answers: the context's deadline, the client's request timeout
// and a cancellation each end the request and break the connection.
func TestTimeoutsAndCancellation(t *testing.T) {
	silent := func(req *wire.RequestHeader, body []byte) ([]byte, bool) { return nil, false }

	t.Run("context deadline", func(t *testing.T) {
		s := newFakeServer(t, silent)
		c := dialTest(t, s)
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		err := c.Ping(ctx)
		if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, os.ErrDeadlineExceeded) || !errors.Is(err, wire.ErrDisconnected) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("request timeout", func(t *testing.T) {
		s := newFakeServer(t, silent)
		c := dialTest(t, s, WithRequestTimeout(50*time.Millisecond))
		err := c.Ping(context.Background())
		if !errors.Is(err, os.ErrDeadlineExceeded) || !errors.Is(err, wire.ErrDisconnected) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("cancel", func(t *testing.T) {
		received := make(chan struct{}, 1)
		s := newFakeServer(t, func(req *wire.RequestHeader, body []byte) ([]byte, bool) {
			received <- struct{}{}
			return nil, false
		})
		c := dialTest(t, s)
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			<-received
			cancel()
		}()
		err := c.Ping(ctx)
		if !errors.Is(err, context.Canceled) || !errors.Is(err, wire.ErrDisconnected) {
			t.Fatalf("err = %v", err)
		}
	})
}

// A cancellable context that finishes normally leaves nothing armed behind: the
// next request on a Background context is not woken by it.
func TestFinishedContextDoesNotLeak(t *testing.T) {
	s := newFakeServer(t, session(nil))
	c := dialTest(t, s)
	ctx, cancel := context.WithCancel(context.Background())
	if err := c.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	cancel()
	for range 3 {
		if err := c.Ping(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

// 57 is replayed byte for byte until it commits; 58 is replayed until its window
// closes and then returned (without leader redirection; leader_test.go has the rest).
func TestTransientReplays(t *testing.T) {
	t.Run("not committed", func(t *testing.T) {
		answered := 0
		s := newFakeServer(t, session(func(req *wire.RequestHeader, body []byte) ([]byte, bool) {
			answered++
			if answered <= 2 {
				return rejection(req, wire.ErrTransientNotCommitted), false
			}
			d := wire.StreamDetails{StreamHeader: wire.StreamHeader{Name: []byte("s")}}
			return reply(req, d.Append(nil)), false
		}))
		c := loggedIn(t, s, WithTransientRetry(TransientRetry{Interval: time.Millisecond, NotCommittedWindow: time.Second, NotAcceptedWindow: time.Second}))
		if _, err := c.CreateStream(testContext(t), "s"); err != nil {
			t.Fatal(err)
		}
		frames := s.recorded()
		creates := frames[len(frames)-3:]
		for _, f := range creates[1:] {
			if !bytes.Equal(f.raw, creates[0].raw) {
				t.Fatal("replay differs from the first send")
			}
		}
	})
	t.Run("not accepted", func(t *testing.T) {
		s := newFakeServer(t, session(func(req *wire.RequestHeader, body []byte) ([]byte, bool) {
			return denial(req, wire.ErrTransientNotAccepted), false
		}))
		c := loggedIn(t, s, WithLeaderRedirection(false),
			WithTransientRetry(TransientRetry{Interval: time.Millisecond, NotCommittedWindow: time.Second, NotAcceptedWindow: 20 * time.Millisecond}))
		err := c.DeleteStream(testContext(t), ID(0))
		mustCode(t, err, wire.ErrTransientNotAccepted)
		if n := len(s.recorded()); n < 4 {
			t.Fatalf("only %d requests: 58 was not replayed", n)
		}
		if err := c.Ping(testContext(t)); err != nil {
			t.Fatal(err)
		}
	})
}

// Encoders refuse what no server accepts, before anything is sent.
func TestLocalValidation(t *testing.T) {
	s := newFakeServer(t, session(nil))
	c := loggedIn(t, s)
	ctx := testContext(t)
	before := len(s.recorded())
	_, err := c.CreateStream(ctx, "")
	mustCode(t, err, wire.ErrInvalidCommand)
	_, err = c.GetStream(ctx, NameID(""))
	mustCode(t, err, wire.ErrInvalidIdentifier)
	_, err = c.SendMessages(ctx, ID(0), ID(0), wire.Partitioning{Kind: wire.PartitioningPartitionID}, nil)
	mustCode(t, err, wire.ErrInvalidMessagesCount)
	_, err = c.SendMessages(ctx, ID(0), ID(0), wire.Partitioning{Kind: wire.PartitioningPartitionID}, []Message{{}})
	mustCode(t, err, wire.ErrInvalidMessagePayloadLength)
	_, err = c.SendRaw(ctx, wire.CodeLoginUser, nil)
	mustCode(t, err, wire.ErrInvalidCommand)
	_, err = c.DescribeOptions(ctx, 9)
	mustCode(t, err, wire.ErrInvalidCommand)
	huge := make([]byte, FrameSizeMax)
	_, err = c.SendMessages(ctx, ID(0), ID(0), wire.Partitioning{Kind: wire.PartitioningPartitionID}, []Message{{Payload: huge[:wire.MessagePayloadSizeMax]}, {Payload: huge[:8<<20]}})
	mustCode(t, err, wire.ErrInvalidConfiguration)
	if after := len(s.recorded()); after != before {
		t.Fatalf("%d requests sent", after-before)
	}
	if err := c.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	mustCode(t, c.Ping(ctx), wire.ErrNotConnected)
}

// A server that answers 57 forever cannot hold a request past its window, even
// without a deadline.
func TestTransientReplaysAreBounded(t *testing.T) {
	s := newFakeServer(t, session(func(req *wire.RequestHeader, body []byte) ([]byte, bool) {
		return rejection(req, wire.ErrTransientNotCommitted), false
	}))
	c := loggedIn(t, s, WithRequestTimeout(0), WithTransientRetry(TransientRetry{Interval: time.Millisecond,
		NotCommittedWindow: 20 * time.Millisecond, NotAcceptedWindow: time.Millisecond}))
	_, err := c.CreateStream(context.Background(), "s")
	mustCode(t, err, wire.ErrTransientNotCommitted)
}

// Close does not wait for a request blocked on a silent server: the request fails at
// once with a ConnectionError.
func TestCloseWakesARequestInFlight(t *testing.T) {
	received := make(chan struct{}, 1)
	s := newFakeServer(t, func(req *wire.RequestHeader, body []byte) ([]byte, bool) {
		received <- struct{}{}
		return nil, false
	})
	c := dialTest(t, s, WithRequestTimeout(0))
	done := make(chan error, 1)
	go func() { done <- c.Ping(context.Background()) }()
	<-received
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	err := <-done
	var ce *ConnectionError
	if !errors.As(err, &ce) {
		t.Fatalf("err = %v", err)
	}
	mustCode(t, c.Ping(context.Background()), wire.ErrNotConnected)
}

// The heartbeat pings a quiet connection and stops at Close.
func TestHeartbeat(t *testing.T) {
	pings := make(chan struct{}, 16)
	s := newFakeServer(t, func(req *wire.RequestHeader, body []byte) ([]byte, bool) {
		if req.NonReplicatedCode == wire.CodePing {
			select {
			case pings <- struct{}{}:
			default:
			}
		}
		return reply(req, nil), false
	})
	c, err := Dial(testContext(t), s.addr(), WithHeartbeat(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		select {
		case <-pings:
		case <-time.After(10 * time.Second):
			t.Fatalf("%d heartbeat pings in 10 s, want 3", i)
		}
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}
