package jsonview

import (
	"cmp"
	"math"
	"slices"
	"strconv"

	"github.com/iggy-shard/iggy-shard/wire"
)

// Stats is GET /stats, field for field, in its order (the TOML names for the CLI's
// --output toml).
type Stats struct {
	ProcessID           uint32                 `json:"process_id" toml:"process_id"`
	CPUUsage            float32                `json:"cpu_usage" toml:"cpu_usage"`
	TotalCPUUsage       float32                `json:"total_cpu_usage" toml:"total_cpu_usage"`
	MemoryUsage         string                 `json:"memory_usage" toml:"memory_usage"`
	TotalMemory         string                 `json:"total_memory" toml:"total_memory"`
	AvailableMemory     string                 `json:"available_memory" toml:"available_memory"`
	RunTime             uint64                 `json:"run_time" toml:"run_time"`
	StartTime           uint64                 `json:"start_time" toml:"start_time"`
	ReadBytes           string                 `json:"read_bytes" toml:"read_bytes"`
	WrittenBytes        string                 `json:"written_bytes" toml:"written_bytes"`
	MessagesSizeBytes   string                 `json:"messages_size_bytes" toml:"messages_size_bytes"`
	StreamsCount        uint32                 `json:"streams_count" toml:"streams_count"`
	TopicsCount         uint32                 `json:"topics_count" toml:"topics_count"`
	PartitionsCount     uint32                 `json:"partitions_count" toml:"partitions_count"`
	SegmentsCount       uint32                 `json:"segments_count" toml:"segments_count"`
	MessagesCount       uint64                 `json:"messages_count" toml:"messages_count"`
	ClientsCount        uint32                 `json:"clients_count" toml:"clients_count"`
	ConsumerGroupsCount uint32                 `json:"consumer_groups_count" toml:"consumer_groups_count"`
	Hostname            string                 `json:"hostname" toml:"hostname"`
	OSName              string                 `json:"os_name" toml:"os_name"`
	OSVersion           string                 `json:"os_version" toml:"os_version"`
	KernelVersion       string                 `json:"kernel_version" toml:"kernel_version"`
	IggyServerVersion   string                 `json:"iggy_server_version" toml:"iggy_server_version"`
	IggyServerSemver    *uint32                `json:"iggy_server_semver" toml:"iggy_server_semver,omitempty"`
	CacheMetrics        map[string]CacheMetric `json:"cache_metrics" toml:"cache_metrics"`
	ThreadsCount        uint32                 `json:"threads_count" toml:"threads_count"`
	FreeDiskSpace       string                 `json:"free_disk_space" toml:"free_disk_space"`
	TotalDiskSpace      string                 `json:"total_disk_space" toml:"total_disk_space"`
}

// CacheMetric is one partition's entry of Stats.CacheMetrics, keyed
// "<stream>-<topic>-<partition>".
type CacheMetric struct {
	Hits     uint64  `json:"hits"`
	Misses   uint64  `json:"misses"`
	HitRatio float32 `json:"hit_ratio"`
}

func StatsOf(s *wire.Stats) Stats {
	v := Stats{ProcessID: s.ProcessID, CPUUsage: finite(s.CPUUsage), TotalCPUUsage: finite(s.TotalCPUUsage),
		MemoryUsage: ByteSize(s.MemoryUsageBytes), TotalMemory: ByteSize(s.TotalMemoryBytes),
		AvailableMemory: ByteSize(s.AvailableMemoryBytes), RunTime: s.RunTimeMicros, StartTime: s.StartTimeMicros,
		ReadBytes: ByteSize(s.ReadBytes), WrittenBytes: ByteSize(s.WrittenBytes), MessagesSizeBytes: ByteSize(s.MessagesSizeBytes),
		StreamsCount: s.StreamsCount, TopicsCount: s.TopicsCount, PartitionsCount: s.PartitionsCount,
		SegmentsCount: s.SegmentsCount, MessagesCount: s.MessagesCount, ClientsCount: s.ClientsCount,
		ConsumerGroupsCount: s.ConsumerGroupsCount, Hostname: string(s.Hostname), OSName: string(s.OSName),
		OSVersion: string(s.OSVersion), KernelVersion: string(s.KernelVersion), IggyServerVersion: string(s.IggyServerVersion),
		CacheMetrics: map[string]CacheMetric{}, ThreadsCount: s.ThreadsCount,
		FreeDiskSpace: ByteSize(s.FreeDiskSpaceBytes), TotalDiskSpace: ByteSize(s.TotalDiskSpaceBytes)}
	if s.IggyServerSemver != 0 {
		semver := s.IggyServerSemver
		v.IggyServerSemver = &semver
	}
	for _, m := range s.CacheMetrics {
		key := strconv.FormatUint(uint64(m.StreamID), 10) + "-" + strconv.FormatUint(uint64(m.TopicID), 10) + "-" +
			strconv.FormatUint(uint64(m.PartitionID), 10)
		v.CacheMetrics[key] = CacheMetric{Hits: m.Hits, Misses: m.Misses, HitRatio: finite(m.HitRatio)}
	}
	return v
}

// finite keeps a float JSON can carry: encoding/json refuses NaN and infinities.
func finite(f float32) float32 {
	if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
		return 0
	}
	return f
}

// Client is a connected client, with its consumer groups (sorted by group id) for
// GET of one client.
type Client struct {
	ClientID            uint32         `json:"client_id"`
	UserID              *uint32        `json:"user_id"`
	Address             string         `json:"address"`
	Transport           string         `json:"transport"`
	ConsumerGroupsCount uint32         `json:"consumer_groups_count"`
	ConsumerGroups      *[]ClientGroup `json:"consumer_groups,omitempty"`
}

type ClientGroup struct {
	StreamID uint32 `json:"stream_id"`
	TopicID  uint32 `json:"topic_id"`
	GroupID  uint32 `json:"group_id"`
}

func ClientOf(c *wire.ClientHeader) Client {
	v := Client{ClientID: c.ClientID, Address: string(c.Address), Transport: wire.ClientTransportName(c.Transport),
		ConsumerGroupsCount: c.ConsumerGroupsCount}
	if c.UserID != wire.ClientUserIDNone {
		id := c.UserID
		v.UserID = &id
	}
	return v
}

func ClientDetailsOf(c *wire.ClientDetails) Client {
	v := ClientOf(&c.ClientHeader)
	groups := make([]ClientGroup, len(c.Groups))
	for i, g := range c.Groups {
		groups[i] = ClientGroup{StreamID: g.StreamID, TopicID: g.TopicID, GroupID: g.GroupID}
	}
	slices.SortStableFunc(groups, func(a, b ClientGroup) int { return cmp.Compare(a.GroupID, b.GroupID) })
	v.ConsumerGroups = &groups
	return v
}

// Cluster is GET /cluster/metadata.
type Cluster struct {
	Name  string        `json:"name"`
	Nodes []ClusterNode `json:"nodes"`
}

type ClusterNode struct {
	Name      string    `json:"name"`
	IP        string    `json:"ip"`
	Endpoints Endpoints `json:"endpoints"`
	Role      string    `json:"role"`
	Status    string    `json:"status"`
}

// Endpoints are a node's ports, 0 for a transport it does not serve.
type Endpoints struct {
	TCP       uint16 `json:"tcp"`
	QUIC      uint16 `json:"quic"`
	HTTP      uint16 `json:"http"`
	WebSocket uint16 `json:"websocket"`
}

func ClusterOf(m *wire.ClusterMetadata) Cluster {
	v := Cluster{Name: string(m.Name), Nodes: make([]ClusterNode, len(m.Nodes))}
	for i, n := range m.Nodes {
		v.Nodes[i] = ClusterNode{Name: string(n.Name), IP: string(n.IP),
			Endpoints: Endpoints{TCP: n.TCPPort, QUIC: n.QUICPort, HTTP: n.HTTPPort, WebSocket: n.WebSocketPort},
			Role:      RoleName(n.Role), Status: NodeStatusName(n.Status)}
	}
	return v
}

// RoleName is a node's role as JSON names it.
func RoleName(r uint8) string {
	switch r {
	case wire.ClusterRoleLeader:
		return "leader"
	case wire.ClusterRoleFollower:
		return "follower"
	}
	return "unknown"
}

// NodeStatusName is a node's status as JSON names it.
func NodeStatusName(s uint8) string {
	names := [...]string{wire.ClusterNodeHealthy: "healthy", wire.ClusterNodeStarting: "starting",
		wire.ClusterNodeStopping: "stopping", wire.ClusterNodeUnreachable: "unreachable",
		wire.ClusterNodeMaintenance: "maintenance", wire.ClusterNodeUnknown: "unknown"}
	if int(s) < len(names) {
		return names[s]
	}
	return "unknown"
}

// OptionSpec is one entry of GET /options/{scope} (apache/iggy
// core/server/src/http/system.rs): the default's bytes as JSON numbers.
type OptionSpec struct {
	Key          string `json:"key"`
	Kind         string `json:"kind"`
	DefaultValue []int  `json:"default_value"`
	Description  string `json:"description"`
}

func OptionSpecOf(d *wire.OptionDescriptor) OptionSpec {
	v := OptionSpec{Key: string(d.Key), Kind: d.Kind.String(), DefaultValue: make([]int, len(d.Default)),
		Description: string(d.Description)}
	for i, b := range d.Default {
		v.DefaultValue[i] = int(b)
	}
	return v
}
