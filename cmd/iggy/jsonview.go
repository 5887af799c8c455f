package main

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/big"
	"slices"
	"strconv"

	"github.com/iggy-shard/iggy-shard/wire"
)

// The JSON of --output json: the objects of the HTTP API with its field names and
// value conventions (iggy.apache.org/docs, "HTTP API"; apache/iggy
// core/common/src/types): timestamps and durations in microseconds, sizes as
// byte-size strings, u128 message ids as bare integers, options as
// {"key": {"value": "...", "explicit": bool}}.

type optionJSON struct {
	Value    string `json:"value"`
	Explicit bool   `json:"explicit"`
}

type streamJSON struct {
	ID            uint32                `json:"id"`
	CreatedAt     uint64                `json:"created_at"`
	Name          string                `json:"name"`
	Size          string                `json:"size"`
	MessagesCount uint64                `json:"messages_count"`
	TopicsCount   uint32                `json:"topics_count"`
	Topics        *[]topicJSON          `json:"topics,omitempty"`
	Options       map[string]optionJSON `json:"options"`
}

func streamView(s *wire.StreamHeader) streamJSON {
	return streamJSON{ID: s.ID, CreatedAt: s.CreatedAtMicros, Name: string(s.Name), Size: jsonSize(s.SizeBytes),
		MessagesCount: s.MessagesCount, TopicsCount: s.TopicsCount, Options: optionsView(s.Options, nil)}
}

func streamDetailsView(s *wire.StreamDetails) streamJSON {
	v := streamView(&s.StreamHeader)
	topics := make([]topicJSON, len(s.Topics))
	for i := range s.Topics {
		topics[i] = topicView(&s.Topics[i])
	}
	v.Topics = &topics
	return v
}

type partitionJSON struct {
	ID            uint32 `json:"id"`
	CreatedAt     uint64 `json:"created_at"`
	SegmentsCount uint32 `json:"segments_count"`
	CurrentOffset uint64 `json:"current_offset"`
	Size          string `json:"size"`
	MessagesCount uint64 `json:"messages_count"`
}

type topicJSON struct {
	ID                   uint32                `json:"id"`
	CreatedAt            uint64                `json:"created_at"`
	Name                 string                `json:"name"`
	Size                 string                `json:"size"`
	MessageExpiry        uint64                `json:"message_expiry"`
	CompressionAlgorithm string                `json:"compression_algorithm"`
	MaxTopicSize         uint64                `json:"max_topic_size"`
	MessagesCount        uint64                `json:"messages_count"`
	PartitionsCount      uint32                `json:"partitions_count"`
	Partitions           *[]partitionJSON      `json:"partitions,omitempty"`
	Options              map[string]optionJSON `json:"options"`
}

func compressionName(code uint8) string {
	switch code {
	case wire.TopicCompressionNone:
		return "none"
	case wire.TopicCompressionGzip:
		return "gzip"
	}
	return "unknown(" + strconv.Itoa(int(code)) + ")"
}

func topicView(t *wire.TopicHeader) topicJSON {
	return topicJSON{ID: t.ID, CreatedAt: t.CreatedAtMicros, Name: string(t.Name), Size: jsonSize(t.SizeBytes),
		MessageExpiry: t.MessageExpiryMicros, CompressionAlgorithm: compressionName(t.CompressionAlgorithm),
		MaxTopicSize: t.MaxTopicSizeBytes, MessagesCount: t.MessagesCount, PartitionsCount: t.PartitionsCount,
		Options: optionsView(t.ExplicitOptions, t.DerivedOptions)}
}

func topicDetailsView(t *wire.TopicDetails) topicJSON {
	v := topicView(&t.TopicHeader)
	partitions := make([]partitionJSON, len(t.Partitions))
	for i, p := range t.Partitions {
		partitions[i] = partitionJSON{ID: p.ID, CreatedAt: p.CreatedAtMicros, SegmentsCount: p.SegmentsCount,
			CurrentOffset: p.CurrentOffset, Size: jsonSize(p.SizeBytes), MessagesCount: p.MessagesCount}
	}
	v.Partitions = &partitions
	return v
}

// optionsView turns the explicit and derived option blocks of a reply into the
// options map; a block that does not parse contributes what parsed of it.
func optionsView(explicit, derived []byte) map[string]optionJSON {
	m := map[string]optionJSON{}
	for _, block := range []struct {
		b        []byte
		explicit bool
	}{{derived, false}, {explicit, true}} {
		it := wire.NewTLVIterator(block.b)
		for e, ok := it.Next(); ok; e, ok = it.Next() {
			m[string(e.Key)] = optionJSON{Value: headerValueText(e.ValueKind, e.Value), Explicit: block.explicit}
		}
	}
	return m
}

// headerValueText is the string form of a typed header or option value: text as
// is, numbers in decimal, bools as true/false, raw bytes (and values whose size does
// not fit their kind) in hex.
func headerValueText(kind wire.HeaderKind, v []byte) string {
	if n := kind.FixedSizeBytes(); n != 0 && len(v) != n {
		return hexText(v)
	}
	le := binary.LittleEndian
	switch kind {
	case wire.HeaderString:
		return string(v)
	case wire.HeaderBool:
		return strconv.FormatBool(v[0] != 0)
	case wire.HeaderInt8:
		return strconv.FormatInt(int64(int8(v[0])), 10)
	case wire.HeaderInt16:
		return strconv.FormatInt(int64(int16(le.Uint16(v))), 10)
	case wire.HeaderInt32:
		return strconv.FormatInt(int64(int32(le.Uint32(v))), 10)
	case wire.HeaderInt64:
		return strconv.FormatInt(int64(le.Uint64(v)), 10)
	case wire.HeaderUint8:
		return strconv.FormatUint(uint64(v[0]), 10)
	case wire.HeaderUint16:
		return strconv.FormatUint(uint64(le.Uint16(v)), 10)
	case wire.HeaderUint32:
		return strconv.FormatUint(uint64(le.Uint32(v)), 10)
	case wire.HeaderUint64:
		return strconv.FormatUint(le.Uint64(v), 10)
	case wire.HeaderInt128:
		return int128Text(v, true)
	case wire.HeaderUint128:
		return int128Text(v, false)
	case wire.HeaderFloat32:
		return strconv.FormatFloat(float64(math.Float32frombits(le.Uint32(v))), 'g', -1, 32)
	case wire.HeaderFloat64:
		return strconv.FormatFloat(math.Float64frombits(le.Uint64(v)), 'g', -1, 64)
	}
	return hexText(v)
}

func hexText(v []byte) string {
	const digits = "0123456789abcdef"
	b := make([]byte, 0, 2+2*len(v))
	b = append(b, "0x"...)
	for _, c := range v {
		b = append(b, digits[c>>4], digits[c&15])
	}
	return string(b)
}

// int128Text prints 16 little-endian bytes in decimal.
func int128Text(v []byte, signed bool) string {
	be := slices.Clone(v)
	slices.Reverse(be)
	n := new(big.Int).SetBytes(be)
	if signed && v[15]&0x80 != 0 {
		n.Sub(n, new(big.Int).Lsh(big.NewInt(1), 128))
	}
	return n.String()
}

// uint128JSON is a u128 written as a bare JSON integer, as the HTTP API writes
// message ids.
type uint128JSON wire.Uint128

func (u uint128JSON) MarshalJSON() ([]byte, error) { return []byte(uint128Text(wire.Uint128(u))), nil }

// UnmarshalJSON reads the bare integer back, for scripts in Go and the tests.
func (u *uint128JSON) UnmarshalJSON(b []byte) error {
	n, ok := new(big.Int).SetString(string(b), 10)
	if !ok || n.Sign() < 0 || n.BitLen() > 128 {
		return fmt.Errorf("not a u128: %s", b)
	}
	lo := new(big.Int).And(n, new(big.Int).SetUint64(math.MaxUint64))
	*u = uint128JSON{Lo: lo.Uint64(), Hi: new(big.Int).Rsh(n, 64).Uint64()}
	return nil
}

func uint128Text(u wire.Uint128) string {
	if u.Hi == 0 {
		return strconv.FormatUint(u.Lo, 10)
	}
	n := new(big.Int).SetUint64(u.Hi)
	n.Lsh(n, 64)
	n.Or(n, new(big.Int).SetUint64(u.Lo))
	return n.String()
}

type groupMemberJSON struct {
	ID              uint32   `json:"id"`
	PartitionsCount uint32   `json:"partitions_count"`
	Partitions      []uint32 `json:"partitions"`
}

type groupJSON struct {
	ID              uint32             `json:"id"`
	Name            string             `json:"name"`
	PartitionsCount uint32             `json:"partitions_count"`
	MembersCount    uint32             `json:"members_count"`
	Members         *[]groupMemberJSON `json:"members,omitempty"`
}

func groupView(g *wire.ConsumerGroupHeader) groupJSON {
	return groupJSON{ID: g.ID, Name: string(g.Name), PartitionsCount: g.PartitionsCount, MembersCount: g.MembersCount}
}

func groupDetailsView(g *wire.ConsumerGroupDetails) groupJSON {
	v := groupView(&g.ConsumerGroupHeader)
	members := make([]groupMemberJSON, len(g.Members))
	for i, m := range g.Members {
		members[i] = groupMemberJSON{ID: m.ID, PartitionsCount: uint32(len(m.PartitionIDs)), Partitions: nonNil(m.PartitionIDs)}
	}
	v.Members = &members
	return v
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// userJSON is UserInfoDetails: permissions always present, null for none.
type userJSON struct {
	ID          uint32                `json:"id"`
	CreatedAt   uint64                `json:"created_at"`
	Status      string                `json:"status"`
	Username    string                `json:"username"`
	Permissions *permissionsJSON      `json:"permissions"`
	Options     map[string]optionJSON `json:"options"`
}

// userListJSON is UserInfo: no permissions field.
type userListJSON struct {
	ID        uint32                `json:"id"`
	CreatedAt uint64                `json:"created_at"`
	Status    string                `json:"status"`
	Username  string                `json:"username"`
	Options   map[string]optionJSON `json:"options"`
}

func userStatusName(s uint8) string {
	switch wire.UserStatus(s) {
	case wire.UserActive:
		return "active"
	case wire.UserInactive:
		return "inactive"
	}
	return "unknown(" + strconv.Itoa(int(s)) + ")"
}

func userListView(u *wire.UserHeader) userListJSON {
	return userListJSON{ID: u.ID, CreatedAt: u.CreatedAtMicros, Status: userStatusName(u.Status),
		Username: string(u.Username), Options: optionsView(u.Options, nil)}
}

func userDetailsView(u *wire.UserDetails) userJSON {
	v := userJSON{ID: u.ID, CreatedAt: u.CreatedAtMicros, Status: userStatusName(u.Status),
		Username: string(u.Username), Options: optionsView(u.Options, nil)}
	if u.HasPermissions {
		p := permissionsView(&u.Permissions)
		v.Permissions = &p
	}
	return v
}

type globalPermissionsJSON struct {
	ManageServers bool `json:"manage_servers"`
	ReadServers   bool `json:"read_servers"`
	ManageUsers   bool `json:"manage_users"`
	ReadUsers     bool `json:"read_users"`
	ManageStreams bool `json:"manage_streams"`
	ReadStreams   bool `json:"read_streams"`
	ManageTopics  bool `json:"manage_topics"`
	ReadTopics    bool `json:"read_topics"`
	PollMessages  bool `json:"poll_messages"`
	SendMessages  bool `json:"send_messages"`
}

type topicPermissionsJSON struct {
	ManageTopic  bool `json:"manage_topic"`
	ReadTopic    bool `json:"read_topic"`
	PollMessages bool `json:"poll_messages"`
	SendMessages bool `json:"send_messages"`
}

type streamPermissionsJSON struct {
	ManageStream bool                            `json:"manage_stream"`
	ReadStream   bool                            `json:"read_stream"`
	ManageTopics bool                            `json:"manage_topics"`
	ReadTopics   bool                            `json:"read_topics"`
	PollMessages bool                            `json:"poll_messages"`
	SendMessages bool                            `json:"send_messages"`
	Topics       map[string]topicPermissionsJSON `json:"topics"`
}

type permissionsJSON struct {
	Global  globalPermissionsJSON            `json:"global"`
	Streams map[string]streamPermissionsJSON `json:"streams"`
}

func permissionsView(p *wire.Permissions) permissionsJSON {
	g := p.Global
	v := permissionsJSON{Global: globalPermissionsJSON{g.ManageServers, g.ReadServers, g.ManageUsers, g.ReadUsers,
		g.ManageStreams, g.ReadStreams, g.ManageTopics, g.ReadTopics, g.PollMessages, g.SendMessages}}
	if len(p.Streams) == 0 {
		return v
	}
	v.Streams = map[string]streamPermissionsJSON{}
	for _, s := range p.Streams {
		sv := streamPermissionsJSON{s.ManageStream, s.ReadStream, s.ManageTopics, s.ReadTopics, s.PollMessages, s.SendMessages, nil}
		if len(s.Topics) > 0 {
			sv.Topics = map[string]topicPermissionsJSON{}
			for _, t := range s.Topics {
				sv.Topics[strconv.FormatUint(uint64(t.TopicID), 10)] = topicPermissionsJSON{t.ManageTopic, t.ReadTopic, t.PollMessages, t.SendMessages}
			}
		}
		v.Streams[strconv.FormatUint(uint64(s.StreamID), 10)] = sv
	}
	return v
}

type tokenJSON struct {
	Name     string  `json:"name"`
	ExpiryAt *uint64 `json:"expiry_at"`
}

func tokenView(t *wire.PatEntry) tokenJSON {
	v := tokenJSON{Name: string(t.Name)}
	if t.ExpiryAtMicros != 0 {
		at := t.ExpiryAtMicros
		v.ExpiryAt = &at
	}
	return v
}

type clientGroupJSON struct {
	StreamID uint32 `json:"stream_id"`
	TopicID  uint32 `json:"topic_id"`
	GroupID  uint32 `json:"group_id"`
}

type clientJSON struct {
	ClientID            uint32             `json:"client_id"`
	UserID              *uint32            `json:"user_id"`
	Address             string             `json:"address"`
	Transport           string             `json:"transport"`
	ConsumerGroupsCount uint32             `json:"consumer_groups_count"`
	ConsumerGroups      *[]clientGroupJSON `json:"consumer_groups,omitempty"`
}

func clientView(c *wire.ClientHeader) clientJSON {
	v := clientJSON{ClientID: c.ClientID, Address: string(c.Address), Transport: wire.ClientTransportName(c.Transport),
		ConsumerGroupsCount: c.ConsumerGroupsCount}
	if c.UserID != wire.ClientUserIDNone {
		id := c.UserID
		v.UserID = &id
	}
	return v
}

func clientDetailsView(c *wire.ClientDetails) clientJSON {
	v := clientView(&c.ClientHeader)
	groups := make([]clientGroupJSON, len(c.Groups))
	for i, g := range c.Groups {
		groups[i] = clientGroupJSON{g.StreamID, g.TopicID, g.GroupID}
	}
	v.ConsumerGroups = &groups
	return v
}

type endpointsJSON struct {
	TCP       uint16 `json:"tcp"`
	QUIC      uint16 `json:"quic"`
	HTTP      uint16 `json:"http"`
	WebSocket uint16 `json:"websocket"`
}

type clusterNodeJSON struct {
	Name      string        `json:"name"`
	IP        string        `json:"ip"`
	Endpoints endpointsJSON `json:"endpoints"`
	Role      string        `json:"role"`
	Status    string        `json:"status"`
}

type clusterJSON struct {
	Name  string            `json:"name"`
	Nodes []clusterNodeJSON `json:"nodes"`
}

func roleName(r uint8) string {
	switch r {
	case wire.ClusterRoleLeader:
		return "leader"
	case wire.ClusterRoleFollower:
		return "follower"
	}
	return "unknown"
}

func nodeStatusName(s uint8) string {
	names := [...]string{wire.ClusterNodeHealthy: "healthy", wire.ClusterNodeStarting: "starting",
		wire.ClusterNodeStopping: "stopping", wire.ClusterNodeUnreachable: "unreachable",
		wire.ClusterNodeMaintenance: "maintenance", wire.ClusterNodeUnknown: "unknown"}
	if int(s) < len(names) {
		return names[s]
	}
	return "unknown"
}

func clusterView(m *wire.ClusterMetadata) clusterJSON {
	v := clusterJSON{Name: string(m.Name), Nodes: make([]clusterNodeJSON, len(m.Nodes))}
	for i, n := range m.Nodes {
		v.Nodes[i] = clusterNodeJSON{Name: string(n.Name), IP: string(n.IP),
			Endpoints: endpointsJSON{n.TCPPort, n.QUICPort, n.HTTPPort, n.WebSocketPort},
			Role:      roleName(n.Role), Status: nodeStatusName(n.Status)}
	}
	return v
}

type cacheMetricJSON struct {
	Hits     uint64  `json:"hits"`
	Misses   uint64  `json:"misses"`
	HitRatio float32 `json:"hit_ratio"`
}

// statsJSON is GET /stats, field for field, in its order.
type statsJSON struct {
	ProcessID           uint32                     `json:"process_id" toml:"process_id"`
	CPUUsage            float32                    `json:"cpu_usage" toml:"cpu_usage"`
	TotalCPUUsage       float32                    `json:"total_cpu_usage" toml:"total_cpu_usage"`
	MemoryUsage         string                     `json:"memory_usage" toml:"memory_usage"`
	TotalMemory         string                     `json:"total_memory" toml:"total_memory"`
	AvailableMemory     string                     `json:"available_memory" toml:"available_memory"`
	RunTime             uint64                     `json:"run_time" toml:"run_time"`
	StartTime           uint64                     `json:"start_time" toml:"start_time"`
	ReadBytes           string                     `json:"read_bytes" toml:"read_bytes"`
	WrittenBytes        string                     `json:"written_bytes" toml:"written_bytes"`
	MessagesSizeBytes   string                     `json:"messages_size_bytes" toml:"messages_size_bytes"`
	StreamsCount        uint32                     `json:"streams_count" toml:"streams_count"`
	TopicsCount         uint32                     `json:"topics_count" toml:"topics_count"`
	PartitionsCount     uint32                     `json:"partitions_count" toml:"partitions_count"`
	SegmentsCount       uint32                     `json:"segments_count" toml:"segments_count"`
	MessagesCount       uint64                     `json:"messages_count" toml:"messages_count"`
	ClientsCount        uint32                     `json:"clients_count" toml:"clients_count"`
	ConsumerGroupsCount uint32                     `json:"consumer_groups_count" toml:"consumer_groups_count"`
	Hostname            string                     `json:"hostname" toml:"hostname"`
	OSName              string                     `json:"os_name" toml:"os_name"`
	OSVersion           string                     `json:"os_version" toml:"os_version"`
	KernelVersion       string                     `json:"kernel_version" toml:"kernel_version"`
	IggyServerVersion   string                     `json:"iggy_server_version" toml:"iggy_server_version"`
	IggyServerSemver    *uint32                    `json:"iggy_server_semver" toml:"iggy_server_semver,omitempty"`
	CacheMetrics        map[string]cacheMetricJSON `json:"cache_metrics" toml:"cache_metrics"`
	ThreadsCount        uint32                     `json:"threads_count" toml:"threads_count"`
	FreeDiskSpace       string                     `json:"free_disk_space" toml:"free_disk_space"`
	TotalDiskSpace      string                     `json:"total_disk_space" toml:"total_disk_space"`
}

func statsView(s *wire.Stats) statsJSON {
	v := statsJSON{ProcessID: s.ProcessID, CPUUsage: s.CPUUsage, TotalCPUUsage: s.TotalCPUUsage,
		MemoryUsage: jsonSize(s.MemoryUsageBytes), TotalMemory: jsonSize(s.TotalMemoryBytes),
		AvailableMemory: jsonSize(s.AvailableMemoryBytes), RunTime: s.RunTimeMicros, StartTime: s.StartTimeMicros,
		ReadBytes: jsonSize(s.ReadBytes), WrittenBytes: jsonSize(s.WrittenBytes),
		MessagesSizeBytes: jsonSize(s.MessagesSizeBytes), StreamsCount: s.StreamsCount, TopicsCount: s.TopicsCount,
		PartitionsCount: s.PartitionsCount, SegmentsCount: s.SegmentsCount, MessagesCount: s.MessagesCount,
		ClientsCount: s.ClientsCount, ConsumerGroupsCount: s.ConsumerGroupsCount, Hostname: string(s.Hostname),
		OSName: string(s.OSName), OSVersion: string(s.OSVersion), KernelVersion: string(s.KernelVersion),
		IggyServerVersion: string(s.IggyServerVersion), CacheMetrics: map[string]cacheMetricJSON{},
		ThreadsCount: s.ThreadsCount, FreeDiskSpace: jsonSize(s.FreeDiskSpaceBytes), TotalDiskSpace: jsonSize(s.TotalDiskSpaceBytes)}
	if s.IggyServerSemver != 0 {
		semver := s.IggyServerSemver
		v.IggyServerSemver = &semver
	}
	for _, m := range s.CacheMetrics {
		key := strconv.FormatUint(uint64(m.StreamID), 10) + "-" + strconv.FormatUint(uint64(m.TopicID), 10) + "-" +
			strconv.FormatUint(uint64(m.PartitionID), 10)
		v.CacheMetrics[key] = cacheMetricJSON{m.Hits, m.Misses, m.HitRatio}
	}
	return v
}

type offsetJSON struct {
	PartitionID   uint32 `json:"partition_id"`
	CurrentOffset uint64 `json:"current_offset"`
	StoredOffset  uint64 `json:"stored_offset"`
}

type optionDescriptorJSON struct {
	Key          string `json:"key"`
	Kind         string `json:"kind"`
	DefaultValue []int  `json:"default_value"`
	Description  string `json:"description"`
}

func optionDescriptorView(d *wire.OptionDescriptor) optionDescriptorJSON {
	v := optionDescriptorJSON{Key: string(d.Key), Kind: d.Kind.String(), DefaultValue: make([]int, len(d.Default)),
		Description: string(d.Description)}
	for i, b := range d.Default {
		v.DefaultValue[i] = int(b)
	}
	return v
}
