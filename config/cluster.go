package config

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/iggy-shard/iggy-shard/vsr"
)

// Cluster is the [cluster] section, with Apache Iggy's key names and rules
// (iggy.apache.org/docs/clustering/configuration and /docs/clustering/security;
// the defaults of apache/iggy core/server/config.toml). Validate refuses what the
// reference refuses at boot, naming the rule.
//
// Server.Start runs a node of the cluster from it (cluster.go).
type Cluster struct {
	Enabled bool
	// Name is hashed into the cluster id every replica-plane frame carries; nodes
	// of different names never talk.
	Name string
	// ReplicaID picks this node's entry of Nodes (--replica-id).
	ReplicaID int

	// Consensus timing; each rounds down to whole 10 ms ticks, at least one.
	HeartbeatTimeout                   time.Duration
	CommitBroadcastInterval            time.Duration
	PrepareRetransmitInterval          time.Duration
	ViewChangeRetransmitInterval       time.Duration
	ViewChangeStatusTimeout            time.Duration
	RequestStartViewRetransmitInterval time.Duration
	ViewProbeAttemptsMax               int
	RepairRetryInterval                time.Duration
	RepairChunkMax                     int

	// PartitionMemoryMaxBytes (ours: partition_memory_max,
	// IGGY_CLUSTER_PARTITION_MEMORY_MAX, --partition-memory-max) bounds the node's
	// copies of partition batches, divided evenly over its shards
	// (partition.Replication.BodyBudgetBytes): a backup's journal copies until its
	// log has written them, frames a busy group queued, batches read back for a
	// peer's repair. Only a cluster makes such copies (a single node's batches are
	// its requests' own buffers), hence [cluster]. A prepare whose copy would pass
	// it is dropped and retransmitted. 0 = 64 MiB a shard. See Memory in the
	// package doc.
	PartitionMemoryMaxBytes int64

	// PartitionIncarnationTags (ours: partition_incarnation_tags,
	// IGGY_CLUSTER_PARTITION_INCARNATION_TAGS; true by default) makes the node's
	// partition groups send group ids tagged with their partition's incarnation,
	// which keep a deleted partition's group apart from the one recreated under its
	// ids. Binaries before the tag send untagged ids and refuse tagged ones, so an
	// upgrade from them is two rolling restarts: the first with false (the node
	// sends untagged ids, partition.Replication.UntaggedGroups, and still checks a
	// tagged frame's tag), the second with true. Every node takes untagged ids
	// (partition/incarnation.go).
	PartitionIncarnationTags bool

	Auth       ClusterAuth
	TLS        ClusterTLS
	MessageBus MessageBus
	Nodes      []ClusterNode
}

// ClusterAuth is [cluster.auth]: the pre-shared key of the replica handshake.
type ClusterAuth struct {
	Enabled bool
	// SharedSecret signs every handshake MAC; PreviousSharedSecret is accepted for
	// verification only, during a rotation.
	SharedSecret, PreviousSharedSecret string
}

// ClusterTLS is [cluster.tls]: TLS 1.3 (ALPN iggy-replica) around replica
// connections.
type ClusterTLS struct {
	Enabled, SelfSigned       bool
	CertFile, KeyFile, CAFile string
}

// MessageBus is [message_bus]: the replica connections' limits.
type MessageBus struct {
	MaxMessageSizeBytes uint32
	// PeerQueueCapacity bounds the frames queued to each peer for the metadata
	// group and the handshakes (the control class, shard.ReplicaConfig).
	PeerQueueCapacity int
	// PartitionQueueCapacity (ours: partition_queue_capacity,
	// IGGY_MESSAGE_BUS_PARTITION_QUEUE_CAPACITY, --partition-queue-capacity)
	// bounds the partition groups' frames queued to each peer, apart, so that they
	// never crowd out the metadata group's; a frame beyond it is dropped and its
	// group retransmits (back-pressure). 0 = PeerQueueCapacity.
	PartitionQueueCapacity int
	ReconnectPeriod        time.Duration
}

// PartitionRepairChunkMax is the most ops a partition group repairs in one go
// (partition.Replication's smaller chunk): its frames leave at once, so a
// partition queue must hold more.
const PartitionRepairChunkMax = 32

// replicaQueueCapacityMax is the runtime's bound on a class's queue to a peer.
const replicaQueueCapacityMax = 1 << 16

// ClusterNode is one [[cluster.nodes]] entry; the roster is meant to be
// byte-identical on every node.
type ClusterNode struct {
	Name string
	// IP is the roster address replicas dial: a literal IP, never a hostname.
	IP        string
	ReplicaID int
	Ports     NodePorts
	// AdvertisedAddress is what clients are told (cluster metadata, redirects)
	// when no selector of AdvertisedAddresses matches them; IP when empty.
	AdvertisedAddress   string
	AdvertisedAddresses []AdvertisedSelector
}

// NodePorts are a node's listener ports; 0 means the entry has none.
type NodePorts struct {
	TCP, QUIC, HTTP, WebSocket, TCPReplica uint16
}

// AdvertisedSelector hands clients from ClientCIDR another address.
type AdvertisedSelector struct {
	ClientCIDR netip.Prefix
	Address    string
}

// Cluster limits of the reference.
const (
	ClusterTick                = 10 * time.Millisecond
	clusterRosterMax           = 255
	clusterSecretBytesMin      = 32
	advertisedSelectorsPerNode = 16
)

// DefaultCluster is the reference's shipped [cluster] and [message_bus].
func DefaultCluster() Cluster {
	return Cluster{
		Name:                               "iggy-cluster",
		HeartbeatTimeout:                   5 * time.Second,
		CommitBroadcastInterval:            500 * time.Millisecond,
		PrepareRetransmitInterval:          250 * time.Millisecond,
		ViewChangeRetransmitInterval:       500 * time.Millisecond,
		ViewChangeStatusTimeout:            5 * time.Second,
		RequestStartViewRetransmitInterval: time.Second,
		ViewProbeAttemptsMax:               5,
		RepairRetryInterval:                time.Second,
		RepairChunkMax:                     128,
		PartitionIncarnationTags:           true,
		MessageBus: MessageBus{
			MaxMessageSizeBytes: 64 << 20,
			PeerQueueCapacity:   256,
			ReconnectPeriod:     5 * time.Second,
		},
	}
}

// Ticks converts a timing setting to whole consensus ticks, as the reference does:
// rounded down, at least one.
func Ticks(d time.Duration) int64 { return max(1, int64(d/ClusterTick)) }

// Timing is the section's consensus timers in cluster ticks.
func (c *Cluster) Timing() vsr.Timing {
	ticks := func(d time.Duration) uint64 { return uint64(Ticks(d)) }
	return vsr.Timing{
		HeartbeatTimeoutTicks:           ticks(c.HeartbeatTimeout),
		CommitBroadcastIntervalTicks:    ticks(c.CommitBroadcastInterval),
		PrepareRetransmitIntervalTicks:  ticks(c.PrepareRetransmitInterval),
		ViewChangeRetransmitTicks:       ticks(c.ViewChangeRetransmitInterval),
		ViewChangeStatusTimeoutTicks:    ticks(c.ViewChangeStatusTimeout),
		RequestStartViewRetransmitTicks: ticks(c.RequestStartViewRetransmitInterval),
		ViewProbeAttemptsMax:            c.ViewProbeAttemptsMax,
		RepairRetryIntervalTicks:        ticks(c.RepairRetryInterval),
		RepairChunkMax:                  c.RepairChunkMax,
	}
}

// Self is this node's roster entry (Validate checked that --replica-id names one).
func (c *Cluster) Self() *ClusterNode {
	for i := range c.Nodes {
		if n := &c.Nodes[i]; n.ReplicaID == c.ReplicaID {
			return n
		}
	}
	return nil
}

// ClientAddress is the client listener of this node: tcpAddress's host (Validate
// checked it is host:port) at the roster's TCP port.
func (c *Cluster) ClientAddress(tcpAddress string) string {
	host, _, _ := net.SplitHostPort(tcpAddress)
	if n := c.Self(); n != nil {
		return net.JoinHostPort(host, strconv.Itoa(int(n.Ports.TCP)))
	}
	return tcpAddress
}

// Validate applies the reference's boot-time rules to an enabled cluster section
// (a disabled one is inert, but for the secret's length, which the reference
// checks whenever the cluster is enabled).
func (c *Cluster) Validate() error {
	if !c.Enabled {
		return nil
	}
	fail := func(setting, value, rule string) error {
		return &SettingError{Setting: "cluster." + setting, Value: value, Reason: rule}
	}
	if c.Name == "" {
		return fail("name", "", "must not be empty: it is the cluster's identity on disk and on the wire")
	}
	timings := []struct {
		key string
		d   time.Duration
	}{
		{"heartbeat_timeout", c.HeartbeatTimeout},
		{"commit_broadcast_interval", c.CommitBroadcastInterval},
		{"prepare_retransmit_interval", c.PrepareRetransmitInterval},
		{"view_change_retransmit_interval", c.ViewChangeRetransmitInterval},
		{"view_change_status_timeout", c.ViewChangeStatusTimeout},
		{"request_start_view_retransmit_interval", c.RequestStartViewRetransmitInterval},
		{"repair_retry_interval", c.RepairRetryInterval},
	}
	for _, t := range timings {
		if t.d <= 0 {
			return fail(t.key, t.d.String(), "every duration must be nonzero (0, disabled and unlimited are refused)")
		}
	}
	if c.HeartbeatTimeout < 2*time.Second || c.HeartbeatTimeout < 4*c.CommitBroadcastInterval {
		return fail("heartbeat_timeout", c.HeartbeatTimeout.String(),
			"must be at least 2s and at least 4x commit_broadcast_interval ("+c.CommitBroadcastInterval.String()+")")
	}
	if c.ViewChangeStatusTimeout < 4*c.ViewChangeRetransmitInterval {
		return fail("view_change_status_timeout", c.ViewChangeStatusTimeout.String(),
			"must be at least 4x view_change_retransmit_interval ("+c.ViewChangeRetransmitInterval.String()+")")
	}
	if c.ViewProbeAttemptsMax < 1 || c.ViewProbeAttemptsMax > 100 {
		return fail("view_probe_attempts_max", strconv.Itoa(c.ViewProbeAttemptsMax), "must be between 1 and 100")
	}
	if c.RepairChunkMax < 1 || c.RepairChunkMax > 1024 || c.RepairChunkMax >= c.MessageBus.PeerQueueCapacity {
		return fail("repair_chunk_max", strconv.Itoa(c.RepairChunkMax),
			"must be between 1 and 1024 and below message_bus.peer_queue_capacity ("+strconv.Itoa(c.MessageBus.PeerQueueCapacity)+")")
	}
	if c.MessageBus.PeerQueueCapacity < 1 || c.MessageBus.PeerQueueCapacity > replicaQueueCapacityMax {
		return &SettingError{Setting: "message_bus.peer_queue_capacity", Value: strconv.Itoa(c.MessageBus.PeerQueueCapacity), Reason: "must be between 1 and 65536"}
	}
	if n := c.MessageBus.PartitionQueueCapacity; n != 0 && (n <= PartitionRepairChunkMax || n > replicaQueueCapacityMax) {
		return &SettingError{Setting: "message_bus.partition_queue_capacity", Value: strconv.Itoa(n),
			Reason: "must be 0 (as message_bus.peer_queue_capacity) or between 33 and 65536: a partition group's repair sends 32 frames at once"}
	}
	if c.MessageBus.MaxMessageSizeBytes < 1<<20 {
		return &SettingError{Setting: "message_bus.max_message_size", Value: strconv.FormatUint(uint64(c.MessageBus.MaxMessageSizeBytes), 10), Reason: "must be at least 1 MiB"}
	}
	if c.MessageBus.ReconnectPeriod <= 0 {
		return &SettingError{Setting: "message_bus.reconnect_period", Value: c.MessageBus.ReconnectPeriod.String(), Reason: "must be nonzero"}
	}
	if err := c.Auth.validate(); err != nil {
		return err
	}
	if err := c.TLS.validate(c.Auth.Enabled); err != nil {
		return err
	}
	return c.validateRoster()
}

func (a *ClusterAuth) validate() error {
	for _, s := range []struct{ key, v string }{{"shared_secret", a.SharedSecret}, {"previous_shared_secret", a.PreviousSharedSecret}} {
		if s.v != "" && len(s.v) < clusterSecretBytesMin {
			return &SettingError{Setting: "cluster.auth." + s.key, Value: "(hidden)",
				Reason: fmt.Sprintf("must be at least %d bytes (of CSPRNG output), %d given", clusterSecretBytesMin, len(s.v))}
		}
	}
	if a.Enabled && a.SharedSecret == "" {
		return &SettingError{Setting: "cluster.auth.shared_secret", Value: "", Reason: "must be set when cluster.auth.enabled (IGGY_CLUSTER_AUTH_SHARED_SECRET)"}
	}
	if a.PreviousSharedSecret != "" && a.PreviousSharedSecret == a.SharedSecret {
		return &SettingError{Setting: "cluster.auth.previous_shared_secret", Value: "(hidden)", Reason: "must differ from shared_secret (a rotation to the same key is a no-op)"}
	}
	return nil
}

func (t *ClusterTLS) validate(authEnabled bool) error {
	if !t.Enabled {
		return nil
	}
	if !authEnabled {
		return &SettingError{Setting: "cluster.tls.enabled", Value: "true",
			Reason: "requires cluster.auth.enabled: replica TLS authenticates only the acceptor, the PSK handshake the peer"}
	}
	if t.SelfSigned {
		return nil
	}
	for _, f := range []struct{ key, v string }{{"cert_file", t.CertFile}, {"key_file", t.KeyFile}, {"ca_file", t.CAFile}} {
		if f.v == "" {
			return &SettingError{Setting: "cluster.tls." + f.key, Value: "", Reason: "required in CA mode (self_signed = false)"}
		}
	}
	return nil
}

func (c *Cluster) validateRoster() error {
	n := len(c.Nodes)
	if n == 0 {
		return &SettingError{Setting: "cluster.nodes", Value: "", Reason: "an enabled cluster needs its roster"}
	}
	if n > clusterRosterMax {
		return &SettingError{Setting: "cluster.nodes", Value: strconv.Itoa(n), Reason: "rosters of more than 255 replicas are unsupported"}
	}
	names := map[string]bool{}
	ids := map[int]bool{}
	endpoints := map[string]int{}
	for i := range c.Nodes {
		node := &c.Nodes[i]
		key := func(field string) string { return fmt.Sprintf("cluster.nodes[%d].%s", i, field) }
		if node.Name == "" {
			return &SettingError{Setting: key("name"), Value: "", Reason: "must not be empty"}
		}
		if names[node.Name] {
			return &SettingError{Setting: key("name"), Value: node.Name, Reason: "must be unique within the roster"}
		}
		names[node.Name] = true
		ip, err := netip.ParseAddr(node.IP)
		if err != nil {
			return &SettingError{Setting: key("ip"), Value: node.IP, Reason: "must be a literal IPv4 or IPv6 address (replicas dial it; hostnames are refused)"}
		}
		if node.ReplicaID < 0 || node.ReplicaID >= n || ids[node.ReplicaID] {
			return &SettingError{Setting: key("replica_id"), Value: strconv.Itoa(node.ReplicaID),
				Reason: fmt.Sprintf("must be unique and below the roster size %d (ids run from 0)", n)}
		}
		ids[node.ReplicaID] = true
		if node.Ports.TCPReplica == 0 {
			return &SettingError{Setting: key("ports.tcp_replica"), Value: "0", Reason: "is required and must not be 0: it carries the consensus traffic"}
		}
		if node.Ports.TCP == 0 {
			return &SettingError{Setting: key("ports.tcp"), Value: "0", Reason: "is required: TCP is served, and in cluster mode the roster is its only port"}
		}
		for _, p := range []uint16{node.Ports.TCP, node.Ports.QUIC, node.Ports.HTTP, node.Ports.WebSocket, node.Ports.TCPReplica} {
			if p == 0 {
				continue
			}
			ep := netip.AddrPortFrom(ip, p).String()
			if other, taken := endpoints[ep]; taken && other != i {
				return &SettingError{Setting: key("ports"), Value: ep, Reason: fmt.Sprintf("already claimed by cluster.nodes[%d]", other)}
			} else if taken {
				return &SettingError{Setting: key("ports"), Value: ep, Reason: "two transports of the entry share it"}
			}
			endpoints[ep] = i
		}
		if node.AdvertisedAddress != "" && !validAdvertised(node.AdvertisedAddress) {
			return &SettingError{Setting: key("advertised_address"), Value: node.AdvertisedAddress,
				Reason: "must be a literal IP or an RFC 1123 hostname, without a port or a trailing dot"}
		}
		if len(node.AdvertisedAddresses) > advertisedSelectorsPerNode {
			return &SettingError{Setting: key("advertised_addresses"), Value: strconv.Itoa(len(node.AdvertisedAddresses)), Reason: "at most 16 selectors per node"}
		}
		seen := map[netip.Prefix]bool{}
		for k, sel := range node.AdvertisedAddresses {
			skey := fmt.Sprintf("cluster.nodes[%d].advertised_addresses[%d]", i, k)
			if !sel.ClientCIDR.IsValid() {
				return &SettingError{Setting: skey + ".client_cidr", Value: "", Reason: "must be a CIDR such as 10.0.0.0/16"}
			}
			if m := sel.ClientCIDR.Masked(); seen[m] {
				return &SettingError{Setting: skey + ".client_cidr", Value: sel.ClientCIDR.String(), Reason: "duplicates another selector of the node (compared truncated)"}
			} else {
				seen[m] = true
			}
			if !validAdvertised(sel.Address) {
				return &SettingError{Setting: skey + ".address", Value: sel.Address,
					Reason: "must be a literal IP or an RFC 1123 hostname, without a port or a trailing dot"}
			}
		}
	}
	if c.ReplicaID < 0 || c.ReplicaID >= n {
		return &SettingError{Setting: "--replica-id", Value: strconv.Itoa(c.ReplicaID), Reason: fmt.Sprintf("must name an entry of the roster (0..%d)", n-1)}
	}
	return nil
}

// validAdvertised reports whether a is a literal IP or an RFC 1123 hostname.
func validAdvertised(a string) bool {
	if _, err := netip.ParseAddr(a); err == nil {
		return true
	}
	if a == "" || len(a) > 253 || strings.HasSuffix(a, ".") {
		return false
	}
	for _, label := range strings.Split(a, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-') {
				return false
			}
		}
	}
	return true
}

// AdvertisedFor is the address a client at peer is told for the node: the selector
// with the longest matching prefix of peer's family, else AdvertisedAddress, else IP.
func (n *ClusterNode) AdvertisedFor(peer netip.Addr) string {
	peer = peer.Unmap()
	best, bestBits := "", -1
	for _, sel := range n.AdvertisedAddresses {
		prefix := sel.ClientCIDR
		if prefix.Addr().Is4In6() && prefix.Bits() >= 96 {
			// An IPv4-mapped CIDR matches like its IPv4 form at /96 or longer.
			prefix = netip.PrefixFrom(prefix.Addr().Unmap(), prefix.Bits()-96)
		}
		if prefix.Addr().Is4() != peer.Is4() || !prefix.Contains(peer) {
			continue
		}
		if prefix.Bits() > bestBits {
			best, bestBits = sel.Address, prefix.Bits()
		}
	}
	switch {
	case best != "":
		return best
	case n.AdvertisedAddress != "":
		return n.AdvertisedAddress
	}
	return n.IP
}

// fileCluster is [cluster] and [message_bus] of the TOML document.
type fileCluster struct {
	Enabled                            *bool   `toml:"enabled"`
	Name                               *string `toml:"name"`
	HeartbeatTimeout                   *string `toml:"heartbeat_timeout"`
	CommitBroadcastInterval            *string `toml:"commit_broadcast_interval"`
	PrepareRetransmitInterval          *string `toml:"prepare_retransmit_interval"`
	ViewChangeRetransmitInterval       *string `toml:"view_change_retransmit_interval"`
	ViewChangeStatusTimeout            *string `toml:"view_change_status_timeout"`
	RequestStartViewRetransmitInterval *string `toml:"request_start_view_retransmit_interval"`
	ViewProbeAttemptsMax               *int    `toml:"view_probe_attempts_max"`
	RepairRetryInterval                *string `toml:"repair_retry_interval"`
	RepairChunkMax                     *int    `toml:"repair_chunk_max"`
	PartitionMemoryMax                 *string `toml:"partition_memory_max"`
	PartitionIncarnationTags           *bool   `toml:"partition_incarnation_tags"`
	Auth                               struct {
		Enabled              *bool   `toml:"enabled"`
		SharedSecret         *string `toml:"shared_secret"`
		PreviousSharedSecret *string `toml:"previous_shared_secret"`
	} `toml:"auth"`
	TLS struct {
		Enabled    *bool   `toml:"enabled"`
		SelfSigned *bool   `toml:"self_signed"`
		CertFile   *string `toml:"cert_file"`
		KeyFile    *string `toml:"key_file"`
		CAFile     *string `toml:"ca_file"`
	} `toml:"tls"`
	Nodes []struct {
		Name                string `toml:"name"`
		IP                  string `toml:"ip"`
		ReplicaID           int    `toml:"replica_id"`
		AdvertisedAddress   string `toml:"advertised_address"`
		AdvertisedAddresses []struct {
			ClientCIDR string `toml:"client_cidr"`
			Address    string `toml:"address"`
		} `toml:"advertised_addresses"`
		Ports struct {
			TCP        uint16 `toml:"tcp"`
			QUIC       uint16 `toml:"quic"`
			HTTP       uint16 `toml:"http"`
			WebSocket  uint16 `toml:"websocket"`
			TCPReplica uint16 `toml:"tcp_replica"`
		} `toml:"ports"`
	} `toml:"nodes"`
}

type fileMessageBus struct {
	MaxMessageSize         *string `toml:"max_message_size"`
	PeerQueueCapacity      *int    `toml:"peer_queue_capacity"`
	PartitionQueueCapacity *int    `toml:"partition_queue_capacity"`
	ReconnectPeriod        *string `toml:"reconnect_period"`
}

func (c *Cluster) applyFile(f *fileCluster, bus *fileMessageBus) error {
	setBool := func(dst *bool, v *bool) {
		if v != nil {
			*dst = *v
		}
	}
	setString := func(dst *string, v *string) {
		if v != nil {
			*dst = *v
		}
	}
	setBool(&c.Enabled, f.Enabled)
	setString(&c.Name, f.Name)
	setBool(&c.PartitionIncarnationTags, f.PartitionIncarnationTags)
	for _, d := range []struct {
		key string
		dst *time.Duration
		v   *string
	}{
		{"cluster.heartbeat_timeout", &c.HeartbeatTimeout, f.HeartbeatTimeout},
		{"cluster.commit_broadcast_interval", &c.CommitBroadcastInterval, f.CommitBroadcastInterval},
		{"cluster.prepare_retransmit_interval", &c.PrepareRetransmitInterval, f.PrepareRetransmitInterval},
		{"cluster.view_change_retransmit_interval", &c.ViewChangeRetransmitInterval, f.ViewChangeRetransmitInterval},
		{"cluster.view_change_status_timeout", &c.ViewChangeStatusTimeout, f.ViewChangeStatusTimeout},
		{"cluster.request_start_view_retransmit_interval", &c.RequestStartViewRetransmitInterval, f.RequestStartViewRetransmitInterval},
		{"cluster.repair_retry_interval", &c.RepairRetryInterval, f.RepairRetryInterval},
		{"message_bus.reconnect_period", &c.MessageBus.ReconnectPeriod, bus.ReconnectPeriod},
	} {
		if d.v == nil {
			continue
		}
		v, err := parseClusterDuration(*d.v)
		if err != nil {
			return &SettingError{Setting: d.key, Value: *d.v, Reason: err.Error()}
		}
		*d.dst = v
	}
	if f.ViewProbeAttemptsMax != nil {
		c.ViewProbeAttemptsMax = *f.ViewProbeAttemptsMax
	}
	if f.RepairChunkMax != nil {
		c.RepairChunkMax = *f.RepairChunkMax
	}
	if v := f.PartitionMemoryMax; v != nil {
		if err := c.setPartitionMemoryMax("cluster.partition_memory_max", *v); err != nil {
			return err
		}
	}
	if bus.PeerQueueCapacity != nil {
		c.MessageBus.PeerQueueCapacity = *bus.PeerQueueCapacity
	}
	if bus.PartitionQueueCapacity != nil {
		c.MessageBus.PartitionQueueCapacity = *bus.PartitionQueueCapacity
	}
	if v := bus.MaxMessageSize; v != nil {
		n, err := ParseSizeBytes(*v)
		if err != nil || n > 1<<32-1 {
			return &SettingError{Setting: "message_bus.max_message_size", Value: *v, Reason: "not a size below 4 GiB (e.g. \"64 MiB\")"}
		}
		c.MessageBus.MaxMessageSizeBytes = uint32(n)
	}
	setBool(&c.Auth.Enabled, f.Auth.Enabled)
	setString(&c.Auth.SharedSecret, f.Auth.SharedSecret)
	setString(&c.Auth.PreviousSharedSecret, f.Auth.PreviousSharedSecret)
	setBool(&c.TLS.Enabled, f.TLS.Enabled)
	setBool(&c.TLS.SelfSigned, f.TLS.SelfSigned)
	setString(&c.TLS.CertFile, f.TLS.CertFile)
	setString(&c.TLS.KeyFile, f.TLS.KeyFile)
	setString(&c.TLS.CAFile, f.TLS.CAFile)
	if f.Nodes != nil {
		c.Nodes = c.Nodes[:0]
	}
	for i, n := range f.Nodes {
		node := ClusterNode{Name: n.Name, IP: n.IP, ReplicaID: n.ReplicaID, AdvertisedAddress: n.AdvertisedAddress,
			Ports: NodePorts{TCP: n.Ports.TCP, QUIC: n.Ports.QUIC, HTTP: n.Ports.HTTP, WebSocket: n.Ports.WebSocket, TCPReplica: n.Ports.TCPReplica}}
		for k, sel := range n.AdvertisedAddresses {
			prefix, err := netip.ParsePrefix(sel.ClientCIDR)
			if err != nil {
				return &SettingError{Setting: fmt.Sprintf("cluster.nodes[%d].advertised_addresses[%d].client_cidr", i, k), Value: sel.ClientCIDR,
					Reason: "not a CIDR such as 10.0.0.0/16"}
			}
			node.AdvertisedAddresses = append(node.AdvertisedAddresses, AdvertisedSelector{ClientCIDR: prefix, Address: sel.Address})
		}
		c.Nodes = append(c.Nodes, node)
	}
	return nil
}

// applyEnv reads the IGGY_CLUSTER_* variables: the top-level keys, auth, tls, and
// IGGY_CLUSTER_NODES_<i>_<KEY> for the roster (entries the file did not have are
// added in order).
func (c *Cluster) applyEnv(getenv func(string) string) error {
	boolVar := func(name string, dst *bool) error {
		if v := getenv(name); v != "" {
			on, err := strconv.ParseBool(v)
			if err != nil {
				return &SettingError{Setting: name, Value: v, Reason: "not true or false"}
			}
			*dst = on
		}
		return nil
	}
	for _, b := range []struct {
		name string
		dst  *bool
	}{{"IGGY_CLUSTER_ENABLED", &c.Enabled}, {"IGGY_CLUSTER_AUTH_ENABLED", &c.Auth.Enabled},
		{"IGGY_CLUSTER_TLS_ENABLED", &c.TLS.Enabled}, {"IGGY_CLUSTER_TLS_SELF_SIGNED", &c.TLS.SelfSigned},
		{"IGGY_CLUSTER_PARTITION_INCARNATION_TAGS", &c.PartitionIncarnationTags}} {
		if err := boolVar(b.name, b.dst); err != nil {
			return err
		}
	}
	for _, s := range []struct {
		name string
		dst  *string
	}{{"IGGY_CLUSTER_NAME", &c.Name}, {"IGGY_CLUSTER_AUTH_SHARED_SECRET", &c.Auth.SharedSecret},
		{"IGGY_CLUSTER_AUTH_PREVIOUS_SHARED_SECRET", &c.Auth.PreviousSharedSecret},
		{"IGGY_CLUSTER_TLS_CERT_FILE", &c.TLS.CertFile}, {"IGGY_CLUSTER_TLS_KEY_FILE", &c.TLS.KeyFile},
		{"IGGY_CLUSTER_TLS_CA_FILE", &c.TLS.CAFile}} {
		if v := getenv(s.name); v != "" {
			*s.dst = v
		}
	}
	for _, d := range []struct {
		name string
		dst  *time.Duration
	}{{"IGGY_CLUSTER_HEARTBEAT_TIMEOUT", &c.HeartbeatTimeout}, {"IGGY_CLUSTER_COMMIT_BROADCAST_INTERVAL", &c.CommitBroadcastInterval},
		{"IGGY_CLUSTER_PREPARE_RETRANSMIT_INTERVAL", &c.PrepareRetransmitInterval},
		{"IGGY_CLUSTER_VIEW_CHANGE_RETRANSMIT_INTERVAL", &c.ViewChangeRetransmitInterval},
		{"IGGY_CLUSTER_VIEW_CHANGE_STATUS_TIMEOUT", &c.ViewChangeStatusTimeout},
		{"IGGY_CLUSTER_REQUEST_START_VIEW_RETRANSMIT_INTERVAL", &c.RequestStartViewRetransmitInterval},
		{"IGGY_CLUSTER_REPAIR_RETRY_INTERVAL", &c.RepairRetryInterval}} {
		if v := getenv(d.name); v != "" {
			parsed, err := parseClusterDuration(v)
			if err != nil {
				return &SettingError{Setting: d.name, Value: v, Reason: err.Error()}
			}
			*d.dst = parsed
		}
	}
	for _, n := range []struct {
		name string
		dst  *int
	}{{"IGGY_CLUSTER_VIEW_PROBE_ATTEMPTS_MAX", &c.ViewProbeAttemptsMax}, {"IGGY_CLUSTER_REPAIR_CHUNK_MAX", &c.RepairChunkMax},
		{"IGGY_MESSAGE_BUS_PARTITION_QUEUE_CAPACITY", &c.MessageBus.PartitionQueueCapacity}} {
		if v := getenv(n.name); v != "" {
			parsed, err := strconv.Atoi(v)
			if err != nil {
				return &SettingError{Setting: n.name, Value: v, Reason: "not a whole number"}
			}
			*n.dst = parsed
		}
	}
	if v := getenv("IGGY_CLUSTER_PARTITION_MEMORY_MAX"); v != "" {
		if err := c.setPartitionMemoryMax("IGGY_CLUSTER_PARTITION_MEMORY_MAX", v); err != nil {
			return err
		}
	}
	for i := 0; i < clusterRosterMax; i++ {
		prefix := "IGGY_CLUSTER_NODES_" + strconv.Itoa(i) + "_"
		keys := []string{"NAME", "IP", "REPLICA_ID", "ADVERTISED_ADDRESS", "PORTS_TCP", "PORTS_QUIC", "PORTS_HTTP", "PORTS_WEBSOCKET", "PORTS_TCP_REPLICA"}
		any := false
		for _, k := range keys {
			any = any || getenv(prefix+k) != ""
		}
		if !any {
			if i >= len(c.Nodes) {
				break
			}
			continue
		}
		for len(c.Nodes) <= i {
			c.Nodes = append(c.Nodes, ClusterNode{ReplicaID: len(c.Nodes)})
		}
		node := &c.Nodes[i]
		for _, k := range keys {
			v := getenv(prefix + k)
			if v == "" {
				continue
			}
			switch k {
			case "NAME":
				node.Name = v
			case "IP":
				node.IP = v
			case "ADVERTISED_ADDRESS":
				node.AdvertisedAddress = v
			case "REPLICA_ID":
				id, err := strconv.Atoi(v)
				if err != nil {
					return &SettingError{Setting: prefix + k, Value: v, Reason: "not a whole number"}
				}
				node.ReplicaID = id
			default:
				port, err := strconv.ParseUint(v, 10, 16)
				if err != nil {
					return &SettingError{Setting: prefix + k, Value: v, Reason: "not a port in 0..65535"}
				}
				switch k {
				case "PORTS_TCP":
					node.Ports.TCP = uint16(port)
				case "PORTS_QUIC":
					node.Ports.QUIC = uint16(port)
				case "PORTS_HTTP":
					node.Ports.HTTP = uint16(port)
				case "PORTS_WEBSOCKET":
					node.Ports.WebSocket = uint16(port)
				case "PORTS_TCP_REPLICA":
					node.Ports.TCPReplica = uint16(port)
				}
			}
		}
	}
	return nil
}

// setPartitionMemoryMax reads partition_memory_max from setting.
func (c *Cluster) setPartitionMemoryMax(setting, v string) error {
	n, err := ParseSizeBytes(v)
	if err != nil || n > 1<<62 {
		return &SettingError{Setting: setting, Value: v, Reason: "not a size (e.g. \"256 MiB\")"}
	}
	c.PartitionMemoryMaxBytes = int64(n)
	return nil
}

// partitionMemoryPerShardMin is the least share of partition_memory_max a shard
// gets: one batch of the SDKs' default size.
const partitionMemoryPerShardMin = 1 << 20

// PartitionMemoryOfShard is a shard's share of partition_memory_max; 0 leaves the
// partition package's default (64 MiB a shard).
func (c *Cluster) PartitionMemoryOfShard(shards int) int64 {
	if c.PartitionMemoryMaxBytes == 0 {
		return 0
	}
	return max(c.PartitionMemoryMaxBytes/int64(max(shards, 1)), partitionMemoryPerShardMin)
}

// parseClusterDuration reads a timing setting; the reference's sentinels for "off"
// parse to zero, which Validate refuses.
func parseClusterDuration(v string) (time.Duration, error) {
	switch strings.TrimSpace(v) {
	case "0", "disabled", "unlimited", "none":
		return 0, nil
	}
	return ParseDuration(v)
}
