// Package server is the iggy-shard server: the transports' handler on the shard
// runtime (it implements shard.Handler). It holds the binary connections'
// sessions, decodes their frames into typed requests (package request) and routes
// them; it drives, through one seam each, the metadata plane's host on shard 0
// (package metahost: metaplane over a vsr group of one replica on a single node,
// of the roster in a cluster) and the partition plane on its owner shards
// (package partitionhost), and takes the commands of a second transport through
// Server.Do (caller.go). A clustered node (cluster.enabled) also runs the replica
// plane: cluster.go and metahost/ticks.go.
//
// # Where a request goes
//
// A connection lives on one shard. That shard checks the session (only PING before
// login; the client id and session epoch of the login on every later request) and
// routes from its own view of the committed metadata (package metaview), which it brings up
// to date first:
//
//	conn shard: PING; reads of the metadata (streams, topics, users, groups,
//	            tokens, GET_ME, GET_CLUSTER_METADATA); names, permissions and the partition of
//	            SEND_MESSAGES, POLL_MESSAGES and consumer offsets (routing.go)
//	           ──► owner shard (or none: it is the conn shard): the partition work
//	                        (partitionhost.Host.Serve)
//	           ──► shard 0: logins, metadata writes, GET_STATS, GET_CLIENT(S),
//	                        GET_SNAPSHOT (metahost.Router.Serve)
//	owner or 0 ──► conn shard: the reply, written there in request order
//
// Shard 0 publishes every commit to the shards' views before its reply leaves, so
// a later request on any connection sees it; each shard carries out what a commit
// asks of the partitions it owns (creations, deletions, purges) a slice per loop
// turn once its view applied the commit (partitionhost/effects.go), and first for a partition an
// operation routed to it needs.
//
// A partition's owner is a hash of (stream, topic, partition) modulo the shard
// count; every shard opens the partitions it owns at start. Messages between shards
// travel as a *job (request.Job), which belongs to the connection's shard from the request to the
// reply, so nothing is allocated per request once the shard's free list is warm.
//
// # Durability
//
// Metadata: see package metahost. Partitions: a send is acknowledged per its topic's
// policy (partition.Store.Send).
//
// # Memory
//
// What the server holds is a sum of bounds, per shard unless said otherwise (the
// defaults; S shards):
//
//	arena (shard.ArenaConfigDefault)     496 MiB virtual, resident as touched:
//	  receive ring                         32 MiB   4096 x 8 KiB, shared by the connections
//	  standing frames, send buffers        64 MiB   4 KiB each; a connection's send queue
//	                                                holds at most 8 MiB of them
//	  request frames, 64 KiB..64 MiB      400 MiB   a connection is not read while its
//	                                                requests in flight hold 4 MiB, nor
//	                                                while the arena has no buffer for its
//	                                                next frame (it waits in line)
//	polls (PollMemoryBytesMax, config)   256 MiB   read buffers lent until the reply is
//	                                                sent, and idle ones kept for reuse;
//	                                                polls beyond it wait (pollmemory)
//	connections                          about 8 KiB of Go heap each while idle (measured
//	                                     with 2000 loopback connections), at most 65536
//	                                     per shard; idle ones close after 60 s
//	                                     (config.Config.IdleTimeout)
//	  replies owed                         at most 256 a connection (then it is not read);
//	                                       those ready out of turn wait parked in arena
//	                                       buffers, or in the poll buffers they lend
//	  receive backlog                      a throttled connection's bytes that landed
//	                                       before its recv's cancel: at most the receive
//	                                       ring's 32 MiB (arena, or heap when it is dry)
//	metadata view                        a copy of the metadata state (package metaview), and the
//	                                     commit log's entries until the slowest shard has
//	                                     applied them
//	partitions (package partition,       per partition the shard owns (in a cluster every
//	  "Memory")                          node holds a replica of each): resident at rest
//	                                     ~9 KB created and never written (of ~27 KB of
//	                                     heap: an idle group's journal slots stay
//	                                     untouched), ~28.5 KB once written (~34.5 KB on
//	                                     the leader, 27 KB on a single node; ~40 KB of
//	                                     heap), and 24 B an index entry of the segments
//	                                     read lately; no file until first written
//	                                     (partitiondir)
//	partition batch copies, in a          64 MiB   cluster.partition_memory_max / S: a
//	  cluster                                      backup's journal copies until its log
//	                                               wrote them, frames a busy group queued,
//	                                               batches read back for a peer's repair,
//	                                               the cores' repair candidates; plus one
//	                                               group's repair chunk and the ops it
//	                                               needs below it (partition/memory.go)
//	held partition frames                  8 MiB   frames for partitions not created here
//	                                               yet, 2 s at most (partitionhost/heldframes.go)
//
// and once for the node, on shard 0:
//
//	password workers                     2 argon2id runs of 19 MiB at once; at most 1024
//	                                     requests waiting (16 per source address), each
//	                                     a request frame (in the arena) and a password copy
//	metadata                             the state (streams, topics, users, groups), the
//	                                     client table (vsr.ClientsTableMaxDefault, 8192 entries,
//	                                     each with its last reply), one journal entry in
//	                                     flight, and the snapshot being written
//
// So with the defaults a shard's buffers stay under 496 + 256 = 752 MiB, plus its
// connections, partitions' index caches (segment.Config) and the garbage
// collector's headroom over the Go heap (GOGC).
//
// What is resident is less than these bounds: the arena and the heap are resident
// as touched. At rest (groups parked, garbage collected and freed pages returned):
//
//	RSS = R0 + P x C + W x (Wr - C)
//
// R0 is ~18.5 MB (16.9 to 21.0 measured; ~13 MB of it the binary's pages). P counts
// the partitions the node holds, W those written. C and Wr, resident per partition
// created and written: 9 and 28.5 KB on a backup, 9.5 and 34.5 KB on the leader, 8
// and 27 KB on a single node (partition/doc.go "Memory"; BenchmarkPartitionMemory
// in internal/clustertest: 1 to 5% off at 1,000 and 3,000 partitions, on one node
// and three). That is a floor: the Go runtime returns freed pages by itself only
// above about 10% over its heap goal, so a node also keeps the 19 MiB of garbage of
// each recent password check (argon2id; every new node hashes its root user's
// password) and the garbage of its last bursts, up to R0 + 1.1 x (1 + GOGC/100) x
// (H0 + P x heap + index bytes + batch copies), H0 ~4 MB.
//
// Under write load the heap grows to (1 + GOGC/100) times its live size between
// collections: the live heap then counts ~40 KB a written partition and the batch
// copies (bounded as above). 40 partitions written 10 MB each
// (BenchmarkMemoryAfterWrites) left the nodes at 27 to 118 MB resident.
package server

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zeebo/xxh3"

	"github.com/iggy-shard/iggy-shard/config"
	"github.com/iggy-shard/iggy-shard/httpapi"
	"github.com/iggy-shard/iggy-shard/metaview"
	"github.com/iggy-shard/iggy-shard/partition"
	"github.com/iggy-shard/iggy-shard/partitionhost"
	"github.com/iggy-shard/iggy-shard/pollmemory"
	"github.com/iggy-shard/iggy-shard/replicanet"
	"github.com/iggy-shard/iggy-shard/request"
	"github.com/iggy-shard/iggy-shard/segment"
	"github.com/iggy-shard/iggy-shard/shard"
	"github.com/iggy-shard/iggy-shard/tlsterm"
)

// transportCalls is what the calls of Server.Do, a transport other than the
// binary connections, go through.
type transportCalls struct {
	// calls are the shards' inboxes of Do's calls (caller.go).
	calls callInboxes
	// sessions are the credentials whose callers hold a session at shard 0: a
	// call's partition write of one not in it is bound there first
	// (callserve.go).
	sessions *request.CallerSessions
	// replies are the buffers Do lends for poll replies (replybuffers.go).
	replies replyBuffers
	// metaTasks is work for shard 0 from other goroutines (httpserve.go).
	metaTasks metaTaskInbox
}

// Server is a running node: single, or one of a cluster.
type Server struct {
	cfg setup
	log *slog.Logger
	rt  *shard.Runtime
	tls *tlsterm.Terminator // nil when TLS is off
	// replicaTLS terminates [cluster.tls] on tcp_replica and dials peers over it;
	// nil when the replica plane runs plain (its methods do nothing on nil).
	replicaTLS *replicanet.TLS
	// listenAddr is the client address (rt.Addr(), or the TLS listener's), published
	// for shard 0, which may serve a request before Start has stored rt.
	listenAddr atomic.Pointer[net.TCPAddr]
	shardCount int
	startedAt  time.Time
	// partitionNonceSeed starts this boot's partition groups' request nonces
	// (partition.Replication.NonceSeed): random per boot.
	partitionNonceSeed uint64
	// heartbeatInterval is config.Config.HeartbeatInterval with its default applied.
	heartbeatInterval time.Duration

	meta  *metaPlane // touched only by shard 0 once started
	stats partitionhost.Stats
	// cluster is the node's view of its cluster (cluster.go); nil on a single node.
	cluster *clusterState
	// viewSnapshot is the recovered metadata each shard decodes into its view, and
	// viewGenesis the commit log's first entry, where every view starts (package metaview);
	// both are dropped once the shards have started.
	viewSnapshot []byte
	viewGenesis  *metaview.Entry

	// initial holds, per shard, the partitions to open at start.
	initial  [][]partitionhost.Open
	handlers []*handler // each written by its own shard at start; read after stop
	// pollMemories bound the bytes each shard's polls hold (package pollmemory),
	// one per shard, each touched by its shard only.
	pollMemories []*pollmemory.Memory[*job]
	// transport is what the calls of Server.Do go through (caller.go).
	transport transportCalls
	// api is the HTTP API's listener; nil when [http] is disabled.
	api *httpapi.Server
	// httpPort is the HTTP API's bound port, 0 when it is not served: published
	// for the shards' GET_CLUSTER_METADATA, which may run before Start stored api.
	httpPort atomic.Uint32

	// The observability endpoints (metrics.go), and the fsync latencies of the
	// metadata journal they report.
	metricsAddr, pprofAddr net.Addr
	httpServers            []*http.Server
	journalFsyncs          syncedHistogram

	stopOnce sync.Once
	stopErr  error
}

// Start recovers the data directory and serves cfg.TCPAddress until Shutdown.
func Start(cfg config.Config, log *slog.Logger) (*Server, error) {
	return start(setup{Config: cfg}, log)
}

// start is Start with the test hooks of cfg.
func start(cfg setup, log *slog.Logger) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	var replicaCfg *shard.ReplicaConfig
	var replicaTLS *replicanet.TLS
	if cfg.Cluster.Enabled {
		var err error
		if replicaCfg, err = replicanet.Config(&cfg.Cluster); err != nil {
			return nil, err
		}
		// [cluster.tls]: the terminator binds ip:tcp_replica now, so a busy port
		// or an unusable certificate stops the start before anything else.
		if replicaTLS, err = replicanet.NewTLS(&cfg.Cluster, cfg.Cluster.Self(), log); err != nil {
			return nil, err
		}
		replicaTLS.Configure(replicaCfg)
		// In cluster mode the roster is the single source of listener ports: the
		// client listener binds tcp.address's host at the node's ports.tcp
		// (iggy.apache.org/docs/clustering/configuration).
		cfg.TCPAddress = cfg.Cluster.ClientAddress(cfg.TCPAddress)
	}
	if log == nil {
		log = slog.Default()
	}
	for _, w := range cfg.Warnings() {
		log.Warn(w)
	}
	clampSnapshotInterval(&cfg, log)
	if err := os.MkdirAll(cfg.SystemPath, segment.DataDirMode); err != nil {
		return nil, &config.SettingError{Setting: "system.path", Value: cfg.SystemPath, Reason: err.Error()}
	}
	s := &Server{cfg: cfg, log: log, replicaTLS: replicaTLS}
	if cfg.Cluster.Enabled {
		s.cluster = newClusterState(&s.cfg.Cluster)
	}
	s.startedAt = s.now()
	var seed [8]byte
	_, _ = rand.Read(seed[:]) // crypto/rand.Read does not fail (it panics if the kernel cannot)
	s.partitionNonceSeed = binary.LittleEndian.Uint64(seed[:])
	s.heartbeatInterval = cfg.HeartbeatInterval
	if s.heartbeatInterval == 0 {
		s.heartbeatInterval = config.HeartbeatIntervalDefault
	}
	s.shardCount = cfg.ShardCount
	if s.shardCount == 0 {
		s.shardCount = runtime.NumCPU()
	}
	// TLS first: a certificate that cannot be used stops the start before the data
	// directory is touched.
	var tlsListener net.Listener
	var tlsCert tls.Certificate
	if cfg.TLS.Enabled {
		var err error
		if tlsListener, tlsCert, err = listenTLS(&cfg, log); err != nil {
			replicaTLS.Close()
			return nil, err
		}
		s.listenAddr.Store(tlsListener.Addr().(*net.TCPAddr))
	}
	meta, err := openMetaPlane(log, cfg.SystemPath, &cfg, uint64(s.startedAt.UnixMicro()))
	if err != nil {
		if tlsListener != nil {
			tlsListener.Close()
		}
		replicaTLS.Close()
		return nil, err
	}
	s.meta = meta
	s.viewSnapshot = meta.State().AppendSnapshot(nil, meta.Applied().Op)
	s.viewGenesis = &metaview.Entry{}
	s.initial = make([][]partitionhost.Open, s.shardCount)
	s.pollMemories = make([]*pollmemory.Memory[*job], s.shardCount)
	for i := range s.pollMemories {
		s.pollMemories[i] = pollmemory.New[*job](cfg.PollMemoryBytesMax, pollReadBytesMax+int64(cfg.FrameSizeMaxBytes))
	}
	s.handlers = make([]*handler, s.shardCount)
	s.transport.calls.init(s.shardCount)
	s.transport.sessions = request.NewCallerSessions()
	s.transport.replies = newReplyBuffers()
	partitionhost.EachPartition(meta.State(), func(k partition.Key, c partition.Config, createdAt, purgeGeneration uint64) {
		owner := s.ownerOf(k)
		s.initial[owner] = append(s.initial[owner], partitionhost.Open{Key: k, Cfg: c, CreatedAt: createdAt, PurgeGeneration: purgeGeneration})
	})

	var shardClock func() int64
	if cfg.clock != nil {
		shardClock = func() int64 { return int64(cfg.clock().Sub(s.startedAt)) }
	}
	rt, err := shard.Start(shard.Config{
		Clock:         shardClock,
		TCPAddress:    cfg.TCPAddress,
		ListenerOff:   tlsListener != nil,
		ShardCount:    s.shardCount,
		PinCPUs:       cfg.PinCPUs,
		NewHandler:    s.newHandler,
		Logger:        log,
		FrameSizeMax:  cfg.FrameSizeMaxBytes,
		IdleTimeout:   cfg.IdleTimeout,
		BusyPoll:      busyPoll(cfg.BusyPoll),
		InboxCapacity: 4096,
		DiskIO:        true,
		Replica:       replicaCfg,
		// [system.partition]'s pipe pool (config.Partition).
		PipesPerShardMax: cfg.Partition.SplicePipesPerShard,
		PipeSizeBytes:    cfg.Partition.SplicePipeSizeBytes,
		SpliceRing:       cfg.Partition.SpliceRing,
	})
	if err != nil {
		if tlsListener != nil {
			tlsListener.Close()
		}
		meta.Close()
		replicaTLS.Close()
		return nil, err
	}
	s.rt = rt
	if err := replicaTLS.Attach(rt); err != nil {
		s.Shutdown(context.Background())
		return nil, err
	}
	// Every shard's view holds its own copy and position by now: the commit log's
	// entries must be freed as the slowest view passes them, not kept from here.
	s.viewSnapshot, s.viewGenesis = nil, nil
	if tlsListener != nil {
		if s.tls, err = serveTLS(tlsListener, tlsCert, rt, log); err != nil {
			tlsListener.Close()
			s.Shutdown(context.Background())
			return nil, err
		}
	} else {
		s.listenAddr.Store(rt.Addr())
	}
	if err := s.serveHTTP(); err != nil {
		_ = s.Shutdown(context.Background())
		return nil, err
	}
	if err := s.serveAPI(); err != nil {
		_ = s.Shutdown(context.Background())
		return nil, err
	}
	log.Info("listening", "address", s.Addr().String(), "tls", cfg.TLS.Enabled, "shards", s.shardCount, "system_path", cfg.SystemPath)
	if s.cluster != nil {
		log.Info("cluster node", "cluster", cfg.Cluster.Name, "replica_id", cfg.Cluster.ReplicaID, "replicas", len(cfg.Cluster.Nodes),
			"replica_address", s.replicaAddr().String(), "auth", cfg.Cluster.Auth.Enabled, "tls", cfg.Cluster.TLS.Enabled)
	}
	return s, nil
}

// replicaAddr is the address the replica plane listens on: the TLS terminator's
// under [cluster.tls], the runtime's otherwise.
func (s *Server) replicaAddr() *net.TCPAddr {
	if s.replicaTLS != nil {
		return s.replicaTLS.Addr()
	}
	return s.rt.ReplicaAddr()
}

// Addr is the address clients connect to.
func (s *Server) Addr() *net.TCPAddr { return s.listenAddr.Load() }

// Done is closed when the server has stopped (after Shutdown, or on a fatal error).
func (s *Server) Done() <-chan struct{} { return s.rt.Done() }

// Err is the fatal error that stopped the runtime, once Done is closed.
func (s *Server) Err() error { return s.rt.Err() }

// Shutdown stops accepting, sends every connection what it is owed, then makes
// every partition and the metadata journal durable.
func (s *Server) Shutdown(ctx context.Context) error {
	s.stopOnce.Do(func() {
		s.stopAPI(ctx)
		s.stopHTTP(ctx)
		if s.tls != nil {
			s.tls.Close() // no new sessions; those open end as their shards close them
		}
		s.replicaTLS.Close()
		err := s.rt.Shutdown(ctx)
		<-s.rt.Done()
		if s.tls != nil {
			err = errors.Join(err, s.tls.Wait(ctx))
		}
		err = errors.Join(err, s.replicaTLS.Wait(ctx))
		// The shards have exited: their stores are no longer touched by anyone else.
		for _, h := range s.handlers {
			if h != nil {
				h.stopped = true
			}
		}
		for _, h := range s.handlers {
			if h == nil {
				continue
			}
			if closed, closeErr := h.owned.Closed(); closed {
				err = errors.Join(err, closeErr)
			}
		}
		if h := s.handlers[0]; h != nil && h.meta != nil {
			h.meta.Close()
		}
		err = errors.Join(err, s.meta.Close())
		s.stopErr = err
		s.log.Info("stopped", "err", err)
	})
	return s.stopErr
}

// ownerOf is the shard that owns a partition: a hash of its ids, so it needs no
// table and every shard computes the same answer. The data lives under system.path
// whatever the owner, so a restart with another shard count only moves ownership.
func (s *Server) ownerOf(k partition.Key) int {
	var b [12]byte
	putU32(b[0:], k.StreamID)
	putU32(b[4:], k.TopicID)
	putU32(b[8:], k.PartitionID)
	return int(xxh3.Hash(b[:]) % uint64(s.shardCount))
}

func putU32(b []byte, v uint32) {
	b[0], b[1], b[2], b[3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
}

func (s *Server) String() string { return fmt.Sprintf("iggy-shard server on %s", s.Addr()) }

// busyPoll maps the setting, where 0 means off, to the runtime's, where 0 means default.
func busyPoll(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

// partitionFilesOfShard is a shard's budget of open partition files: the node's
// (half the open-file limit, segment.FilesBudget) split evenly over its shards,
// each one's store keeping within its share.
func (s *Server) partitionFilesOfShard() int {
	if s.cfg.openFilesMax > 0 {
		return max(s.cfg.openFilesMax/s.shardCount, 1)
	}
	return segment.FilesBudget(s.shardCount)
}
