package shard

import (
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/iggy-shard/iggy-shard/replica"
	"github.com/iggy-shard/iggy-shard/wire"
)

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
	// (message_bus.reconnect_period), and the longest wait after refused connects,
	// which start at ReplicaRedialDelayMin and double. Default 5 s.
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
