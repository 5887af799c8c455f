package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/iggy-shard/iggy-shard/wire"
)

// scriptedServer hands every send to the test, which decides what the fake server
// writes back and when: nothing yet (the reply is held, and the server reads on),
// several replies at once, in any order, or a dropped connection.
type scriptedServer struct {
	*fakeServer
	arrived chan wire.RequestHeader
	answers chan scriptedAnswer
}

type scriptedAnswer struct {
	reply []byte
	close bool
}

func newScriptedServer(t *testing.T) *scriptedServer {
	ss := &scriptedServer{arrived: make(chan wire.RequestHeader, 64), answers: make(chan scriptedAnswer)}
	stop := make(chan struct{})
	ss.fakeServer = newFakeServer(t, session(func(req *wire.RequestHeader, body []byte) ([]byte, bool) {
		if req.Operation != wire.OperationSendMessages {
			return denial(req, wire.ErrInvalidCommand), false
		}
		ss.arrived <- *req
		select {
		case a := <-ss.answers:
			return a.reply, a.close
		case <-stop:
			return nil, true
		}
	}))
	// Cleanups run last-in first-out: the handler is released before the server's
	// shutdown waits for it.
	t.Cleanup(func() { close(stop) })
	return ss
}

// next waits for the next send to reach the server.
func (ss *scriptedServer) next(t *testing.T) wire.RequestHeader {
	t.Helper()
	select {
	case h := <-ss.arrived:
		return h
	case <-time.After(testTimeout):
		t.Fatal("no send reached the server")
		return wire.RequestHeader{}
	}
}

// answer makes the server write reply (nothing when nil) for the send it holds,
// then close the connection if asked.
func (ss *scriptedServer) answer(t *testing.T, reply []byte, close bool) {
	t.Helper()
	select {
	case ss.answers <- scriptedAnswer{reply: reply, close: close}:
	case <-time.After(testTimeout):
		t.Fatal("the server is not waiting for an answer")
	}
}

// arriveHeld waits for n sends, holding the replies of all but the last, which the
// caller answers.
func (ss *scriptedServer) arriveHeld(t *testing.T, n int) []wire.RequestHeader {
	t.Helper()
	reqs := []wire.RequestHeader{ss.next(t)}
	for range n - 1 {
		ss.answer(t, nil, false)
		reqs = append(reqs, ss.next(t))
	}
	return reqs
}

// confirm is a SendMessages reply to req with one confirmation at baseOffset.
func confirm(req wire.RequestHeader, baseOffset uint64) []byte {
	return reply(&req, wire.AppendSendConfirmations(nil, wire.SendConfirmation{StreamID: 1, TopicID: 1, BaseOffset: baseOffset}))
}

func dialPipelined(t *testing.T, s *fakeServer, popts PipelineOptions) *PipelinedProducer {
	t.Helper()
	p, err := DialPipelinedProducer(testContext(t), s.addr(), ID(1), ID(1),
		wire.Partitioning{Kind: wire.PartitioningPartitionID, PartitionID: 0}, popts, WithCredentials("iggy", "iggy"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

var smallBatch = []Message{{ID: wire.Uint128{Lo: 1}, Payload: []byte("hello")}}

func sendAll(t *testing.T, p *PipelinedProducer, n int) []Pending {
	t.Helper()
	var pendings []Pending
	for range n {
		pd, err := p.Send(testContext(t), smallBatch)
		if err != nil {
			t.Fatal(err)
		}
		pendings = append(pendings, pd)
	}
	return pendings
}

func TestPipelinedProducerWindowAndReplyOrder(t *testing.T) {
	ss := newScriptedServer(t)
	p := dialPipelined(t, ss.fakeServer, PipelineOptions{InFlightMax: 4})
	ctx := testContext(t)
	pendings := sendAll(t, p, 4)
	reqs := ss.arriveHeld(t, 4)
	if n := p.InFlight(); n != 4 {
		t.Fatalf("in flight %d, want 4", n)
	}

	// The window is full: a fifth batch waits for a slot, here until its context ends.
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	_, err := p.Send(short, smallBatch)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("send into a full window: %v", err)
	}

	// Replies in reverse order, in one write: each finds its batch by its echo.
	var replies []byte
	for i := len(reqs) - 1; i >= 0; i-- {
		replies = append(replies, confirm(reqs[i], reqs[i].Request*100)...)
	}
	ss.answer(t, replies, false)
	for i, pd := range pendings {
		conf, err := pd.Wait(ctx)
		if err != nil {
			t.Fatalf("batch %d: %v", i, err)
		}
		if pd.Request() != reqs[i].Request || conf.BaseOffset != reqs[i].Request*100 {
			t.Fatalf("batch %d: request %d, confirmation %+v; sent as request %d", i, pd.Request(), conf, reqs[i].Request)
		}
		if _, err := pd.Wait(ctx); err != ErrPendingSpent {
			t.Fatalf("second Wait: %v", err)
		}
	}
	for i, h := range reqs {
		if h.Request != reqs[0].Request+uint64(i) || h.Request == 0 || h.Session != testSession || h.Client.IsZero() || h.Client != reqs[0].Client {
			t.Fatalf("request %d header: request %d session %x client %v", i, h.Request, h.Session, h.Client)
		}
	}

	// The slots are free again.
	pd, err := p.Send(ctx, smallBatch)
	if err != nil {
		t.Fatal(err)
	}
	h := ss.next(t)
	ss.answer(t, confirm(h, 7), false)
	if conf, err := pd.Wait(ctx); err != nil || conf.BaseOffset != 7 {
		t.Fatalf("after the window drained: %+v %v", conf, err)
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if n := p.InFlight(); n != 0 {
		t.Fatalf("in flight after Flush: %d", n)
	}
}

func TestPipelinedProducerRejectionFailsTheBatchesBehind(t *testing.T) {
	ss := newScriptedServer(t)
	p := dialPipelined(t, ss.fakeServer, PipelineOptions{InFlightMax: 4})
	ctx := testContext(t)
	pendings := sendAll(t, p, 4)
	reqs := ss.arriveHeld(t, 4)
	var replies []byte
	replies = append(replies, confirm(reqs[0], 1)...)
	replies = append(replies, confirm(reqs[1], 2)...)
	replies = append(replies, denial(&reqs[2], wire.ErrTopicIdNotFound)...)
	replies = append(replies, confirm(reqs[3], 4)...)
	ss.answer(t, replies, false)

	for i := range 2 {
		if conf, err := pendings[i].Wait(ctx); err != nil || conf.BaseOffset != uint64(i+1) {
			t.Fatalf("batch %d before the refusal: %+v %v", i, conf, err)
		}
	}
	_, err := pendings[2].Wait(ctx)
	if !errors.Is(err, wire.ErrTopicIdNotFound) || errors.Is(err, ErrNotAcknowledged) {
		t.Fatalf("refused batch: %v", err)
	}
	// Its reply was on the socket, but the producer had stopped reading: unknown.
	_, err = pendings[3].Wait(ctx)
	var rejected *BatchRejectedError
	if !errors.Is(err, ErrNotAcknowledged) || !errors.As(err, &rejected) || rejected.Request != reqs[2].Request {
		t.Fatalf("batch behind the refusal: %v", err)
	}
	if _, err := p.Send(ctx, smallBatch); !errors.Is(err, ErrNotAcknowledged) {
		t.Fatalf("send after the failure: %v", err)
	}
	if err := p.Flush(ctx); !errors.Is(err, ErrNotAcknowledged) {
		t.Fatalf("flush after the failure: %v", err)
	}
}

func TestPipelinedProducerConnectionDropsWithBatchesInFlight(t *testing.T) {
	ss := newScriptedServer(t)
	p := dialPipelined(t, ss.fakeServer, PipelineOptions{InFlightMax: 4})
	ctx := testContext(t)
	pendings := sendAll(t, p, 3)
	r1 := ss.next(t)
	ss.answer(t, confirm(r1, 1), false)
	ss.next(t)
	ss.answer(t, nil, false)
	ss.next(t)
	ss.answer(t, nil, true)

	if conf, err := pendings[0].Wait(ctx); err != nil || conf.BaseOffset != 1 {
		t.Fatalf("answered batch: %+v %v", conf, err)
	}
	for i, pd := range pendings[1:] {
		_, err := pd.Wait(ctx)
		var broken *ConnectionError
		if !errors.Is(err, ErrNotAcknowledged) || !errors.As(err, &broken) || !errors.Is(err, wire.ErrDisconnected) {
			t.Fatalf("batch %d in flight at the drop: %v", i+1, err)
		}
	}
	if err := p.Flush(ctx); !errors.Is(err, wire.ErrDisconnected) {
		t.Fatalf("flush: %v", err)
	}
}

func TestPipelinedProducerReplyDeadline(t *testing.T) {
	ss := newScriptedServer(t)
	p := dialPipelined(t, ss.fakeServer, PipelineOptions{InFlightMax: 2, AckTimeout: 50 * time.Millisecond})
	pendings := sendAll(t, p, 1)
	ss.next(t)
	ss.answer(t, nil, false) // held for good

	done, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := pendings[0].Wait(done); err != context.Canceled {
		t.Fatalf("wait under a done context: %v", err)
	}
	// The Pending is still good; the batch's own deadline ends the wait.
	_, err := pendings[0].Wait(testContext(t))
	if !errors.Is(err, ErrNotAcknowledged) || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("batch past its deadline: %v", err)
	}
}

func TestPipelinedProducerEviction(t *testing.T) {
	ss := newScriptedServer(t)
	p := dialPipelined(t, ss.fakeServer, PipelineOptions{})
	ctx := testContext(t)
	pendings := sendAll(t, p, 2)
	reqs := ss.arriveHeld(t, 2)
	ss.answer(t, append(confirm(reqs[0], 1), eviction(&reqs[1], wire.EvictionStaleClient, 0, 0)...), false)
	if _, err := pendings[0].Wait(ctx); err != nil {
		t.Fatal(err)
	}
	_, err := pendings[1].Wait(ctx)
	var ev *EvictionError
	if !errors.Is(err, ErrNotAcknowledged) || !errors.As(err, &ev) || ev.Reason != wire.EvictionStaleClient {
		t.Fatalf("batch in flight at the eviction: %v", err)
	}
}

func TestPipelinedProducerReplyToNoBatch(t *testing.T) {
	ss := newScriptedServer(t)
	p := dialPipelined(t, ss.fakeServer, PipelineOptions{})
	pendings := sendAll(t, p, 1)
	h := ss.next(t)
	h.Request += 1000
	ss.answer(t, confirm(h, 1), false)
	_, err := pendings[0].Wait(testContext(t))
	var broken *ConnectionError
	if !errors.Is(err, ErrNotAcknowledged) || !errors.As(err, &broken) || broken.Op != "reply" {
		t.Fatalf("reply echoing a request not in flight: %v", err)
	}
}

func TestPipelinedProducerClose(t *testing.T) {
	ss := newScriptedServer(t)
	p := dialPipelined(t, ss.fakeServer, PipelineOptions{})
	pendings := sendAll(t, p, 1)
	ss.next(t)
	ss.answer(t, nil, false)
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := pendings[0].Wait(testContext(t)); !errors.Is(err, ErrNotAcknowledged) || !errors.Is(err, wire.ErrNotConnected) {
		t.Fatalf("batch in flight at Close: %v", err)
	}
	if _, err := p.Send(testContext(t), smallBatch); !errors.Is(err, wire.ErrNotConnected) {
		t.Fatalf("send after Close: %v", err)
	}
}

// confirmingServer confirms every send at once with its request number as the base
// offset, without allocating (the reply is rebuilt in one buffer).
func confirmingServer(t testing.TB) *fakeServer {
	var out []byte
	s := newFakeServer(t, session(func(req *wire.RequestHeader, body []byte) ([]byte, bool) {
		h := wire.ReplyTo(req, 0, 4+wire.SendConfirmationSize, true)
		out = append(out[:0], h.Bytes()[:]...)
		out = wire.AppendSendConfirmations(out, wire.SendConfirmation{BaseOffset: req.Request})
		return out, false
	}))
	s.record = false
	return s
}

func TestPipelinedProducerLocalRefusalsKeepItWorking(t *testing.T) {
	p := dialPipelined(t, confirmingServer(t), PipelineOptions{InFlightMax: 1})
	ctx := testContext(t)
	if _, err := p.Send(ctx, nil); err != wire.ErrInvalidMessagesCount {
		t.Fatalf("empty batch: %v", err)
	}
	if _, err := p.Send(ctx, []Message{{}}); err != wire.ErrInvalidMessagePayloadLength {
		t.Fatalf("empty payload: %v", err)
	}
	pd, err := p.Send(ctx, smallBatch)
	if err != nil {
		t.Fatal(err)
	}
	if conf, err := pd.Wait(ctx); err != nil || conf.BaseOffset != pd.Request() {
		t.Fatalf("%+v %v", conf, err)
	}
}

func TestPipelinedProducerConcurrentSenders(t *testing.T) {
	p := dialPipelined(t, confirmingServer(t), PipelineOptions{InFlightMax: 3})
	ctx := testContext(t)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			msgs := []Message{{Payload: []byte("x")}, {Payload: []byte("y")}} // zero ids: drawn per slot
			for range 30 {
				pd, err := p.Send(ctx, msgs)
				if err != nil {
					t.Error(err)
					return
				}
				if conf, err := pd.Wait(ctx); err != nil || conf.BaseOffset != pd.Request() {
					t.Errorf("request %d: %+v %v", pd.Request(), conf, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestPipelinedProducerBalanced(t *testing.T) {
	partitions, getTopics := uint32(3), 0
	var sent []uint32
	s := newFakeServer(t, topicServer(t, &partitions, &getTopics, &sent))
	p, err := DialPipelinedProducer(testContext(t), s.addr(), ID(1), ID(1), wire.Partitioning{Kind: wire.PartitioningBalanced},
		PipelineOptions{InFlightMax: 2}, WithCredentials("iggy", "iggy"))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx := testContext(t)
	for range 6 {
		pd, err := p.Send(ctx, smallBatch)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := pd.Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	want := []uint32{0, 1, 2, 0, 1, 2}
	if getTopics != 1 || len(sent) != len(want) {
		t.Fatalf("GetTopic %d times, partitions %v", getTopics, sent)
	}
	for i := range want {
		if sent[i] != want[i] {
			t.Fatalf("partitions %v, want %v", sent, want)
		}
	}
}

func TestPipelinedProducerNeedsALogin(t *testing.T) {
	s := confirmingServer(t)
	_, err := DialPipelinedProducer(testContext(t), s.addr(), ID(1), ID(1),
		wire.Partitioning{Kind: wire.PartitioningPartitionID}, PipelineOptions{})
	if err != wire.ErrUnauthenticated {
		t.Fatalf("no credentials: %v", err)
	}
	_, err = DialPipelinedProducer(testContext(t), s.addr(), ID(1), ID(1),
		wire.Partitioning{Kind: wire.PartitioningPartitionID}, PipelineOptions{InFlightMax: InFlightLimit + 1}, WithCredentials("iggy", "iggy"))
	if err != wire.ErrInvalidConfiguration {
		t.Fatalf("window beyond the limit: %v", err)
	}
}

// A warm producer whose caller waits on every batch allocates nothing per batch: the
// slots' buffers, the Pending records and the reader's buffer are all reused.
func TestPipelinedProducerSendAllocatesNothing(t *testing.T) {
	p := dialPipelined(t, confirmingServer(t), PipelineOptions{InFlightMax: 2})
	msgs := benchMessagesOf(100, 100)
	ctx := context.Background()
	roundTrip := func() {
		pd, err := p.Send(ctx, msgs)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := pd.Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for range 10 {
		roundTrip()
	}
	if n := testing.AllocsPerRun(50, roundTrip); n != 0 {
		t.Fatalf("Send and Wait allocate %v times per batch", n)
	}
}

// BenchmarkPipelinedSend sends 1000 x 1000 B batches through a PipelinedProducer to
// a fake server that confirms at once, beside the one-in-flight Client.SendMessages
// measured in the same run. The fake server touches no disk: this measures the
// client's own cost and the loopback round trips that pipelining hides.
func BenchmarkPipelinedSend(b *testing.B) {
	msgs := benchMessagesOf(benchMessages, benchPayloadBytes)
	partitioning := wire.Partitioning{Kind: wire.PartitioningPartitionID}
	b.Run("baseline-client-one-in-flight", func(b *testing.B) {
		c := loggedIn(b, confirmingServer(b))
		ctx := context.Background()
		b.SetBytes(benchMessages * benchPayloadBytes)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := c.SendMessages(ctx, ID(0), ID(0), partitioning, msgs); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, inFlight := range []int{1, 2, 4, 8} {
		b.Run(fmt.Sprintf("in-flight=%d", inFlight), func(b *testing.B) {
			s := confirmingServer(b)
			p, err := DialPipelinedProducer(context.Background(), s.addr(), ID(0), ID(0), partitioning,
				PipelineOptions{InFlightMax: inFlight}, WithCredentials("iggy", "iggy"))
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close()
			ctx := context.Background()
			// Wait on each batch inFlight sends later, so the window stays full and
			// every Pending record is reused.
			window := make([]Pending, inFlight)
			b.SetBytes(benchMessages * benchPayloadBytes)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if pd := window[i%inFlight]; pd.b != nil {
					if _, err := pd.Wait(ctx); err != nil {
						b.Fatal(err)
					}
				}
				pd, err := p.Send(ctx, msgs)
				if err != nil {
					b.Fatal(err)
				}
				window[i%inFlight] = pd
				i++
			}
			if err := p.Flush(ctx); err != nil {
				b.Fatal(err)
			}
		})
	}
}

// FuzzPipelinedReply answers a pipelined producer's first batch with arbitrary bytes
// and then drops the connection: whatever the bytes, the batch gets an outcome (a
// confirmation only from a well-formed reply to its request), and nothing panics or
// hangs.
func FuzzPipelinedReply(f *testing.F) {
	// The producer's first batch goes as request 1: the login and GetClusterMetadata
	// do not advance the counter.
	req := wire.RequestHeader{Request: 1, Operation: wire.OperationSendMessages, Client: wire.Uint128{Lo: 9}}
	f.Add(confirm(req, 5))
	f.Add(append(confirm(req, 5), confirm(req, 6)...))
	f.Add(denial(&req, wire.ErrPartitionNotFound))
	f.Add(eviction(&req, wire.EvictionStaleClient, 0, 0))
	f.Add(rejection(&req, wire.ErrTopicIdNotFound))
	f.Add(reply(&req, nil))
	f.Add(confirm(req, 5)[:200])
	other := req
	other.Request = 2
	f.Add(confirm(other, 5))
	var mu sync.Mutex
	var answer []byte
	s := newFakeServer(f, session(func(req *wire.RequestHeader, body []byte) ([]byte, bool) {
		mu.Lock()
		defer mu.Unlock()
		return answer, true
	}))
	s.record = false
	f.Fuzz(func(t *testing.T, data []byte) {
		mu.Lock()
		answer = data
		mu.Unlock()
		ctx := testContext(t)
		p, err := DialPipelinedProducer(ctx, s.addr(), ID(1), ID(1), wire.Partitioning{Kind: wire.PartitioningPartitionID},
			PipelineOptions{InFlightMax: 2, AckTimeout: testTimeout}, WithCredentials("iggy", "iggy"))
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		pd, err := p.Send(ctx, smallBatch)
		if err != nil {
			if !errors.Is(err, ErrNotAcknowledged) {
				t.Fatalf("send: %v", err)
			}
			return
		}
		_, err = pd.Wait(ctx)
		var code wire.ErrorCode
		if err != nil && !errors.Is(err, ErrNotAcknowledged) && !errors.As(err, &code) {
			t.Fatalf("outcome neither a confirmation, a code nor not-acknowledged: %v", err)
		}
		if err := p.Flush(ctx); err == nil && p.InFlight() != 0 {
			t.Fatalf("flushed with %d in flight", p.InFlight())
		}
	})
}

// serviceTimeServer is a fake server that serves requests one after another, each
// taking serviceTime (a stand-in for the server's write of the batch), while it
// keeps reading the requests behind: what pipelining can hide is the client's
// encoding and the transfer, which happen while the server is busy.
func serviceTimeServer(b *testing.B, serviceTime time.Duration) string {
	ln := listenLoopback(b)
	var wg sync.WaitGroup
	b.Cleanup(func() { ln.Close(); wg.Wait() })
	answer := session(func(req *wire.RequestHeader, body []byte) ([]byte, bool) {
		return reply(req, wire.AppendSendConfirmations(nil, wire.SendConfirmation{BaseOffset: req.Request})), false
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			type due struct {
				reply []byte
				at    time.Time
			}
			replies := make(chan due, InFlightLimit)
			wg.Add(2)
			go func() {
				defer wg.Done()
				for r := range replies {
					time.Sleep(time.Until(r.at))
					if _, err := conn.Write(r.reply); err != nil {
						return
					}
				}
			}()
			go func() {
				defer wg.Done()
				defer close(replies)
				defer conn.Close()
				buf := alignedBuffer(2 << 20)
				var busyUntil time.Time
				for {
					if _, err := io.ReadFull(conn, buf[:wire.HeaderSize]); err != nil {
						return
					}
					h, err := wire.DecodeRequestHeader(buf[:wire.HeaderSize], wire.DefaultMessageSizeMax)
					if err != nil || int(h.Size) > len(buf) {
						return
					}
					if _, err := io.ReadFull(conn, buf[wire.HeaderSize:h.Size]); err != nil {
						return
					}
					out, _ := answer(h, buf[wire.HeaderSize:h.Size])
					at := time.Now()
					if h.Operation == wire.OperationSendMessages {
						if busyUntil.Before(at) {
							busyUntil = at
						}
						busyUntil = busyUntil.Add(serviceTime)
						at = busyUntil
					}
					replies <- due{reply: out, at: at}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// BenchmarkPipelinedSendServiceTime is BenchmarkPipelinedSend against a server that
// spends 500 µs on each batch: the one-in-flight client pays that time plus its own
// per batch, the pipelined producer overlaps them.
func BenchmarkPipelinedSendServiceTime(b *testing.B) {
	const serviceTime = 500 * time.Microsecond
	msgs := benchMessagesOf(benchMessages, benchPayloadBytes)
	partitioning := wire.Partitioning{Kind: wire.PartitioningPartitionID}
	b.Run("baseline-client-one-in-flight", func(b *testing.B) {
		c, err := Dial(context.Background(), serviceTimeServer(b, serviceTime), WithCredentials("iggy", "iggy"))
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		ctx := context.Background()
		b.SetBytes(benchMessages * benchPayloadBytes)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := c.SendMessages(ctx, ID(0), ID(0), partitioning, msgs); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, inFlight := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("in-flight=%d", inFlight), func(b *testing.B) {
			p, err := DialPipelinedProducer(context.Background(), serviceTimeServer(b, serviceTime), ID(0), ID(0), partitioning,
				PipelineOptions{InFlightMax: inFlight}, WithCredentials("iggy", "iggy"))
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close()
			ctx := context.Background()
			window := make([]Pending, inFlight)
			b.SetBytes(benchMessages * benchPayloadBytes)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if pd := window[i%inFlight]; pd.b != nil {
					if _, err := pd.Wait(ctx); err != nil {
						b.Fatal(err)
					}
				}
				pd, err := p.Send(ctx, msgs)
				if err != nil {
					b.Fatal(err)
				}
				window[i%inFlight] = pd
				i++
			}
			if err := p.Flush(ctx); err != nil {
				b.Fatal(err)
			}
		})
	}
}
