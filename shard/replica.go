package shard

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/iggy-shard/iggy-shard/arena"
	"github.com/iggy-shard/iggy-shard/replica"
	"github.com/iggy-shard/iggy-shard/wire"
)

// The replica plane (iggy.apache.org/docs/binary-protocol/cluster): the connections
// between the nodes of a cluster, served by the same shards as the clients'.
//
// Shard 0 listens on tcp_replica and dials the peers of higher replica id (only the
// lower id dials, so one connection exists per pair), every ReconnectPeriod while no
// connection to a peer is up. Each socket, accepted or dialed, is handed by fd passing
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
// retransmits, and no shard ever waits for a peer. The owner shard itself may lend a
// frame instead (SendReplicaLent): no copy.

// ReplicaConfig configures a runtime's replica plane (Config.Replica). Two of the
// runtime's own settings apply to its connections too: Config.FrameTimeout (a frame
// begun must complete in it) and Config.SendTimeout (a peer that reads none of its
// queued frames for that long is closed, and redialed).
type ReplicaConfig struct {
	// ListenAddress is where shard 0 listens for the other replicas, host:port (the
	// node's ip and ports.tcp_replica); port 0 picks a free port (Runtime.ReplicaAddr).
	ListenAddress string
	// Handshake is this node's side of every handshake: cluster id, own replica id,
	// roster size and the MAC keys of cluster.auth (nil when auth is off).
	Handshake replica.HandshakeConfig
	// PeerAddresses are the roster's replica addresses, ip:tcp_replica, indexed by
	// replica id (len = Handshake.ReplicaCount). Only the higher ids are dialed; the
	// others (own entry included) may be empty.
	PeerAddresses []string
	// ReconnectPeriod is how often a peer without a connection is dialed again
	// (message_bus.reconnect_period). Default 5 s.
	ReconnectPeriod time.Duration
	// PeerQueueCapacity bounds the control class's frames to each peer, in frames
	// (message_bus.peer_queue_capacity): the metadata group's, queued or on their
	// way to the connection's shard. Default 256.
	PeerQueueCapacity int
	// PartitionQueueCapacity bounds the partition groups' frames to each peer the
	// same way, apart from the control class (replica_queue.go). Default:
	// PeerQueueCapacity.
	PartitionQueueCapacity int
	// MessageSizeMax is the largest frame accepted or sent on the plane, header
	// included (message_bus.max_message_size). Default 64 MiB.
	MessageSizeMax uint32
	// HandshakeTimeout closes a connection whose handshake has not completed in
	// this time (the reference's message_bus.handshake_grace). Default 10 s.
	HandshakeTimeout time.Duration
	// ListenerOff: shard 0 binds no replica listener (ListenAddress is ignored);
	// inbound connections arrive through Runtime.AdoptReplica, e.g. from a TLS
	// terminator that owns the port (replica_adopt.go).
	ListenerOff bool
	// Dial, when set, opens the outbound connections in place of shard 0's own
	// io_uring connects (a TLS dialer, say). It is called on shard 0 and must
	// return at once; the connection it opens comes in through AdoptReplica with
	// dialedPeer = peer. Until its handshake ends (or twice HandshakeTimeout has
	// passed) the peer is not dialed again.
	Dial func(peer uint8, address netip.AddrPort)
	// ShardZero places replica connections on shard 0 too; by default shard 0,
	// which accepts and places every connection, serves none (when it is not the
	// only shard), as the reference's coordinator.skip_shard_zero_for_replicas.
	ShardZero bool
}

// Replica plane defaults (the reference's message_bus section).
const (
	ReplicaReconnectPeriodDefault   = 5 * time.Second
	ReplicaPeerQueueCapacityDefault = 256
	ReplicaHandshakeTimeoutDefault  = 10 * time.Second
)

// replicaCountMax: replica ids are a byte, and 255 is no id (the broadcast sentinel).
const replicaCountMax = 255

func (c *ReplicaConfig) withDefaults() (*ReplicaConfig, []netip.AddrPort, error) {
	cfg := *c
	h := &cfg.Handshake
	if h.ReplicaCount < 1 || int(h.ReplicaCount) > replicaCountMax {
		return nil, nil, fmt.Errorf("shard: replica count %d out of range 1..%d", h.ReplicaCount, replicaCountMax)
	}
	if h.Self >= h.ReplicaCount {
		return nil, nil, fmt.Errorf("shard: replica id %d not below the replica count %d", h.Self, h.ReplicaCount)
	}
	if len(cfg.PeerAddresses) != int(h.ReplicaCount) {
		return nil, nil, fmt.Errorf("shard: %d replica addresses for %d replicas", len(cfg.PeerAddresses), h.ReplicaCount)
	}
	peers := make([]netip.AddrPort, len(cfg.PeerAddresses))
	for id := int(h.Self) + 1; id < len(peers); id++ {
		a, err := netip.ParseAddrPort(cfg.PeerAddresses[id])
		if err != nil {
			return nil, nil, fmt.Errorf("shard: replica %d address: %w", id, err)
		}
		peers[id] = a
	}
	if cfg.ListenAddress == "" && !cfg.ListenerOff {
		return nil, nil, errors.New("shard: ReplicaConfig.ListenAddress is required")
	}
	if cfg.ReconnectPeriod == 0 {
		cfg.ReconnectPeriod = ReplicaReconnectPeriodDefault
	}
	if cfg.PeerQueueCapacity == 0 {
		cfg.PeerQueueCapacity = ReplicaPeerQueueCapacityDefault
	}
	if cfg.PartitionQueueCapacity == 0 {
		cfg.PartitionQueueCapacity = cfg.PeerQueueCapacity
	}
	if cfg.MessageSizeMax == 0 {
		cfg.MessageSizeMax = wire.DefaultMessageSizeMax
	}
	if cfg.HandshakeTimeout == 0 {
		cfg.HandshakeTimeout = ReplicaHandshakeTimeoutDefault
	}
	switch {
	case cfg.ReconnectPeriod < 0 || cfg.HandshakeTimeout < 0:
		return nil, nil, errors.New("shard: negative replica period or timeout")
	case cfg.PeerQueueCapacity < 1 || cfg.PeerQueueCapacity > 1<<16:
		return nil, nil, fmt.Errorf("shard: peer queue capacity %d out of range 1..65536", cfg.PeerQueueCapacity)
	case cfg.PartitionQueueCapacity < 1 || cfg.PartitionQueueCapacity > 1<<16:
		return nil, nil, fmt.Errorf("shard: partition queue capacity %d out of range 1..65536", cfg.PartitionQueueCapacity)
	case cfg.MessageSizeMax < headerSizeBytes:
		return nil, nil, fmt.Errorf("shard: replica message size max %d < header size %d", cfg.MessageSizeMax, headerSizeBytes)
	}
	return &cfg, peers, nil
}

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

	// capacity, budgets[peer] and transit[to][from] are the send classes' room, use
	// of it, and ways between shards (replica_queue.go).
	capacity        [replicaClassCount]int
	budgets         [][replicaClassCount]replicaBudget
	transit         [][][replicaClassCount]atomic.Pointer[Queue[replicaTransit]]
	transitCapacity [replicaClassCount]int
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

// ReplicaOwner returns the shard that owns peer's registered connection. Safe from any
// goroutine; a snapshot.
func (s *Shard) ReplicaOwner(peer uint8) (int, bool) {
	if s.rt.replica == nil {
		return 0, false
	}
	o := s.rt.replica.owners[peer].Load()
	return int(o) - 1, o != 0
}

// SendReplica sends one frame to peer from any shard: parts, concatenated, are the
// frame, the first part holding the whole header, whose size field is the total. The
// frame is copied (parts may be reused on return) and sealed as the spec says
// (wire.SealReplica). It returns nil when the frame is on its way; ErrReplicaPeerDown,
// ErrReplicaQueueFull (its class has no room: ReplicaRoom) and
// ErrReplicaBuffersExhausted when it was dropped (consensus retransmits); any other
// error is the caller's bug: a malformed frame.
func (s *Shard) SendReplica(peer uint8, parts ...[]byte) error {
	rr := s.rt.replica
	if rr == nil {
		return errors.New("shard: SendReplica without a replica plane")
	}
	total := 0
	for _, p := range parts {
		total += len(p)
	}
	if len(parts) == 0 {
		return errors.New("shard: SendReplica of no frame")
	}
	if err := checkReplicaFrame(rr, peer, parts[0], total); err != nil {
		return err
	}
	class := s.frameClass(parts[0])
	owner := rr.owners[peer].Load() - 1
	if owner < 0 {
		s.counters.replica.classes[class].dropped.Add(1)
		return ErrReplicaPeerDown
	}
	if !rr.reserve(peer, class) {
		s.refuseQueueFull(peer, class)
		return ErrReplicaQueueFull
	}
	b, err := s.arena.Acquire(total)
	if err != nil {
		rr.unreserve(peer, class)
		s.counters.replica.classes[class].dropped.Add(1)
		if s.replicaLogAllowed(replicaLogNoBuffer) {
			s.logReplica(replicaLogNoBuffer, "replica frame dropped: no send buffer", "peer", peer, "bytes", total)
		}
		return ErrReplicaBuffersExhausted
	}
	data := b.Full()[:total:total]
	n := 0
	for _, p := range parts {
		n += copy(data[n:], p)
	}
	h, _ := wire.ViewHeader[wire.GenericHeader](data)
	wire.SealReplica(h, data[headerSizeBytes:])
	if int(owner) == s.index {
		return s.enqueueReplica(replicaOut{data: data, buffer: b, from: s.index, peer: peer, class: class})
	}
	t := replicaTransit{data: unsafe.Pointer(unsafe.SliceData(data)), size: uint32(total), peer: peer, class: class,
		bufClass: uint8(b.Class()), bufIndex: uint32(b.Index())}
	if !rr.transitQueue(int(owner), s.index, class).Push(t) {
		// More of the class is on its way to that shard than its budget for all
		// peers: only when one shard owns the links of many peers.
		s.arena.Release(b)
		rr.unreserve(peer, class)
		s.refuseQueueFull(peer, class)
		return ErrReplicaQueueFull
	}
	s.mail.wakeNeeded[owner] = true
	return nil
}

// frameClass returns the class of the frame whose whole header first holds, aligned
// or not.
func (s *Shard) frameClass(first []byte) ReplicaClass {
	h, err := wire.ViewHeader[wire.GenericHeader](first[:headerSizeBytes])
	if err != nil {
		scratch := s.replica.headerScratch
		copy(scratch, first[:headerSizeBytes])
		h, _ = wire.ViewHeader[wire.GenericHeader](scratch)
	}
	return ReplicaFrameClass(h)
}

// refuseQueueFull counts and logs a frame refused because its class's room to peer
// is full: a control frame at WARN, at most once a second; a partition group's at
// INFO, at most once a minute, since for that class it is back-pressure (the
// groups retransmit what a slow peer did not take).
func (s *Shard) refuseQueueFull(peer uint8, class ReplicaClass) {
	c := &s.counters.replica.classes[class]
	c.dropped.Add(1)
	c.queueFull.Add(1)
	kind := replicaLogQueueFull
	if class == ReplicaPartition {
		kind = replicaLogBackPressure
	}
	if s.replicaLogAllowed(kind) {
		s.logReplica(kind, "replica frame refused: the peer's send queue of its class is full", "peer", peer,
			"class", class.String(), "capacity", s.rt.replica.capacity[class])
	}
}

// ErrReplicaNotOwner: SendReplicaLent was called on a shard that does not own the
// peer's connection; the caller still owns the frame (send it with SendReplica).
var ErrReplicaNotOwner = errors.New("shard: this shard does not own the replica connection")

// SendReplicaLent sends one frame to peer without copying it, from the shard that
// owns the peer's connection (Shard.ReplicaOwner): a large frame the caller keeps
// anyway, such as a journaled prepare, leaves from where it lies. The frame is sealed
// in place (wire.SealReplica) and must then stay unchanged until done is released, on
// this shard, once the kernel no longer reads it (sent, or the connection closed). On
// an error done is not called and the caller still owns the frame:
// ErrReplicaNotOwner on another shard, ErrReplicaPeerDown and ErrReplicaQueueFull as
// for SendReplica. (After a fatal stop, done may be released by the goroutine that
// closes the runtime, as Dropper's messages are.)
func (s *Shard) SendReplicaLent(peer uint8, frame []byte, done Releaser) error {
	rr := s.rt.replica
	if rr == nil {
		return errors.New("shard: SendReplicaLent without a replica plane")
	}
	if err := checkReplicaFrame(rr, peer, frame, len(frame)); err != nil {
		return err
	}
	h, err := wire.ViewHeader[wire.GenericHeader](frame)
	if err != nil {
		return fmt.Errorf("shard: SendReplicaLent of a frame that is not 16-byte aligned: %w", err)
	}
	owner := rr.owners[peer].Load() - 1
	if owner >= 0 && int(owner) != s.index {
		return ErrReplicaNotOwner
	}
	class := ReplicaFrameClass(h)
	c := s.replica.links[peer]
	if owner < 0 || c == nil {
		s.counters.replica.classes[class].dropped.Add(1)
		return ErrReplicaPeerDown
	}
	if !rr.reserve(peer, class) {
		s.refuseQueueFull(peer, class)
		return ErrReplicaQueueFull
	}
	wire.SealReplica(h, frame[headerSizeBytes:])
	if !c.enqueue(replicaOut{data: frame, from: s.index, peer: peer, class: class, done: done}) {
		// Not for want of room (the budget bounds the queue): the link is closing.
		rr.unreserve(peer, class)
		s.counters.replica.classes[class].dropped.Add(1)
		return ErrReplicaPeerDown
	}
	return nil
}

// checkReplicaFrame checks what a sender owes: a whole header first, a size field
// that is the frame's length, within MessageSizeMax, consensus traffic, to a peer.
func checkReplicaFrame(rr *replicaRuntime, peer uint8, first []byte, total int) error {
	if len(first) < headerSizeBytes {
		return fmt.Errorf("shard: replica frame of %d bytes whose first part is not a whole header", total)
	}
	if size := int(leUint32(first[wire.SizeFieldOffset:])); size != total {
		return fmt.Errorf("shard: replica frame of %d bytes whose header says %d", total, size)
	}
	if uint32(total) > rr.cfg.MessageSizeMax {
		return fmt.Errorf("shard: replica frame of %d bytes > message size max %d", total, rr.cfg.MessageSizeMax)
	}
	if peer == rr.cfg.Handshake.Self || peer >= rr.cfg.Handshake.ReplicaCount {
		return fmt.Errorf("shard: a replica frame to replica %d (self %d of %d)", peer, rr.cfg.Handshake.Self, rr.cfg.Handshake.ReplicaCount)
	}
	if command := wire.Command(first[wire.CommandFieldOffset]); !command.ReplicaPlane() ||
		command >= wire.CommandReplicaHello && command <= wire.CommandReplicaFinish {
		return fmt.Errorf("shard: a replica frame of command %s, not consensus traffic", command)
	}
	return nil
}

func leUint32(b []byte) uint32 {
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}

// enqueueReplica queues a frame (budgeted) on this shard's registered connection to
// its peer, or drops it (counted) when there is none.
func (s *Shard) enqueueReplica(out replicaOut) error {
	c := s.replica.links[out.peer]
	if c == nil || !c.enqueue(out) {
		// No connection, or one closing; a full queue cannot be: the class's
		// budget, taken when the frame was accepted, is the queue's capacity.
		s.counters.replica.classes[out.class].dropped.Add(1)
		s.releaseReplicaOut(out)
		return ErrReplicaPeerDown
	}
	return nil
}

// ReplicaQueueRoom returns how many more partition frames (the class a pacing
// sender, such as a repair stream or a benchmark, sends) peer takes now, from any
// shard; 0 when its connection is down. See ReplicaRoom.
func (s *Shard) ReplicaQueueRoom(peer uint8) int { return s.ReplicaRoom(peer, ReplicaPartition) }

// ReplicaRoom returns how many more frames of class peer takes now, from any shard
// (a snapshot: other shards send too); 0 when its connection is down. A sender that
// paces itself asks before it sends; one that does not meets ErrReplicaQueueFull.
func (s *Shard) ReplicaRoom(peer uint8, class ReplicaClass) int {
	rr := s.rt.replica
	if rr == nil || int(peer) >= len(rr.budgets) || class >= replicaClassCount || rr.owners[peer].Load() == 0 {
		return 0
	}
	return rr.room(peer, class)
}

// serveReplicaMessage serves the runtime's own replica message: a sent frame's
// buffer coming home.
func (s *Shard) serveReplicaMessage(m Message) {
	s.arena.Release(s.arena.BufferAt(int(m.Value&0xff), int(m.Value>>8)))
}

// releaseReplicaOut gives a queued frame's buffer back to the shard it came from: at
// once when that is this shard, else by a message (kept until the inbox has room).
func (s *Shard) releaseReplicaOut(out replicaOut) {
	if !out.handshake {
		s.rt.replica.unreserve(out.peer, out.class)
	}
	if out.done != nil {
		out.done.Release()
		return
	}
	if out.from == s.index {
		s.arena.Release(out.buffer)
		return
	}
	m := Message{internal: internalReplicaRelease, Value: uint64(out.bufClass) | uint64(out.bufIndex)<<8}
	if !s.Post(out.from, m) {
		s.replica.releases = append(s.replica.releases, pendingRelease{to: out.from, m: m})
	}
}

// retryReleases posts the buffer returns that found their inbox full; every turn.
func (s *Shard) retryReleases() {
	r := s.replica
	kept := r.releases[:0]
	for _, p := range r.releases {
		if !s.Post(p.to, p.m) {
			kept = append(kept, p)
		}
	}
	clear(r.releases[len(kept):])
	r.releases = kept
}

type pendingRelease struct {
	to int
	m  Message
}

// replicaOut is one frame in a peer's send queue: its bytes, its class, and whose
// arena buffer holds them (this shard's buffer, or bufClass and bufIndex in shard
// from's arena).
type replicaOut struct {
	data     []byte
	sent     int
	buffer   arena.Buffer // set when from is this shard
	from     int
	bufIndex uint32
	bufClass uint8
	peer     uint8
	class    ReplicaClass
	// handshake: a handshake frame, not counted as consensus traffic and not
	// budgeted.
	handshake bool
	// done, for a lent frame (SendReplicaLent), is told when the kernel is done
	// with it; the frame then has no buffer of the runtime's.
	done Releaser
}

// replicaShard is one shard's part of the replica plane.
type replicaShard struct {
	handler  ReplicaHandler
	observer ReplicaObserver // the handler, if it implements ReplicaObserver

	conns    slotTable[replicaConn]
	links    [256]*replicaConn // the registered connections this shard owns, by peer
	releases []pendingRelease
	dirty    []*replicaConn // connections that queued frames this turn
	frame    ReplicaFrame   // reused for every ServeReplica
	// headerScratch is a 16-byte-aligned copy of an unaligned header being
	// classified (frameClass).
	headerScratch []byte

	logLimits replicaLogLimiter
	refusals  refusalLog

	// Shard 0 only.
	listener  replicaListener
	dials     []replicaDial // by replica id
	nextShard int
}

// setUpReplica prepares a shard's replica state once its handler exists.
func (s *Shard) setUpReplica() error {
	rr := s.rt.replica
	h, ok := s.handler.(ReplicaHandler)
	if !ok {
		return fmt.Errorf("shard %d: Config.Replica is set and the handler is no ReplicaHandler", s.index)
	}
	s.replica = &replicaShard{handler: h, refusals: refusalLog{last: map[refusalKey]refusalEntry{}},
		headerScratch: alignedHeapBytes(headerSizeBytes)}
	s.replica.observer, _ = s.handler.(ReplicaObserver)
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
// exited: buffer returns that never found room in an inbox, the frames and buffers of
// connections cut by a fatal stop, the listener and connects in flight.
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
		for from := range rr.transit[s.index] {
			for class := range replicaClassCount {
				q := rr.transit[s.index][from][class].Load()
				for q != nil {
					t, ok := q.Pop()
					if !ok {
						break
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
