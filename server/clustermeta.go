package server

import (
	"net/netip"
	"time"

	"github.com/iggy-shard/iggy-shard/config"
	"github.com/iggy-shard/iggy-shard/wire"
)

// clusterHealth is what a clustered node knows of its peers at one instant, the
// input of GetClusterMetadata: which replica leads the metadata group (the
// metadata primary in normal status), and when each replica was last heard from on
// the replica plane. The replica plane keeps it; the reply is a pure function of
// it, the roster and the asking client's address.
type clusterHealth struct {
	self uint8
	// leader is the metadata primary; leaderKnown is false during a view change
	// or while this node recovers, and then no node is reported as leader, so
	// the SDKs poll the metadata until one is (go-sdk-behaviour: 250 ms for up
	// to 5 s) instead of redirecting to a node that cannot admit writes.
	leader      uint8
	leaderKnown bool
	// lastHeardNs holds, by replica id, the runtime clock of the last frame from
	// that replica; 0 for never.
	lastHeardNs []int64
	// connected holds, by replica id, whether a replica connection to it is up
	// (handshake done); nil when not known.
	connected []bool
	nowNs     int64
	// heartbeatTimeout is cluster.heartbeat_timeout: a replica heard from within
	// it is healthy, as a backup deems its primary alive within it.
	heartbeatTimeout time.Duration
}

// status is the wire status of replica id: this node is healthy (it answers);
// another one is healthy when heard from within the heartbeat timeout, or while
// its replica connection is up: an idle backup sends nothing of its own (backups
// answer, only the primary heartbeats), while a node that died loses its
// connection (a kill closes it; a hung peer that reads nothing is closed after
// the runtime's send timeout). Unreachable otherwise.
func (h *clusterHealth) status(id uint8) uint8 {
	if id == h.self || int(id) < len(h.connected) && h.connected[id] {
		return wire.ClusterNodeHealthy
	}
	if int(id) < len(h.lastHeardNs) {
		if heard := h.lastHeardNs[id]; heard != 0 && h.nowNs-heard <= int64(h.heartbeatTimeout) {
			return wire.ClusterNodeHealthy
		}
	}
	return wire.ClusterNodeUnreachable
}

// appendClusterMetadataOf answers GetClusterMetadata on a clustered node: every
// roster node with its name, the client endpoint advertised to a client at peer
// (config.ClusterNode.AdvertisedFor: the longest matching selector, then
// advertised_address, then ip; iggy.apache.org/docs/clustering/configuration), its
// role and its status. The SDKs redial exactly the advertised address and the TCP
// port (iggy.apache.org/docs/clustering/client-failover). Each transport's port
// is the roster's when the node serves it, else 0, the reference's answer for a
// transport a node does not serve (config.Config.AdvertisedPorts: QUIC and
// WebSocket never, HTTP when [http] is enabled).
func appendClusterMetadataOf(dst []byte, cfg *config.Config, peer netip.Addr, health *clusterHealth) []byte {
	cl := &cfg.Cluster
	m := wire.ClusterMetadata{Name: []byte(cl.Name), Nodes: make([]wire.ClusterNode, len(cl.Nodes))}
	for i := range cl.Nodes {
		node := &cl.Nodes[i]
		ports := cfg.AdvertisedPorts(node.Ports)
		id := uint8(node.ReplicaID)
		role := wire.ClusterRoleFollower
		if health.leaderKnown && id == health.leader {
			role = wire.ClusterRoleLeader
		}
		m.Nodes[i] = wire.ClusterNode{
			Name:          []byte(node.Name),
			IP:            []byte(node.AdvertisedFor(peer)),
			TCPPort:       ports.TCP,
			QUICPort:      ports.QUIC,
			HTTPPort:      ports.HTTP,
			WebSocketPort: ports.WebSocket,
			Role:          role,
			Status:        health.status(id),
		}
	}
	return m.Append(dst)
}
