package replicanet

import (
	"net"
	"strconv"

	"github.com/iggy-shard/iggy-shard/config"
	"github.com/iggy-shard/iggy-shard/replica"
	"github.com/iggy-shard/iggy-shard/shard"
	"github.com/iggy-shard/iggy-shard/wire"
)

// Config builds the runtime's replica plane from the cluster section:
// this node listens on its roster ip and tcp_replica port and dials the others'.
func Config(c *config.Cluster) (*shard.ReplicaConfig, error) {
	rc := &shard.ReplicaConfig{
		Handshake: replica.HandshakeConfig{
			Cluster:      wire.ClusterID(c.Name),
			Self:         uint8(c.ReplicaID),
			ReplicaCount: uint8(len(c.Nodes)),
		},
		PeerAddresses:     make([]string, len(c.Nodes)),
		ReconnectPeriod:   c.MessageBus.ReconnectPeriod,
		PeerQueueCapacity: c.MessageBus.PeerQueueCapacity,
		// The partition groups' frames have their own budget (shard's send classes).
		PartitionQueueCapacity: c.MessageBus.PartitionQueueCapacity,
		MessageSizeMax:         c.MessageBus.MaxMessageSizeBytes,
	}
	for i := range c.Nodes {
		n := &c.Nodes[i]
		addr := net.JoinHostPort(n.IP, strconv.Itoa(int(n.Ports.TCPReplica)))
		rc.PeerAddresses[n.ReplicaID] = addr
		if n.ReplicaID == c.ReplicaID {
			rc.ListenAddress = addr
		}
	}
	if c.Auth.Enabled {
		auth, err := wire.NewHandshakeAuth([]byte(c.Auth.SharedSecret), []byte(c.Auth.PreviousSharedSecret))
		if err != nil {
			return nil, &config.SettingError{Setting: "cluster.auth.shared_secret", Value: "(hidden)", Reason: err.Error()}
		}
		rc.Handshake.Auth = &auth
	}
	return rc, nil
}
