package client

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/iggy-shard/iggy-shard/wire"
)

// A PipelinedProducer keeps several SendMessages batches in flight on a connection of
// its own, so that encoding the next batch, moving it over the network and the
// server's write of the previous ones overlap instead of taking turns:
//
//	Send ─► take a slot ─► encode into a buffer ─► write ─► connection ─► server
//	  ▲     (InFlightMax; busy from          (back to the pool                 │
//	  │      the write to the reply)          once written)                    │
//	  └──────────── slot freed ◄── reply matched ◄── reader goroutine ◄────────┘
//
// A slot is the right to have one batch in flight. Buffers are separate: a batch's
// bytes are the kernel's once its write returns, so a buffer goes back to a
// last-in first-out pool then, and a single sending goroutine encodes every batch
// into the same, cache-warm buffer whatever the window (a buffer per slot measured
// slower as the window grew: each batch landed in a cold megabyte). Concurrent
// Sends take one buffer each, so there are at most InFlightMax of them.
//
// Replies are matched by the request number they echo. The server answers a
// connection's requests in the order they arrived, whichever shard served each
// (iggy-shard's shard/replyorder.go; Kafka promises the same), so matching by
// position would do as well; the producer keeps a request number of its own per
// batch anyway (the connection's counter, advanced per batch): it costs nothing,
// it works against servers that answer out of order, and a reply echoing a number
// that is not in flight fails the producer instead of acknowledging the wrong
// batch. The protocol allows it: partition
// operations are not tracked by the server's client table, and the counter is a
// watermark, not a sequence (iggy.apache.org/docs/binary-protocol/framing, request
// numbering). The official SDKs, with one request in flight, send the counter
// unadvanced instead.
//
// Delivery is at least once. A batch answered with an error code fails with that code;
// then, and after an eviction, a broken connection, a missed reply deadline or Close,
// the producer fails as a whole: it closes its connection, every batch still in
// flight fails with a *NotAcknowledgedError (its outcome is unknown: resend it), and
// so does every later Send. Dial a new producer to go on. A failure is never silent:
// each batch's Pending reports its own outcome, and Flush reports the failure.
type PipelinedProducer struct {
	c               *Client
	stream          wire.Identifier
	topic           wire.Identifier
	partitioning    wire.Partitioning
	partitionsCount uint32
	ackTimeout      time.Duration

	slots []pipelineSlot
	// free holds the indices of the slots not in flight; taking one is the right to
	// send a batch, so Send blocks while InFlightMax batches await their replies.
	free chan int
	// rngs seeds each new buffer's id source.
	rng *rand.ChaCha8
	// cursor is the Balanced partitioning's round-robin position.
	cursor atomic.Uint32

	// writeMu orders the writes, so request numbers rise in wire order.
	writeMu     sync.Mutex
	nextRequest uint64 // guarded by writeMu
	// watchMu and watchGen let a cancelled Send's callback tell whether the write it
	// watched is still the one in progress.
	watchMu  sync.Mutex
	watchGen uint64

	// flushMu makes Flushes take turns: two of them each holding some of the slots
	// would wait for each other.
	flushMu    sync.Mutex
	flushSlots []int

	// mu guards the slots' flight state, the failure, the read deadline, the
	// buffer pool and the free Pending records.
	mu sync.Mutex
	// failure is set once, by the first failure; every later Send returns it.
	failure *NotAcknowledgedError
	// readDeadline is the socket's read deadline: the earliest deadline of the
	// batches in flight, zero when none is.
	readDeadline time.Time
	pendingFree  []*pendingBatch
	buffersFree  []*sendBuffer

	readerDone chan struct{}
	closed     atomic.Bool
}

// pipelineSlot is, while its batch is in flight, the batch's request number, reply
// deadline and the record its outcome goes to. Guarded by PipelinedProducer.mu.
type pipelineSlot struct {
	inFlight bool
	request  uint64
	deadline time.Time
	pending  *pendingBatch
}

// sendBuffer is where one Send encodes its frame.
type sendBuffer struct {
	frame []byte
	batch wire.BatchBuilder
	// rng draws the ids of messages sent with a zero id; one per buffer, because
	// concurrent Sends encode at once.
	rng *rand.ChaCha8
}

// pendingBatch receives one batch's outcome. It is reused once Wait has taken that
// outcome; gen tells a spent Pending from the record's next use.
type pendingBatch struct {
	// done carries one token per outcome.
	done         chan struct{}
	gen          uint64 // guarded by PipelinedProducer.mu
	confirmation wire.SendConfirmation
	err          error
}

// PipelineOptions configure a PipelinedProducer.
type PipelineOptions struct {
	// InFlightMax is the most batches written and not yet answered; Send blocks
	// while that many are. Zero means DefaultInFlightMax; at most InFlightLimit.
	InFlightMax int
	// AckTimeout bounds the wait for each batch's reply, from its write (a Send's
	// context deadline, when earlier, bounds it too). Missing it fails the producer.
	// Zero means DefaultRequestTimeout.
	AckTimeout time.Duration
}

const (
	// DefaultInFlightMax keeps four batches in flight.
	DefaultInFlightMax = 4
	// InFlightLimit bounds InFlightMax: a reply is matched by a scan of the slots,
	// and concurrent Sends hold a request buffer as large as their batch each.
	InFlightLimit = 256
)

// ErrNotAcknowledged matches every *NotAcknowledgedError.
var ErrNotAcknowledged = errors.New("client: batch not acknowledged")

// NotAcknowledgedError is the outcome of a batch that the producer wrote, or was
// asked to write, before it failed: the batch may or may not be stored, and the
// caller may send it again (at least once). errors.Is matches ErrNotAcknowledged and
// the failure's cause: a *ConnectionError, an *EvictionError, wire.ErrNotConnected
// after Close, or a *BatchRejectedError naming the batch whose refusal failed the
// producer.
type NotAcknowledgedError struct {
	Cause error
}

func (e *NotAcknowledgedError) Error() string {
	return "client: batch not acknowledged, the pipelined producer failed: " + e.Cause.Error()
}

// Is matches ErrNotAcknowledged.
func (e *NotAcknowledgedError) Is(target error) bool { return target == ErrNotAcknowledged }

// Unwrap exposes the cause.
func (e *NotAcknowledgedError) Unwrap() error { return e.Cause }

// BatchRejectedError is the cause of a pipelined producer's failure when the server
// refused a batch: the batch with that request number failed with Code, and the
// batches behind it were not acknowledged.
type BatchRejectedError struct {
	Request uint64
	Code    wire.ErrorCode
}

func (e *BatchRejectedError) Error() string {
	return "the batch of request " + strconv.FormatUint(e.Request, 10) + " was refused: " + e.Code.Error()
}

// Unwrap exposes the code.
func (e *BatchRejectedError) Unwrap() error { return e.Code }

// ErrPendingSpent is what Wait returns for a Pending whose outcome an earlier Wait
// already returned.
var ErrPendingSpent = errors.New("client: the outcome of this Pending was already taken")

// DialPipelinedProducer connects to addr with opts (which must log in:
// WithCredentials or WithPersonalAccessToken), and returns a producer for a topic
// over that connection, which it owns. The partitioning is resolved on the client
// like Producer's; for Balanced and MessagesKey the topic's partition count is read
// once, here, and kept for the producer's life. WithHeartbeat is ignored: the
// connection carries only batches.
func DialPipelinedProducer(ctx context.Context, addr string, stream, topic wire.Identifier, partitioning wire.Partitioning,
	popts PipelineOptions, opts ...Option) (*PipelinedProducer, error) {
	inFlightMax := popts.InFlightMax
	if inFlightMax == 0 {
		inFlightMax = DefaultInFlightMax
	}
	ackTimeout := popts.AckTimeout
	if ackTimeout == 0 {
		ackTimeout = DefaultRequestTimeout
	}
	if inFlightMax < 0 || inFlightMax > InFlightLimit || ackTimeout < 0 {
		return nil, wire.ErrInvalidConfiguration
	}
	switch partitioning.Kind {
	case wire.PartitioningPartitionID, wire.PartitioningBalanced:
	case wire.PartitioningMessagesKey:
		if len(partitioning.Key) == 0 || len(partitioning.Key) > 255 {
			return nil, wire.ErrInvalidKeyValueLength
		}
	default:
		return nil, wire.ErrInvalidCommand
	}
	// A heartbeat's ping would be a second writer and its reply a stranger to the
	// reader.
	c, err := Dial(ctx, addr, append(opts[:len(opts):len(opts)], WithHeartbeat(0))...)
	if err != nil {
		return nil, err
	}
	p, err := newPipelinedProducer(ctx, c, stream, topic, partitioning, inFlightMax, ackTimeout)
	if err != nil {
		c.Close()
		return nil, err
	}
	return p, nil
}

func newPipelinedProducer(ctx context.Context, c *Client, stream, topic wire.Identifier, partitioning wire.Partitioning,
	inFlightMax int, ackTimeout time.Duration) (*PipelinedProducer, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.session == 0 {
		return nil, wire.ErrUnauthenticated
	}
	p := &PipelinedProducer{
		c:            c,
		stream:       stream,
		topic:        topic,
		partitioning: partitioning,
		ackTimeout:   ackTimeout,
		slots:        make([]pipelineSlot, inFlightMax),
		free:         make(chan int, inFlightMax),
		flushSlots:   make([]int, 0, inFlightMax),
		nextRequest:  c.requestNumber,
		readerDone:   make(chan struct{}),
	}
	p.partitioning.Key = append([]byte(nil), partitioning.Key...)
	if partitioning.Kind != wire.PartitioningPartitionID {
		shadow := Producer{c: c, stream: stream, topic: topic}
		count, err := shadow.count(ctx)
		if err != nil {
			return nil, err
		}
		p.partitionsCount = count
		if partitioning.Kind == wire.PartitioningMessagesKey {
			p.partitioning = wire.Partitioning{Kind: wire.PartitioningPartitionID,
				PartitionID: wire.PartitionForKey(partitioning.Key, count)}
		}
	}
	p.rng = c.rng
	for i := range p.slots {
		p.free <- i
	}
	// The setup's deadlines are over; from here on the reader and the writes set
	// their own.
	_ = c.conn.SetDeadline(time.Time{})
	go p.readLoop()
	return p, nil
}

// Pending is a sent batch's outcome to come. It is a small value; copy it freely,
// but take its outcome once.
type Pending struct {
	p       *PipelinedProducer
	b       *pendingBatch
	gen     uint64
	request uint64
}

// Request is the request number the batch went with (rising in send order).
func (pd Pending) Request() uint64 { return pd.request }

// Wait returns the batch's confirmation or its failure: a wire.ErrorCode when the
// server refused it, a *NotAcknowledgedError when the producer failed before the
// batch's reply. Waiting ends by the batch's reply deadline at the latest; a done
// ctx ends it earlier with ctx's error, and the Pending can be waited on again. Once
// Wait has returned an outcome, the Pending is spent (later Waits return
// ErrPendingSpent) and its record is reused, so a producer whose callers wait on
// every Pending sends without allocating.
func (pd Pending) Wait(ctx context.Context) (wire.SendConfirmation, error) {
	if pd.b == nil {
		return wire.SendConfirmation{}, ErrPendingSpent
	}
	p := pd.p
	p.mu.Lock()
	spent := pd.b.gen != pd.gen
	p.mu.Unlock()
	if spent {
		return wire.SendConfirmation{}, ErrPendingSpent
	}
	select {
	case <-pd.b.done:
	case <-ctx.Done():
		return wire.SendConfirmation{}, ctx.Err()
	}
	p.mu.Lock()
	if pd.b.gen != pd.gen {
		// A concurrent Wait on a copy took this outcome and the record went on to
		// another batch, whose token this is: hand it back.
		p.mu.Unlock()
		pd.b.done <- struct{}{}
		return wire.SendConfirmation{}, ErrPendingSpent
	}
	confirmation, err := pd.b.confirmation, pd.b.err
	pd.b.gen++
	pd.b.err = nil
	p.pendingFree = append(p.pendingFree, pd.b)
	p.mu.Unlock()
	return confirmation, err
}

// Send takes a slot, builds messages into a pooled buffer and writes them as one
// batch, returning once the batch is on the socket, with the Pending of its reply.
// While InFlightMax batches await replies it blocks until one is answered or ctx is
// done.
// It is safe for concurrent use: concurrent Sends encode in parallel and write one
// at a time. The messages are not kept.
//
// Errors: a wire.ErrorCode for messages that cannot be sent (empty batch, empty
// payload, too large) with the producer unharmed; ctx's error when it ended the wait
// for a slot, also unharmed; a *NotAcknowledgedError when the producer has failed
// (or fails during this write): the batch was not written whole, send it again on a
// new producer.
func (p *PipelinedProducer) Send(ctx context.Context, messages []Message) (Pending, error) {
	if len(messages) == 0 || uint64(len(messages)) > uint64(^uint32(0)) {
		return Pending{}, wire.ErrInvalidMessagesCount
	}
	if err := p.failed(); err != nil {
		return Pending{}, err
	}
	if err := ctx.Err(); err != nil {
		return Pending{}, err
	}
	var index int
	select {
	case index = <-p.free:
	case <-ctx.Done():
		return Pending{}, ctx.Err()
	}
	buf := p.takeBuffer()
	frame, err := appendSendMessages(buf.frame[:wire.HeaderSize], &buf.batch, buf.rng, p.stream, p.topic, p.pick(), messages)
	if cap(frame) > cap(buf.frame) {
		buf.frame = frame[:wire.HeaderSize]
	}
	if err == nil && len(frame) > FrameSizeMax {
		err = wire.ErrInvalidConfiguration
	}
	if err != nil {
		p.mu.Lock()
		p.buffersFree = append(p.buffersFree, buf)
		p.mu.Unlock()
		p.free <- index
		return Pending{}, err
	}
	return p.write(ctx, index, buf, frame)
}

// takeBuffer pops the most recently used buffer, or makes one: at most one per
// concurrent Send.
func (p *PipelinedProducer) takeBuffer() *sendBuffer {
	p.mu.Lock()
	defer p.mu.Unlock()
	if n := len(p.buffersFree); n > 0 {
		buf := p.buffersFree[n-1]
		p.buffersFree = p.buffersFree[:n-1]
		return buf
	}
	var seed [32]byte
	for j := 0; j < len(seed); j += 8 {
		u := p.rng.Uint64()
		for k := range 8 {
			seed[j+k] = byte(u >> (8 * k))
		}
	}
	return &sendBuffer{frame: make([]byte, wire.HeaderSize, 64<<10), rng: rand.NewChaCha8(seed)}
}

// pick is the partitioning of the next batch: the topic's partition by round robin
// for Balanced, else the one fixed at Dial.
func (p *PipelinedProducer) pick() wire.Partitioning {
	if p.partitioning.Kind != wire.PartitioningBalanced {
		return p.partitioning
	}
	cursor := p.cursor.Add(1) - 1
	return wire.Partitioning{Kind: wire.PartitioningPartitionID, PartitionID: cursor % p.partitionsCount}
}

// write stamps frame, puts slot index in flight and writes the frame; buf, which
// holds it, goes back to the pool once written.
func (p *PipelinedProducer) write(ctx context.Context, index int, buf *sendBuffer, frame []byte) (Pending, error) {
	p.writeMu.Lock()
	defer p.writeMu.Unlock()
	deadline := time.Now().Add(p.ackTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	c := p.c
	h := wire.RequestHeader{
		Client:    c.clientID,
		Request:   p.nextRequest,
		Operation: wire.OperationSendMessages,
		Session:   c.session,
	}
	h.Size = uint32(len(frame))
	h.Command = wire.CommandRequest
	h.Put(frame)

	p.mu.Lock()
	if p.failure != nil {
		p.free <- index
		p.buffersFree = append(p.buffersFree, buf)
		err := p.failure
		p.mu.Unlock()
		return Pending{}, err
	}
	p.nextRequest++
	b := p.takePendingLocked()
	s := &p.slots[index]
	s.inFlight, s.request, s.deadline, s.pending = true, h.Request, deadline, b
	if p.readDeadline.IsZero() || deadline.Before(p.readDeadline) {
		p.readDeadline = deadline
		_ = c.conn.SetReadDeadline(deadline)
	}
	pending := Pending{p: p, b: b, gen: b.gen, request: h.Request}
	p.mu.Unlock()

	// The slot is in flight before its bytes leave, so its reply always finds it.
	_ = c.conn.SetWriteDeadline(deadline)
	watching := p.watch(ctx)
	_, err := c.conn.Write(frame)
	if watching {
		p.unwatch()
	}
	p.mu.Lock()
	p.buffersFree = append(p.buffersFree, buf)
	p.mu.Unlock()
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			err = errors.Join(ctxErr, err)
		}
		return Pending{}, p.fail(&ConnectionError{Op: "write", Code: wire.ErrDisconnected, Err: err})
	}
	return pending, nil
}

// watch wakes the write when ctx is cancelled (a deadline is already the socket's).
func (p *PipelinedProducer) watch(ctx context.Context) bool {
	if ctx.Done() == nil {
		return false
	}
	p.watchMu.Lock()
	gen := p.watchGen
	p.watchMu.Unlock()
	context.AfterFunc(ctx, func() {
		p.watchMu.Lock()
		defer p.watchMu.Unlock()
		if p.watchGen == gen {
			_ = p.c.conn.SetWriteDeadline(aLongTimeAgo)
		}
	})
	return true
}

func (p *PipelinedProducer) unwatch() {
	p.watchMu.Lock()
	p.watchGen++
	p.watchMu.Unlock()
}

func (p *PipelinedProducer) takePendingLocked() *pendingBatch {
	if n := len(p.pendingFree); n > 0 {
		b := p.pendingFree[n-1]
		p.pendingFree = p.pendingFree[:n-1]
		return b
	}
	return &pendingBatch{done: make(chan struct{}, 1)}
}

// failed is the producer's failure, nil while it works.
func (p *PipelinedProducer) failed() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.failure == nil {
		return nil
	}
	return p.failure
}

// fail fails the producer with cause (the first cause wins) and returns the failure.
func (p *PipelinedProducer) fail(cause error) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.failLocked(cause)
}

func (p *PipelinedProducer) failLocked(cause error) error {
	if p.failure == nil {
		if p.closed.Load() {
			// A read or write that broke because Close closed the connection.
			cause = wire.ErrNotConnected
		}
		p.failure = &NotAcknowledgedError{Cause: cause}
		_ = p.c.conn.Close()
	}
	for i := range p.slots {
		if p.slots[i].inFlight {
			p.resolveLocked(i, wire.SendConfirmation{}, p.failure)
		}
	}
	p.readDeadline = time.Time{}
	return p.failure
}

// resolveLocked gives slot i's batch its outcome and frees the slot.
func (p *PipelinedProducer) resolveLocked(i int, confirmation wire.SendConfirmation, err error) {
	s := &p.slots[i]
	b := s.pending
	b.confirmation, b.err = confirmation, err
	s.inFlight, s.pending = false, nil
	b.done <- struct{}{}
	p.free <- i
}

// readLoop reads replies until the producer fails; Close fails it.
func (p *PipelinedProducer) readLoop() {
	defer close(p.readerDone)
	buf := alignedBuffer(4 << 10)
	for {
		var err error
		if buf, err = p.readReply(buf); err != nil {
			p.fail(err)
			return
		}
	}
}

// readReply reads one frame and settles the batch it answers. An error it returns
// is the producer's failure.
func (p *PipelinedProducer) readReply(buf []byte) ([]byte, error) {
	conn := p.c.conn
	head := buf[:wire.HeaderSize]
	if _, err := io.ReadFull(conn, head); err != nil {
		return buf, &ConnectionError{Op: "read", Code: wire.ErrDisconnected, Err: err}
	}
	if command, _ := wire.PeekCommand(head); command == wire.CommandEviction {
		h, err := wire.DecodeEvictionHeader(head)
		if err != nil {
			return buf, protocolError(err)
		}
		return buf, newEvictionError(h)
	}
	h, err := wire.DecodeReplyHeader(head, FrameSizeMax)
	if err != nil {
		return buf, protocolError(err)
	}
	status, op, echoed := h.Status, h.Operation, h.Request
	buf, body, err := readBody(conn, buf, h.BodySizeBytes())
	if err != nil {
		return buf, &ConnectionError{Op: "read", Code: wire.ErrDisconnected, Err: err}
	}
	var confirmations wire.SendConfirmations
	payload, refusal := replyPayload(status, op, body)
	if refusal == nil {
		if err := confirmations.Decode(payload); err != nil || confirmations.Len() == 0 {
			return buf, protocolError(errors.Join(wire.ErrInvalidCommand, err))
		}
	}

	p.mu.Lock()
	defer p.mu.Unlock()
	index := -1
	for i := range p.slots {
		if p.slots[i].inFlight && p.slots[i].request == echoed {
			index = i
			break
		}
	}
	if index < 0 {
		return buf, &ConnectionError{Op: "reply", Code: wire.ErrDisconnected, Err: strangerReply(echoed)}
	}
	if refusal != nil {
		code, ok := refusal.(wire.ErrorCode)
		if !ok {
			// A result section that does not decode.
			return buf, protocolError(refusal)
		}
		p.resolveLocked(index, wire.SendConfirmation{}, code)
		return buf, &BatchRejectedError{Request: echoed, Code: code}
	}
	p.resolveLocked(index, confirmations.At(0), nil)
	p.rearmLocked()
	return buf, nil
}

// rearmLocked sets the read deadline to the earliest of the batches in flight.
func (p *PipelinedProducer) rearmLocked() {
	var earliest time.Time
	for i := range p.slots {
		s := &p.slots[i]
		if s.inFlight && (earliest.IsZero() || s.deadline.Before(earliest)) {
			earliest = s.deadline
		}
	}
	if !earliest.Equal(p.readDeadline) {
		p.readDeadline = earliest
		_ = p.c.conn.SetReadDeadline(earliest)
	}
}

// protocolError is the failure for a frame that breaks the protocol.
func protocolError(err error) *ConnectionError {
	code := wire.ErrInvalidCommand
	var fault wire.HeaderFault
	if errors.As(err, &fault) && fault.Status() != 0 {
		code = fault.Status()
	}
	return &ConnectionError{Op: "reply", Code: code, Err: err}
}

// strangerReply is the cause of a failure on a reply to no batch in flight.
type strangerReply uint64

func (r strangerReply) Error() string {
	return "reply echoes request " + strconv.FormatUint(uint64(r), 10) + ", which is not in flight"
}

// Flush waits until no batch is in flight, then returns the producer's failure (nil
// while it works). ctx bounds the wait; each batch's reply deadline bounds it too.
func (p *PipelinedProducer) Flush(ctx context.Context) error {
	p.flushMu.Lock()
	defer p.flushMu.Unlock()
	defer func() {
		for _, i := range p.flushSlots {
			p.free <- i
		}
		p.flushSlots = p.flushSlots[:0]
	}()
	for len(p.flushSlots) < len(p.slots) {
		select {
		case i := <-p.free:
			p.flushSlots = append(p.flushSlots, i)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return p.failed()
}

// Addr is the address of the node the producer sends to: the leader its login was
// redirected to, in a cluster.
func (p *PipelinedProducer) Addr() string { return p.c.Addr() }

// InFlight is the number of batches written and not yet answered.
func (p *PipelinedProducer) InFlight() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for i := range p.slots {
		if p.slots[i].inFlight {
			n++
		}
	}
	return n
}

// Close closes the connection at once: batches in flight fail with a
// *NotAcknowledgedError whose cause is wire.ErrNotConnected (Flush first to wait for
// them). It waits for the reader goroutine to end.
func (p *PipelinedProducer) Close() error {
	if p.closed.Swap(true) {
		return nil
	}
	// The reader or a write that breaks on the closed connection fails the producer
	// with wire.ErrNotConnected too, as closed is set.
	err := p.c.Close()
	p.fail(wire.ErrNotConnected)
	<-p.readerDone
	return err
}
