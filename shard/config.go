package shard

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/iggy-shard/iggy-shard/arena"
	"github.com/iggy-shard/iggy-shard/fdpass"
)

// Config configures a Runtime. The zero value of every field but NewHandler means the
// documented default.
type Config struct {
	// TCPAddress is where shard 0 listens for clients, host:port. Default
	// "127.0.0.1:8090"; port 0 picks a free port (Runtime.Addr tells which).
	TCPAddress string
	// ListenerOff: shard 0 binds no listener (TCPAddress is ignored) and connections
	// arrive only through Runtime.Adopt, e.g. from a TLS terminator.
	ListenerOff bool
	// ShardCount is the number of shards. Default: the number of CPUs this process may
	// run on (sched_getaffinity).
	ShardCount int
	// PinCPUs pins shard i to the i-th allowed CPU (modulo their count).
	PinCPUs bool
	// NewHandler makes the handler of each shard; called on that shard's goroutine.
	NewHandler func(s *Shard) Handler
	// Logger receives one line per event that matters; default slog.Default().
	Logger *slog.Logger

	// FrameSizeMax is the largest request frame accepted, header included. Default
	// FrameSizeMaxDefault (64 MiB).
	FrameSizeMax uint32
	// FrameTimeout closes a connection that started a frame and did not finish it
	// within this time (half a header, then silence). Default 10 s.
	FrameTimeout time.Duration
	// IdleTimeout closes a connection that sent nothing for this long; 0 disables it
	// (SDKs ping every 5 s, but a plain client may stay silent). Default 0.
	IdleTimeout time.Duration
	// SendTimeout closes a connection whose queued replies neither drained nor moved
	// by 64 KiB for this long: a consumer that stopped reading, or reads a trickle.
	// Default 30 s.
	SendTimeout time.Duration
	// SendQueueBytesMax bounds the reply bytes queued for one connection. While more
	// than half of it is queued the connection's requests wait unserved and it is not
	// read (back-pressure); a reply that would exceed it closes the connection. A
	// single reply larger than the bound is accepted into an empty queue. Default 8 MiB.
	SendQueueBytesMax int
	// ConnectionsPerShardMax bounds each shard's connection table. Default 65536.
	ConnectionsPerShardMax int
	// ShutdownTimeout bounds how long Shutdown waits for connections to flush their
	// replies before closing them anyway. Default 5 s.
	ShutdownTimeout time.Duration
	// Arena configures each shard's buffer arena. Default: ArenaConfigDefault().
	Arena arena.Config
	// MaintenanceInterval is how often a shard takes a turn of its own, busy or idle:
	// its arena gives back the pages of buffers left idle since the last one
	// (arena.TrimIdle), and its handler's Tick runs, for the work that is due with
	// time rather than with requests (retention of expired segments, idle poll
	// memory). Default arena.TrimIdleInterval (10 s).
	MaintenanceInterval time.Duration
	// BusyPoll is how long a shard that has just worked keeps polling its ring before
	// it sleeps in io_uring_enter: CPU traded for the microseconds a sleeping thread
	// takes to wake. Default 50 µs; negative disables it (every wait sleeps).
	BusyPoll time.Duration
	// Clock, when set, is every shard's clock (Shard.NowNs) in nanoseconds, in place of
	// the monotonic time since the runtime started: a test moves it to fire timers and
	// deadlines without waiting for them (then Runtime.WakeAll, so that sleeping shards
	// look at it). It must never go back.
	Clock func() int64
	// RingEntries is each ring's submission queue size. Default 1024.
	RingEntries uint32
	// InboxCapacity is the capacity of each inter-shard queue (a power of two).
	// Default 1024.
	InboxCapacity int
	// DiskIO gives each shard a disk ring for file I/O (Shard.Disk): a second
	// io_uring whose completions wake the loop. Off, Shard.Disk is nil.
	DiskIO bool
	// DiskAsyncWriteBytesMin: disk writes at least this large are handed to the
	// kernel's io-wq workers (IOSQE_ASYNC) instead of being copied into the page cache
	// inline during the shard's submit. 0 leaves the choice to the kernel.
	DiskAsyncWriteBytesMin int
	// PipesPerShardMax bounds the pipes each shard splices replies through
	// (Shard.Pipes); a reply that finds them all lent is copied. Default
	// PipesPerShardMaxDefault.
	PipesPerShardMax int
	// PipeSizeBytes is the capacity asked for each pipe (F_SETPIPE_SZ); the
	// kernel may grant less. Default PipeSizeBytesDefault.
	PipeSizeBytes int
	// SpliceRing runs spliced replies on a ring of each shard's own
	// (splicering.go) instead of the connection ring: about half the context
	// switches per MB polled, by one consumer or several. Off when false
	// (splicering.go says what was measured).
	SpliceRing bool

	// Replica, when set, gives the runtime a replica plane (replica.go): a
	// tcp_replica listener and connections to the other nodes of a cluster, whose
	// frames go to the handler (which must then be a ReplicaHandler). Nil for a
	// single node.
	Replica *ReplicaConfig

	// FdPass is how shard 0 hands accepted connections to the other shards: 0 probes
	// the kernel (fdpass.Probe) and uses msg_ring send-fd where it works, else the
	// inter-shard queue; fdpass.ModeQueue forces the queue.
	FdPass fdpass.Mode

	// recvDirectBytesMin is recvDirectBytesMinDefault unless a test or benchmark of
	// this package sets it (negative: never receive straight into a frame buffer).
	recvDirectBytesMin int
}

// BusyPollDefault is Config.BusyPoll's default: a little more than a client's
// turnaround on the machines measured (its Go runtime waking its goroutine, then
// writing), so that a lone connection's next request usually finds the shard still
// polling. BenchmarkPingRoundTrip, one connection: p50 ~30 µs at 50 µs and at 100 µs,
// ~50 µs at 20 µs, ~70 µs without polling.
const BusyPollDefault = 50 * time.Microsecond

// handoffsInFlightMax bounds shard 0's msg_ring handoffs awaiting completion, and so
// the staging slots its registered-file table reserves for them: an accept burst larger
// than this waits in the kernel's accept queue for a few microseconds, not in memory.
const handoffsInFlightMax = 64

// Receives are multishot: one armed recv per connection, into buffers the kernel takes
// from a provided-buffer ring when data arrives, so an idle connection holds no receive
// buffer. The ring is a whole arena class of recvBufferBytes buffers (lent to it), and
// the framer copies each arrival out at once, so a buffer is back in the ring before
// the next completion is looked at.
const recvBufferBytes = 8 << 10

// recvBufferGroup is the provided-buffer group id of the receive ring.
const recvBufferGroup = 0

// standingFrameBytes is the size of each connection's standing frame buffer and of its
// send buffers: a PING is 256 bytes and an SDK has one request in flight, so 4 KiB
// holds a typical request or reply; larger frames take larger buffers while they last.
const standingFrameBytes = 4 << 10

// batchBufferBytes is the size of the arena's class for large batches: 1 MiB of
// messages with their headers. A 1000 x 1000 B batch, the benchmark workload of Iggy
// and of this project, is a SEND_MESSAGES frame of 1,048,794 bytes (218 over 1 MiB)
// and a partition prepare of about 1.06 MB; in a 1 MiB class each took a 16 MiB
// buffer, of which a shard has 8, and the framer copied its first MiB once more to
// get there (it grows a frame's buffer by doubling). A quarter more holds 1000
// messages of up to 1,240 bytes, or 1024 of 1 KiB, in one buffer.
const batchBufferBytes = 1<<20 + 256<<10

// ArenaConfigDefault is a shard's default arena. Per connection a shard holds one
// standing frame buffer and, while replies are queued, send buffers; receive buffers
// are shared by all connections. The written-out sum for 4096 connections per shard:
//
//	class     count   virtual   for
//	4 KiB     16384    64 MiB   standing frame + send buffers
//	8 KiB      4096    32 MiB   receive ring (lent whole; must be a power of two)
//	64 KiB     1024    64 MiB   medium frames and replies
//	1.25 MiB     64    80 MiB   large batches: 1 MiB of messages with their headers
//	16 MiB        8   128 MiB   very large batches
//	64 MiB        2   128 MiB   frames up to FrameSizeMaxDefault
//	                  496 MiB virtual, resident as touched
func ArenaConfigDefault() arena.Config {
	const kib, mib = 1 << 10, 1 << 20
	return arena.Config{Classes: []arena.ClassConfig{
		{BufferSizeBytes: 4 * kib, BufferCount: 16384},
		{BufferSizeBytes: recvBufferBytes, BufferCount: 4096},
		{BufferSizeBytes: 64 * kib, BufferCount: 1024},
		{BufferSizeBytes: batchBufferBytes, BufferCount: 64},
		{BufferSizeBytes: 16 * mib, BufferCount: 8},
		{BufferSizeBytes: 64 * mib, BufferCount: 2},
	}}
}

// recvClass returns the index of the arena class the receive ring borrows.
func recvClass(cfg arena.Config) (int, error) {
	for i, c := range cfg.Classes {
		if c.BufferSizeBytes == recvBufferBytes {
			if c.BufferCount > 32768 || c.BufferCount&(c.BufferCount-1) != 0 {
				return -1, fmt.Errorf("shard: receive class (%d bytes) count %d is not a power of two up to 32768",
					recvBufferBytes, c.BufferCount)
			}
			return i, nil
		}
	}
	return -1, fmt.Errorf("shard: arena has no %d-byte class for the receive ring", recvBufferBytes)
}

func (c Config) withDefaults(allowedCPUs []int) (Config, error) {
	if c.NewHandler == nil {
		return c, errors.New("shard: Config.NewHandler is required")
	}
	if c.TCPAddress == "" {
		c.TCPAddress = "127.0.0.1:8090"
	}
	if c.ShardCount == 0 {
		c.ShardCount = len(allowedCPUs)
	}
	if c.ShardCount < 1 || c.ShardCount > 1<<15 {
		return c, fmt.Errorf("shard: shard count %d out of range 1..32768", c.ShardCount)
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.FrameSizeMax == 0 {
		c.FrameSizeMax = FrameSizeMaxDefault
	}
	if c.FrameSizeMax < headerSizeBytes {
		return c, fmt.Errorf("shard: frame size max %d < header size %d", c.FrameSizeMax, headerSizeBytes)
	}
	if c.FrameTimeout == 0 {
		c.FrameTimeout = 10 * time.Second
	}
	if c.SendTimeout == 0 {
		c.SendTimeout = 30 * time.Second
	}
	if c.FrameTimeout < 0 || c.IdleTimeout < 0 || c.SendTimeout < 0 {
		return c, errors.New("shard: negative timeout")
	}
	if c.SendQueueBytesMax == 0 {
		c.SendQueueBytesMax = 8 << 20
	}
	if c.SendQueueBytesMax < headerSizeBytes {
		return c, fmt.Errorf("shard: send queue bytes max %d < header size %d", c.SendQueueBytesMax, headerSizeBytes)
	}
	if c.ConnectionsPerShardMax == 0 {
		c.ConnectionsPerShardMax = 65536
	}
	if c.ConnectionsPerShardMax < 1 || c.ConnectionsPerShardMax > connSlotMax {
		return c, fmt.Errorf("shard: connections per shard %d out of range 1..%d", c.ConnectionsPerShardMax, connSlotMax)
	}
	if c.ShutdownTimeout == 0 {
		c.ShutdownTimeout = 5 * time.Second
	}
	if c.MaintenanceInterval == 0 {
		c.MaintenanceInterval = arena.TrimIdleInterval
	}
	if c.MaintenanceInterval < 0 {
		return c, fmt.Errorf("shard: maintenance interval %v is negative", c.MaintenanceInterval)
	}
	if len(c.Arena.Classes) == 0 {
		c.Arena = ArenaConfigDefault()
	}
	if err := c.Arena.Validate(); err != nil {
		return c, err
	}
	if _, err := recvClass(c.Arena); err != nil {
		return c, err
	}
	if c.Arena.Classes[0].BufferSizeBytes > standingFrameBytes {
		return c, fmt.Errorf("shard: smallest arena class %d bytes > standing frame buffer %d bytes",
			c.Arena.Classes[0].BufferSizeBytes, standingFrameBytes)
	}
	if c.BusyPoll == 0 {
		c.BusyPoll = BusyPollDefault
	}
	if c.BusyPoll > time.Second {
		return c, fmt.Errorf("shard: busy poll %v is longer than 1s", c.BusyPoll)
	}
	if c.RingEntries == 0 {
		c.RingEntries = 1024
	}
	if c.InboxCapacity == 0 {
		c.InboxCapacity = 1024
	}
	if c.PipesPerShardMax == 0 {
		c.PipesPerShardMax = PipesPerShardMaxDefault
	}
	if c.PipeSizeBytes == 0 {
		c.PipeSizeBytes = PipeSizeBytesDefault
	}
	if c.PipesPerShardMax < 0 || c.PipeSizeBytes < 0 {
		return c, errors.New("shard: negative pipe bound")
	}
	if c.recvDirectBytesMin == 0 {
		c.recvDirectBytesMin = recvDirectBytesMinDefault
	}
	if c.InboxCapacity&(c.InboxCapacity-1) != 0 {
		return c, fmt.Errorf("shard: inbox capacity %d is not a power of two", c.InboxCapacity)
	}
	return c, nil
}
