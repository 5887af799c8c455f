package shard

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/iggy-shard/iggy-shard/arena"
	"github.com/iggy-shard/iggy-shard/wire"
)

// The replica plane (iggy.apache.org/docs/binary-protocol/cluster): the connections
// between the nodes of a cluster, served by the same shards as the clients'.
//
// Shard 0 listens on tcp_replica and dials the peers of higher replica id (only the
// lower id dials, so one connection exists per pair), every ReconnectPeriod while no
// connection to a peer is up, sooner after a refused connect (100 ms doubling up to
// ReconnectPeriod: replica_redial.go). Each socket, accepted or dialed, is handed by fd passing
// to a shard, round-robin over the shards but shard 0 (unless ShardZero, or it is the
// only one); that shard, its owner, runs the handshake (package replica) within
// HandshakeTimeout, then registers the peer in the runtime's owner table: one atomic
// per replica id naming the owner shard, which every shard reads without a lock.
//
// Exactly one connection per pair: a connection whose handshake completes while one to
// the same peer is registered is refused and closed; the registered one stays (the
// reference's registry refuses the later insert the same way: apache/iggy
// core/message_bus/src/lifecycle/connection_registry.rs). A refused handshake is
// logged once per peer address and reason (replica_log.go). The dialer does not
// dial a peer that is up, so a second connection is a race or a peer's restart whose
// old connection has not been seen to close yet; it resolves at the next redial.
//
// After the handshake each frame is validated as the spec says (replicaFramer: the
// frame seal, a prepare's identity, the body seal, Reply and Eviction and frames over
// MessageSizeMax refused); a refused frame closes the connection, and nothing of it
// reaches the handler. Valid frames go to the ReplicaHandler of the owner shard. A
// connection has one recv in flight, into its 64 KiB read buffer (or the rest of one
// large frame), so a turn of its shard serves at most that much of it: a peer's flood
// of partition frames is read 256 header-only frames a turn, with the shard's timers,
// ticker and sends between, and a metadata frame behind it waits turns, not the flood.
//
// Connections can also come from outside, TLS sessions bridged to socketpairs
// (Runtime.AdoptReplica, ReplicaConfig.Dial and ListenerOff; replica_adopt.go).
//
// Any shard sends with Shard.SendReplica: the frame is copied into that shard's arena
// and, when another shard owns the peer, passed to it; the owner queues it in the
// peer's send queue of the frame's class, and gives the buffer back to the sending
// shard once it is sent. The metadata group's frames and the partition groups' have
// room of their own, and the first go first (replica_queue.go); a class whose room is
// full refuses the frame at once (counted, logged at most once a second): consensus
// retransmits, and no shard ever waits for a peer. Any shard may lend a frame instead
// (SendReplicaLent): no copy, and its release comes back to the lender
// (replica_lend.go).

// ReplicaHandler is the Handler of a runtime with a replica plane (Config.Replica):
// it gets every valid frame its shard's replica connections receive, on that shard.
type ReplicaHandler interface {
	// ServeReplica serves one validated frame from peer. f and the bytes it points
	// to are valid until ServeReplica returns, unless it calls f.Retain.
	ServeReplica(s *Shard, f *ReplicaFrame)
}

// ReplicaObserver is a ReplicaHandler told, on the owner shard, when a peer's
// connection registers (handshake done) and when it goes.
type ReplicaObserver interface {
	ReplicaConnected(s *Shard, peer uint8)
	ReplicaDisconnected(s *Shard, peer uint8)
}

// ReplicaFrame is one validated replica frame: its header, viewed in place, and body,
// in one 16-byte-aligned buffer.
type ReplicaFrame struct {
	Peer   uint8
	Header *wire.GenericHeader
	Body   []byte

	conn     *replicaConn
	retained bool
}

// Retain keeps the frame beyond ServeReplica, until the returned RetainedReplicaFrame
// is released (on this shard). A frame that has a buffer of its own is handed over;
// a small one is copied out of the connection's read buffer. Call it at most once.
func (f *ReplicaFrame) Retain() RetainedReplicaFrame {
	if f.retained {
		panic("shard: ReplicaFrame.Retain called twice")
	}
	f.retained = true
	s := f.conn.shard
	size := int(f.Header.Size)
	var b arena.Buffer
	var data []byte
	if f.conn.framer.InBig() {
		b = f.conn.framer.Detach()
		data = unsafe.Slice((*byte)(unsafe.Pointer(f.Header)), size)
	} else {
		var err error
		if b, err = s.arena.Acquire(size); err == nil {
			data = b.Full()[:size:size]
		} else {
			data = alignedHeapBytes(size)
		}
		copy(data, unsafe.Slice((*byte)(unsafe.Pointer(f.Header)), size))
	}
	h, _ := wire.ViewHeader[wire.GenericHeader](data)
	return RetainedReplicaFrame{Peer: f.Peer, Header: h, Body: data[headerSizeBytes:], buffer: b, shard: s}
}

// Detachable reports whether Retain would hand the frame's own buffer over (a
// large frame, received into a buffer of its own) rather than copy it.
func (f *ReplicaFrame) Detachable() bool { return !f.retained && f.conn.framer.InBig() }

// RetainedReplicaFrame is a replica frame kept past ServeReplica. Release it exactly
// once, on the shard that retained it.
type RetainedReplicaFrame struct {
	Peer   uint8
	Header *wire.GenericHeader
	Body   []byte

	buffer arena.Buffer // zero when the frame is on the heap
	shard  *Shard
}

// Release gives the frame's buffer back.
func (r *RetainedReplicaFrame) Release() {
	if !r.buffer.IsZero() {
		r.shard.arena.Release(r.buffer)
	}
	*r = RetainedReplicaFrame{}
}

var (
	// ErrReplicaPeerDown: no connection to the peer is registered; the frame is
	// dropped.
	ErrReplicaPeerDown = errors.New("shard: no connection to the replica")
	// ErrReplicaQueueFull: the room of the frame's class to the peer is full
	// (ReplicaRoom is 0): back-pressure; the frame is dropped, and the sender
	// retries later or lets consensus retransmit.
	ErrReplicaQueueFull = errors.New("shard: replica send queue full, frame dropped")
	// ErrReplicaBuffersExhausted: the sending shard's arena had no buffer for the
	// frame; it is dropped.
	ErrReplicaBuffersExhausted = errors.New("shard: no buffer for the replica frame, frame dropped")
)

// ReplicaStats counts a runtime's replica traffic. A snapshot, summed over shards.
type ReplicaStats struct {
	FramesSent, FramesReceived uint64
	BytesSent, BytesReceived   uint64
	// FramesDropped are frames SendReplica or SendReplicaLent refused, or accepted
	// and no connection carried (its connection went): the sum of the classes'.
	FramesDropped uint64
	// Control and Partition count each send class's frames (replica_queue.go).
	Control, Partition ReplicaClassStats
	// HandshakesRefused counts connections refused during or at the end of their
	// handshake (a refusal, a failed MAC, a timeout, a duplicate).
	HandshakesRefused uint64
	// FramesRefused counts connections closed for a frame that failed validation.
	FramesRefused uint64
	// Dials counts the connects shard 0 started to higher-id peers (not those
	// ReplicaConfig.Dial makes); DialsFailed those refused, failed or cancelled.
	Dials, DialsFailed uint64
	// FramesLentAcross counts the frames SendReplicaLent accepted for a connection
	// another shard owns (replica_lend.go); LentReturnsKept the times one's release
	// found its way back to the lender full and waited a turn.
	FramesLentAcross, LentReturnsKept uint64
}

// ReplicaClassStats count one send class's frames.
type ReplicaClassStats struct {
	// FramesSent left on the wire whole.
	FramesSent uint64
	// FramesDropped were refused or dropped, for any reason.
	FramesDropped uint64
	// QueueFull are the FramesDropped refused because the class's room to the peer
	// was full (ErrReplicaQueueFull).
	QueueFull uint64
}

type replicaCounters struct {
	framesReceived, bytesSent, bytesReceived atomic.Uint64
	handshakesRefused, framesRefused         atomic.Uint64
	dials, dialsFailed                       atomic.Uint64
	lentAcross, lentReturnsKept              atomic.Uint64
	classes                                  [replicaClassCount]replicaClassCounters
}

type replicaClassCounters struct {
	sent, dropped, queueFull atomic.Uint64
}

// replicaRuntime is the runtime-wide part of the replica plane.
type replicaRuntime struct {
	cfg       *ReplicaConfig
	peers     []netip.AddrPort // dial addresses by replica id (higher ids only)
	addr      *net.TCPAddr
	listenFd  int
	adoptions adoptionQueue[replicaAdoption]
	// owners[peer] is 1 + the index of the shard that owns the peer's registered
	// connection, 0 when none: written by the owner (compare-and-swap from 0, store
	// of 0), read by every shard.
	owners [256]atomic.Int32
	// dialSinceNs[peer] is when shard 0 handed over a dialed connection whose
	// handshake has not ended yet (0: none): shard 0 does not dial a peer again
	// meanwhile, unless it is older than the handshake timeout (the connection was
	// lost on its way).
	dialSinceNs [256]atomic.Int64
	// dialEnded[peer] is set by EndReplicaDial, and dialEnds counts the calls, so that
	// shard 0 scans the peers only when one has ended.
	dialEnded [256]atomic.Bool
	dialEnds  atomic.Uint64

	// capacity, budgets[peer] and transit[to][from] are the send classes' room, use
	// of it, and ways between shards (replica_queue.go).
	capacity        [replicaClassCount]int
	budgets         [][replicaClassCount]replicaBudget
	transit         [][][replicaClassCount]atomic.Pointer[Queue[replicaTransit]]
	transitCapacity [replicaClassCount]int
	// lentReturns[to][from] carry the Releasers of frames shard to lent through
	// shard from's connections back to it (replica_lend.go).
	lentReturns        [][]atomic.Pointer[Queue[Releaser]]
	lentReturnCapacity int
}

// newReplicaRuntime returns the runtime-wide replica state of a runtime of
// shardCount shards.
func newReplicaRuntime(cfg *ReplicaConfig, peers []netip.AddrPort, shardCount int) *replicaRuntime {
	rr := &replicaRuntime{cfg: cfg, peers: peers, listenFd: -1}
	rr.capacity = [replicaClassCount]int{ReplicaControl: cfg.PeerQueueCapacity, ReplicaPartition: cfg.PartitionQueueCapacity}
	for class, capacity := range rr.capacity {
		rr.transitCapacity[class] = transitCapacityFor(capacity, int(cfg.Handshake.ReplicaCount)-1)
	}
	rr.budgets = make([][replicaClassCount]replicaBudget, cfg.Handshake.ReplicaCount)
	rr.transit = make([][][replicaClassCount]atomic.Pointer[Queue[replicaTransit]], shardCount)
	for to := range rr.transit {
		rr.transit[to] = make([][replicaClassCount]atomic.Pointer[Queue[replicaTransit]], shardCount)
	}
	rr.lentReturnCapacity = transitCapacityFor(cfg.PeerQueueCapacity+cfg.PartitionQueueCapacity, int(cfg.Handshake.ReplicaCount)-1)
	rr.lentReturns = make([][]atomic.Pointer[Queue[Releaser]], shardCount)
	for to := range rr.lentReturns {
		rr.lentReturns[to] = make([]atomic.Pointer[Queue[Releaser]], shardCount)
	}
	return rr
}

// ReplicaAddr returns the address of the replica listener; nil without Config.Replica
// or with its ListenerOff.
func (rt *Runtime) ReplicaAddr() *net.TCPAddr {
	if rt.replica == nil {
		return nil
	}
	return rt.replica.addr
}

// ReplicaConnected reports whether a connection to peer is registered. Safe from any
// goroutine.
func (rt *Runtime) ReplicaConnected(peer uint8) bool {
	return rt.replica != nil && rt.replica.owners[peer].Load() != 0
}

// ReplicaStats sums the replica counters of every shard. Safe from any goroutine.
func (rt *Runtime) ReplicaStats() ReplicaStats {
	var st ReplicaStats
	for _, s := range rt.shards {
		c := &s.counters.replica
		st.FramesReceived += c.framesReceived.Load()
		st.BytesSent += c.bytesSent.Load()
		st.BytesReceived += c.bytesReceived.Load()
		st.HandshakesRefused += c.handshakesRefused.Load()
		st.FramesRefused += c.framesRefused.Load()
		st.Dials += c.dials.Load()
		st.DialsFailed += c.dialsFailed.Load()
		st.FramesLentAcross += c.lentAcross.Load()
		st.LentReturnsKept += c.lentReturnsKept.Load()
		for class, cs := range []*ReplicaClassStats{&st.Control, &st.Partition} {
			cc := &c.classes[class]
			cs.FramesSent += cc.sent.Load()
			cs.FramesDropped += cc.dropped.Load()
			cs.QueueFull += cc.queueFull.Load()
		}
	}
	st.FramesSent = st.Control.FramesSent + st.Partition.FramesSent
	st.FramesDropped = st.Control.FramesDropped + st.Partition.FramesDropped
	return st
}

// replicaShard is one shard's part of the replica plane.
type replicaShard struct {
	handler  ReplicaHandler
	observer ReplicaObserver // the handler, if it implements ReplicaObserver

	conns    slotTable[replicaConn]
	links    [256]*replicaConn // the registered connections this shard owns, by peer
	releases []pendingRelease
	// lentReturnsKept are lent frames' releases whose return queue was full.
	lentReturnsKept []lentReturn
	dirty           []*replicaConn // connections that queued frames this turn
	frame           ReplicaFrame   // reused for every ServeReplica
	// headerScratch is a 16-byte-aligned copy of an unaligned header being
	// classified (frameClass).
	headerScratch []byte

	logLimits replicaLogLimiter
	refusals  refusalLog

	// Shard 0 only.
	listener     replicaListener
	dials        []replicaDial // by replica id
	dialEndsSeen uint64        // replicaRuntime.dialEnds when last looked at
	nextShard    int
}

// setUpReplica prepares a shard's replica state once its handler exists.
func (s *Shard) setUpReplica() error {
	rr := s.rt.replica
	h, ok := s.handler.Handler.(ReplicaHandler)
	if !ok {
		return fmt.Errorf("shard %d: Config.Replica is set and the handler is no ReplicaHandler", s.index)
	}
	s.replica = &replicaShard{handler: h, refusals: refusalLog{last: map[refusalKey]refusalEntry{}},
		headerScratch: alignedHeapBytes(headerSizeBytes)}
	s.replica.observer, _ = s.handler.Handler.(ReplicaObserver)
	// Only shard 0 listens; on the others the listener's zero fd would be
	// descriptor 0, which acceptor.stop would close (and with it whatever
	// file of the process had been given that number since).
	s.replica.listener = newReplicaListener(-1)
	if s.index == 0 {
		s.replica.listener = newReplicaListener(rr.listenFd)
		s.replica.dials = make([]replicaDial, len(rr.peers))
		for i := range s.replica.dials {
			s.replica.dials[i].fd = -1
		}
	}
	return nil
}

// closeReplica releases what the replica plane still holds once every shard has
// exited: buffer returns that never found room in an inbox, lent frames on their way
// to a connection or back to their lender, the frames and buffers of connections cut
// by a fatal stop, the listener and connects in flight.
func (rt *Runtime) closeReplica() {
	rr := rt.replica
	if rr == nil {
		return
	}
	for _, s := range rt.shards {
		r := s.replica
		if r == nil {
			continue
		}
		for _, p := range r.releases {
			a := rt.shards[p.to].arena
			a.Release(a.BufferAt(int(p.m.Value&0xff), int(p.m.Value>>8)))
		}
		r.releases = nil
		rt.closeLentReturns(s)
		for from := range rr.transit[s.index] {
			for class := range replicaClassCount {
				q := rr.transit[s.index][from][class].Load()
				for q != nil {
					t, ok := q.Pop()
					if !ok {
						break
					}
					if t.done != nil {
						t.done.Release()
						continue
					}
					a := rt.shards[from].arena
					a.Release(a.BufferAt(int(t.bufClass), int(t.bufIndex)))
				}
			}
		}
		for _, c := range r.conns.items {
			if c.state == linkFree {
				continue
			}
			for class := range replicaClassCount {
				for c.queues[class].n > 0 {
					out := c.queues[class].pop()
					a := rt.shards[out.from].arena
					switch {
					case out.done != nil:
						out.done.Release()
					case out.from == s.index:
						a.Release(out.buffer)
					default:
						a.Release(a.BufferAt(int(out.bufClass), int(out.bufIndex)))
					}
				}
			}
			c.queued = 0
			c.framer.Close()
			if !c.direct {
				unix.Close(c.fd)
			}
			c.state = linkFree
		}
		for i := range r.dials {
			if r.dials[i].fd >= 0 {
				unix.Close(r.dials[i].fd)
				r.dials[i].fd = -1
			}
		}
		r.listener.closeFd()
	}
	rr.adoptions.close(func(a replicaAdoption) int { return a.fd })
	if rt.shards[0].replica == nil && rr.listenFd >= 0 {
		unix.Close(rr.listenFd) // shard 0 never set up
	}
	rr.listenFd = -1
}
