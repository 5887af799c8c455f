package server

import (
	"net/netip"
	"sync/atomic"

	"github.com/iggy-shard/iggy-shard/config"
	"github.com/iggy-shard/iggy-shard/partition"
	"github.com/iggy-shard/iggy-shard/shard"
	"github.com/iggy-shard/iggy-shard/vsr"
	"github.com/iggy-shard/iggy-shard/wire"
)

// A clustered node (cluster.enabled) runs the runtime's replica plane
// (shard.ReplicaConfig, from the [cluster] and [message_bus] sections) and its
// metadata plane as one replica of the roster's group (metahost/ticks.go). Frames
// arrive on the shard that owns the peer's connection; those of the metadata
// group, and the session-forwarding frames, which carry no group, go to shard 0 on
// the control lane between shards (shard.PostControl), served before the partition
// groups' frames and anything else waiting there, and come back the same way.
// Every frame tells the node that its sender is alive, for GetClusterMetadata.

// clusterState is what every shard may read of the cluster: when each replica was
// last heard from and who leads the metadata group.
type clusterState struct {
	cfg  *config.Cluster
	self uint8
	// lastHeardNs[id] is the runtime clock of the last frame from replica id.
	lastHeardNs []atomic.Int64
	// leader is 1 + the metadata primary while this replica is in normal status,
	// 0 otherwise; view and status are the metadata replica's, for tests and logs.
	leader atomic.Int32
	view   atomic.Uint32
	status atomic.Uint32
}

func newClusterState(cfg *config.Cluster) *clusterState {
	return &clusterState{cfg: cfg, self: uint8(cfg.ReplicaID), lastHeardNs: make([]atomic.Int64, len(cfg.Nodes))}
}

// health is the input of GetClusterMetadata at nowNs.
func (c *clusterState) health(nowNs int64) *clusterHealth {
	h := &clusterHealth{self: c.self, nowNs: nowNs, heartbeatTimeout: c.cfg.HeartbeatTimeout,
		lastHeardNs: make([]int64, len(c.lastHeardNs))}
	for i := range c.lastHeardNs {
		h.lastHeardNs[i] = c.lastHeardNs[i].Load()
	}
	if l := c.leader.Load(); l > 0 {
		h.leader, h.leaderKnown = uint8(l-1), true
	}
	return h
}

// ServeReplica implements shard.ReplicaHandler: a frame from a peer, on the shard
// owning its connection.
func (h *handler) ServeReplica(s *shard.Shard, f *shard.ReplicaFrame) {
	cl := h.srv.cluster
	if cl == nil || int(f.Peer) >= len(cl.lastHeardNs) {
		return
	}
	cl.lastHeardNs[f.Peer].Store(s.NowNs())
	h.catchUpTicks()
	group, ok := wire.FrameGroup(f.Header)
	if !ok {
		return // validated by the runtime: consensus traffic always has a group
	}
	if group != wire.MetadataGroup {
		h.routePartitionFrame(f, group)
		return
	}
	in := h.retainInbound(f)
	if h.index == 0 {
		h.metaFrameIn(in)
		return
	}
	h.postControl(0, shard.Message{Kind: msgReplicaFrame, Payload: in})
}

// clusterMetadataFor answers GetClusterMetadata for a client at peer.
func (h *handler) clusterMetadataFor(dst []byte, peer netip.AddrPort) []byte {
	cl := h.srv.cluster
	health := cl.health(h.shard.NowNs())
	health.connected = make([]bool, len(health.lastHeardNs))
	for i := range health.connected {
		health.connected[i] = h.srv.rt.ReplicaConnected(uint8(i))
	}
	return appendClusterMetadataOf(dst, &h.srv.cfg.Config, peer.Addr().Unmap(), health)
}

// replicaStats is the runtime's replica counters, for tests and logs.
func (s *Server) replicaStats() shard.ReplicaStats { return s.rt.ReplicaStats() }

// metadataLeader reports the metadata primary this node knows of.
func (s *Server) metadataLeader() (uint8, bool) {
	if s.cluster == nil {
		return 0, false
	}
	l := s.cluster.leader.Load()
	return uint8(l - 1), l > 0
}

// partitionReplication places the shard's partitions in their groups of the
// roster: each partition a group of as many replicas as nodes, on its owner shard
// of every node, its frames on that shard's replica connections.
func (s *Server) partitionReplication(h *handler) partition.Replication {
	c := &s.cfg.Cluster
	r := partition.Replication{
		Cluster:      wire.ClusterID(c.Name),
		ReplicaID:    uint8(c.ReplicaID),
		ReplicaCount: uint8(len(c.Nodes)),
		Outbox:       h,
	}
	// The cluster section's timers, as for the metadata group: with the package's
	// own defaults a partition's backups elected only after the reference's 5 s
	// heartbeat timeout, whatever heartbeat_timeout said, and the metadata leader
	// answered every send 58 meanwhile.
	r.Timing = c.Timing()
	if s.cfg.clusterTiming != nil {
		r.Timing = *s.cfg.clusterTiming
	}
	// A partition's core keeps candidates per repair chunk entry: the package's
	// smaller chunk (see partition.Replication).
	r.Timing.RepairChunkMax = min(r.Timing.RepairChunkMax, config.PartitionRepairChunkMax)
	r.BodyBudgetBytes = c.PartitionMemoryOfShard(s.shardCount)
	// Off for the first roll of an upgrade from a binary before incarnation tags.
	r.UntaggedGroups = !c.PartitionIncarnationTags
	// A late answer to a request of the node's previous boot is stale, not taken
	// for one of this boot's (vsr.CoreConfig.NonceSeed).
	r.NonceSeed = s.partitionNonceSeed
	return r
}

// SendReplica implements partition.Outbox: a partition group's frame leaves on
// the replica connection to its peer, a prepare forwarded from the frame it came
// in when it can (framelend.go), else copied; dropped frames are retransmitted.
func (h *handler) SendReplica(_ partition.Key, m *vsr.Message) {
	if !h.lender.forward(m) {
		h.copyReplica(m)
	}
}

// copyReplica sends m on the replica connection to its peer, copied.
func (h *handler) copyReplica(m *vsr.Message) {
	err := h.shard.SendReplica(m.To, m.Header.Bytes()[:], m.Body)
	switch err {
	case nil, shard.ErrReplicaPeerDown, shard.ErrReplicaQueueFull, shard.ErrReplicaBuffersExhausted:
	default:
		h.log.Error("partition replica frame not sent", "to", m.To, "command", m.Header.Command.String(), "err", err)
	}
}

// routePartitionFrame steps a partition group's frame on the partition's owner
// shard: here, or retained and posted there (released back here after).
func (h *handler) routePartitionFrame(f *shard.ReplicaFrame, group uint64) {
	stream, topic, id, ok := wire.SplitPartitionGroup(group)
	if !ok {
		return
	}
	k := partition.Key{StreamID: stream, TopicID: topic, PartitionID: id}
	if owner := h.srv.ownerOf(k); owner != h.index {
		h.post(owner, shard.Message{Kind: msgReplicaPartition, Payload: h.retainInbound(f)})
		return
	}
	h.lender.frame = f // the store and the forward may keep it (framelend.go)
	h.stepPartition(k, f.Peer, f.Header, f.Body)
	h.lender.endStep()
}

// stepPartitionFrame steps a frame another shard received for a partition this
// shard owns, and gives it back.
func (h *handler) stepPartitionFrame(in *replicaInbound) {
	f := &in.frame
	h.lender.in = in // the store may keep it (framelend.go)
	if group, ok := wire.FrameGroup(f.Header); ok {
		if stream, topic, id, ok := wire.SplitPartitionGroup(group); ok {
			h.stepPartition(partition.Key{StreamID: stream, TopicID: topic, PartitionID: id}, f.Peer, f.Header, f.Body)
		}
	}
	h.lender.endStep()
}

func (h *handler) stepPartition(k partition.Key, peer uint8, hdr *wire.GenericHeader, body []byte) {
	h.catchUpView() // a partition a commit just created is opened by the view
	h.owned.EnsureCreated(k)
	if !h.owned.Store.Has(k) && h.owned.HoldFrame(k, peer, hdr, body) {
		return // until a commit brings the partition (partitionhost/heldframes.go)
	}
	h.owned.StepFrame(k, peer, hdr, body)
}

// retainInbound keeps a frame for another shard in a record from this shard's free
// list (records come back with msgReplicaRelease), so a frame crossing shards
// allocates nothing once the list is warm.
func (h *handler) retainInbound(f *shard.ReplicaFrame) *replicaInbound {
	var in *replicaInbound
	if n := len(h.consensus.inboundFree); n > 0 {
		in = h.consensus.inboundFree[n-1]
		h.consensus.inboundFree = h.consensus.inboundFree[:n-1]
	} else {
		in = new(replicaInbound)
	}
	in.frame, in.owner = f.Retain(), h.index
	return in
}

// releaseInbound gives a retained frame's buffer back and keeps its record; on
// the shard that retained it.
func (h *handler) releaseInbound(in *replicaInbound) {
	in.frame.Release()
	h.consensus.inboundFree = append(h.consensus.inboundFree, in)
}
