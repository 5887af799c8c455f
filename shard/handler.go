package shard

import (
	"strconv"

	"github.com/iggy-shard/iggy-shard/arena"
	"github.com/iggy-shard/iggy-shard/wire"
)

// Handler serves the requests of one shard. The runtime creates one Handler per shard
// (Config.NewHandler) and calls it only from that shard's goroutine, so a Handler needs
// no locks for its own state; anything it shares with other shards goes through
// Shard.Post.
//
// The runtime knows nothing about streams, users or partitions: it frames, validates the
// header (wire.DecodeRequestHeader), answers header faults itself (a status reply or an
// eviction, as the fault says), and hands every valid request to ServeRequest.
type Handler interface {
	// ServeRequest serves one valid request. req and the bytes it points to are valid
	// until ServeRequest returns, unless it calls req.Retain. The handler may reply
	// before returning (Conn.Reserve, Conn.SendVectored), later from this shard, or ask
	// another shard to work and reply when that shard posts back.
	ServeRequest(c *Conn, req *Request)
	// ServeMessage delivers a message another shard (or this one) posted with Post.
	ServeMessage(s *Shard, m Message)
	// ConnClosed tells the handler that a connection it served is gone, so it can drop
	// per-connection state (a session). It runs on the connection's shard.
	ConnClosed(c *Conn)
}

// Ticker is a Handler that works every loop turn: the shard calls Tick once per turn,
// after serving its inbox and timers and before sending, with NowNs updated. Tick
// reports true when it has work for the very next turn (completed disk requests whose
// hooks have not run), so that the shard does not block in the meantime. An idle shard
// takes no turns: ask for one with Shard.WakeAt.
type Ticker interface {
	Tick(s *Shard) (busy bool)
}

// Opener is a Handler told of each connection as soon as its shard adopts it, before
// any request: a handler that lists connections (GET_CLIENTS) sees the ones that have
// not spoken yet. ConnClosed follows for every connection ConnOpened saw.
type Opener interface {
	ConnOpened(c *Conn)
}

// Dropper is a Handler told of the messages still queued for its shard when the
// runtime has stopped (posted while the shard was on its way out), so that it can
// release what they hold: a retained Frame, above all, which the arena's leak check
// would otherwise report. DropMessage runs after every shard goroutine has exited, on
// the goroutine that closes the runtime, one message at a time; releasing any shard's
// buffers is safe then.
type Dropper interface {
	DropMessage(m Message)
}

// Stopper is a Handler told, on its shard's goroutine, that the loop is ending (a
// shutdown or a fatal error): the last call from which it may use the shard's rings,
// e.g. to finish its disk I/O and close its files.
type Stopper interface {
	Stop(s *Shard)
}

// handlerRoles is a shard's handler, with the optional interfaces it implements
// found once, when the shard sets up, rather than asserted on every turn.
type handlerRoles struct {
	Handler
	ticker  Ticker  // the handler, if it implements Ticker
	stopper Stopper // the handler, if it implements Stopper
	busy    bool    // the ticker asked for another turn without blocking
}

func newHandlerRoles(h Handler) handlerRoles {
	r := handlerRoles{Handler: h}
	r.ticker, _ = h.(Ticker)
	r.stopper, _ = h.(Stopper)
	return r
}

// tick gives the ticker its turn and remembers whether it asked for another at once.
func (r *handlerRoles) tick(s *Shard) { r.busy = r.ticker != nil && r.ticker.Tick(s) }

// stop tells the stopper that the loop ends.
func (r *handlerRoles) stop(s *Shard) {
	if r.stopper != nil {
		r.stopper.Stop(s)
	}
}

// Request is one framed, validated request: the decoded header view and the body, both
// inside one 16-byte-aligned arena buffer.
type Request struct {
	Header *wire.RequestHeader
	Body   []byte

	shard    *Shard
	framer   *Framer
	conn     *Conn
	ticket   Ticket
	retained bool
	deferred bool
}

// Retain keeps the request's buffer beyond ServeRequest: Header and Body stay valid
// until the returned Frame is released. Call it at most once, from ServeRequest.
func (r *Request) Retain() Frame {
	if r.retained {
		panic("shard: Request.Retain called twice")
	}
	r.retained = true
	b := r.framer.Detach()
	r.conn.retainedBytes += len(b.Full())
	return Frame{Header: r.Header, Body: r.Body, Ticket: r.ticket, buffer: b, shard: r.shard, conn: r.conn.id}
}

// Frame is a request buffer the handler retained. Release it exactly once, on the shard
// that retained it.
type Frame struct {
	Header *wire.RequestHeader
	Body   []byte
	// Ticket is the request's place in its connection's reply order, for
	// Conn.Answer when the request was deferred (Request.Defer).
	Ticket Ticket

	buffer arena.Buffer
	shard  *Shard
	conn   ConnID // whose retainedBytes it counts in
}

// Release returns the frame's buffer to its shard's arena.
func (f *Frame) Release() {
	if c := f.shard.Conn(f.conn); c != nil {
		c.frameReleased(len(f.buffer.Full()))
	}
	f.shard.arena.Release(f.buffer)
	*f = Frame{}
}

// Releaser is told when the runtime no longer needs bytes it was lent: the parts of a
// vectored send, once the kernel has sent them or the connection closed. It is an
// interface rather than a func so that a caller's long-lived object can be passed
// without a closure allocation per send.
type Releaser interface {
	Release()
}

// Message travels between shards through their single-producer single-consumer queues.
// Kind, Value and Payload are the handler's; the runtime reads only its own kinds.
type Message struct {
	From    int    // the sending shard
	Conn    ConnID // the connection the message concerns, if any
	Kind    uint32 // handler-defined
	Value   uint64 // handler-defined
	Payload any    // handler-defined; a pointer does not allocate

	internal internalKind
	fd       int
}

type internalKind uint8

const (
	internalNone internalKind = iota
	// internalAdoptConn hands an accepted socket (fd) to the receiving shard.
	internalAdoptConn
	// internalReplicaRelease returns a replica frame's buffer to the shard that
	// sent it through the connection's owner (Shard.SendReplica), once sent.
	internalReplicaRelease
)

// ConnID names a connection anywhere in the runtime: the shard that owns it, its slot
// in that shard's table and the slot's generation, so an ID outlives its connection
// harmlessly (a lookup of a closed connection's ID finds nothing).
//
//	63        48 47               24 23                0
//	+-----------+-------------------+------------------+
//	|   shard   |       slot        |    generation    |
//	+-----------+-------------------+------------------+
type ConnID uint64

const (
	connSlotBits       = 24
	connGenerationBits = 24
	connSlotMax        = 1<<connSlotBits - 1
	connGenerationMask = 1<<connGenerationBits - 1
)

func newConnID(shard int, slot uint32, generation uint32) ConnID {
	return ConnID(uint64(shard)<<48 | uint64(slot)<<connGenerationBits | uint64(generation&connGenerationMask))
}

// Shard returns the index of the shard that owns the connection.
func (id ConnID) Shard() int { return int(id >> 48) }

func (id ConnID) slot() uint32       { return uint32(id>>connGenerationBits) & connSlotMax }
func (id ConnID) generation() uint32 { return uint32(id) & connGenerationMask }

// String formats the ID as its shard, slot and generation, slash-separated ("1/42/7").
func (id ConnID) String() string {
	return strconv.Itoa(id.Shard()) + "/" + strconv.FormatUint(uint64(id.slot()), 10) + "/" +
		strconv.FormatUint(uint64(id.generation()), 10)
}
