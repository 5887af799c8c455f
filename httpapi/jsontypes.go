package httpapi

import (
	"encoding/binary"
	"math"
	"math/big"
	"math/bits"
	"strconv"
	"strings"

	"github.com/iggy-shard/iggy-shard/wire"
)

// The shared JSON types (apache/iggy core/common/src/types/) and the renderings of the
// wire replies. Field order is the reference's: encoding/json writes struct fields in
// order.

// byteSize is a size in bytes written as byte-unit's exact string (apache/iggy
// core/common/src/utils/byte_size.rs): the largest unit that divides it to at most
// three decimals.
type byteSize uint64

var byteUnits = []struct {
	name  string
	bytes uint64
}{ // ordered by size
	{"KB", 1e3}, {"KiB", 1 << 10}, {"MB", 1e6}, {"MiB", 1 << 20}, {"GB", 1e9}, {"GiB", 1 << 30},
	{"TB", 1e12}, {"TiB", 1 << 40}, {"PB", 1e15}, {"PiB", 1 << 50}, {"EB", 1e18}, {"EiB", 1 << 60},
}

func (s byteSize) String() string {
	n := uint64(s)
	for i := len(byteUnits) - 1; i >= 0; i-- {
		u := byteUnits[i]
		if n < u.bytes {
			continue
		}
		hi, lo := bits.Mul64(n, 1000)
		milli, rem := bits.Div64(hi, lo, u.bytes) // hi < u.bytes: n*1000/u fits in 64 bits for n >= u
		if rem != 0 {
			continue
		}
		text := strconv.FormatUint(milli/1000, 10)
		if frac := milli % 1000; frac != 0 {
			text += "." + strings.TrimRight(strconv.FormatUint(1000+frac, 10)[1:], "0")
		}
		return text + " " + u.name
	}
	return strconv.FormatUint(n, 10) + " B"
}

func (s byteSize) MarshalJSON() ([]byte, error) { return strconv.AppendQuote(nil, s.String()), nil }

// u128 is a message id: a bare JSON integer, which may exceed 2^64.
type u128 wire.Uint128

func (u u128) MarshalJSON() ([]byte, error) {
	if u.Hi == 0 {
		return strconv.AppendUint(nil, u.Lo, 10), nil
	}
	v := new(big.Int).Lsh(new(big.Int).SetUint64(u.Hi), 64)
	v.Or(v, new(big.Int).SetUint64(u.Lo))
	return []byte(v.String()), nil
}

// optionEntry is one key of an options map.
type optionEntry struct {
	Value    string `json:"value"`
	Explicit bool   `json:"explicit"`
}

// topicOptionsJSON is a topic's options map: every catalog key at its effective
// value, explicit for the keys its client set.
func topicOptionsJSON(explicit, derived []byte) map[string]optionEntry {
	o := wire.TopicOptionsFromBlocks(explicit, derived)
	set := map[string]bool{}
	it := wire.NewTLVIterator(explicit)
	for e, ok := it.Next(); ok; e, ok = it.Next() {
		set[string(e.Key)] = true
	}
	compression := "none"
	if o.CompressionAlgorithm == wire.TopicCompressionGzip {
		compression = "gzip"
	}
	u := func(v uint64) string { return strconv.FormatUint(v, 10) }
	values := map[wire.TopicOptionKey]string{
		wire.TopicOptionCompressionAlgorithm:         compression,
		wire.TopicOptionMessageExpiry:                u(o.MessageExpiryMicros),
		wire.TopicOptionMaxTopicSize:                 u(o.MaxTopicSizeBytes),
		wire.TopicOptionSegmentSize:                  u(o.SegmentSizeBytes),
		wire.TopicOptionEnforceFsync:                 strconv.FormatBool(o.EnforceFsync),
		wire.TopicOptionMessagesRequiredToSave:       u(uint64(o.MessagesRequiredToSave)),
		wire.TopicOptionSizeOfMessagesRequiredToSave: u(o.SizeOfMessagesRequiredToSaveBytes),
		wire.TopicOptionPreallocateSegments:          strconv.FormatBool(o.PreallocateSegments),
	}
	out := make(map[string]optionEntry, len(values))
	for k, v := range values {
		out[k.String()] = optionEntry{Value: v, Explicit: set[k.String()]}
	}
	return out
}

// plainOptionsJSON renders a stream's or user's options block (empty today: they
// have no keys), every entry explicit.
func plainOptionsJSON(block []byte) map[string]optionEntry {
	out := map[string]optionEntry{}
	it := wire.NewTLVIterator(block)
	for e, ok := it.Next(); ok; e, ok = it.Next() {
		out[string(e.Key)] = optionEntry{Value: headerValueString(e.ValueKind, e.Value), Explicit: true}
	}
	return out
}

// headerValueString is a typed value's text: numbers in decimal, bools, text.
func headerValueString(kind wire.HeaderKind, v []byte) string {
	switch {
	case kind == wire.HeaderBool && len(v) == 1:
		return strconv.FormatBool(v[0] != 0)
	case kind == wire.HeaderUint64 && len(v) == 8:
		return strconv.FormatUint(binary.LittleEndian.Uint64(v), 10)
	case kind == wire.HeaderUint32 && len(v) == 4:
		return strconv.FormatUint(uint64(binary.LittleEndian.Uint32(v)), 10)
	case kind == wire.HeaderUint8 && len(v) == 1:
		return strconv.FormatUint(uint64(v[0]), 10)
	}
	return string(v)
}

func compressionName(c uint8) string {
	if c == wire.TopicCompressionGzip {
		return "gzip"
	}
	return "none"
}

func userStatusName(s uint8) string {
	if s == uint8(wire.UserInactive) {
		return "inactive"
	}
	return "active"
}

// Streams (core/common/src/types/).
type streamJSON struct {
	ID            uint32                 `json:"id"`
	CreatedAt     uint64                 `json:"created_at"`
	Name          string                 `json:"name"`
	Size          byteSize               `json:"size"`
	MessagesCount uint64                 `json:"messages_count"`
	TopicsCount   uint32                 `json:"topics_count"`
	Options       map[string]optionEntry `json:"options"`
}

type streamDetailsJSON struct {
	ID            uint32                 `json:"id"`
	CreatedAt     uint64                 `json:"created_at"`
	Name          string                 `json:"name"`
	Size          byteSize               `json:"size"`
	MessagesCount uint64                 `json:"messages_count"`
	TopicsCount   uint32                 `json:"topics_count"`
	Topics        []topicJSON            `json:"topics"`
	Options       map[string]optionEntry `json:"options"`
}

func renderStream(h *wire.StreamHeader) streamJSON {
	return streamJSON{ID: h.ID, CreatedAt: h.CreatedAtMicros, Name: string(h.Name), Size: byteSize(h.SizeBytes),
		MessagesCount: h.MessagesCount, TopicsCount: h.TopicsCount, Options: plainOptionsJSON(h.Options)}
}

func renderStreamDetails(s *wire.StreamDetails) streamDetailsJSON {
	h := renderStream(&s.StreamHeader)
	d := streamDetailsJSON{ID: h.ID, CreatedAt: h.CreatedAt, Name: h.Name, Size: h.Size, MessagesCount: h.MessagesCount,
		TopicsCount: h.TopicsCount, Topics: make([]topicJSON, len(s.Topics)), Options: h.Options}
	for i := range s.Topics {
		d.Topics[i] = renderTopic(&s.Topics[i])
	}
	return d
}

// Topics.
type topicJSON struct {
	ID                   uint32                 `json:"id"`
	CreatedAt            uint64                 `json:"created_at"`
	Name                 string                 `json:"name"`
	Size                 byteSize               `json:"size"`
	MessageExpiry        uint64                 `json:"message_expiry"`
	CompressionAlgorithm string                 `json:"compression_algorithm"`
	MaxTopicSize         uint64                 `json:"max_topic_size"`
	MessagesCount        uint64                 `json:"messages_count"`
	PartitionsCount      uint32                 `json:"partitions_count"`
	Options              map[string]optionEntry `json:"options"`
}

type topicDetailsJSON struct {
	ID                   uint32                 `json:"id"`
	CreatedAt            uint64                 `json:"created_at"`
	Name                 string                 `json:"name"`
	Size                 byteSize               `json:"size"`
	MessageExpiry        uint64                 `json:"message_expiry"`
	CompressionAlgorithm string                 `json:"compression_algorithm"`
	MaxTopicSize         uint64                 `json:"max_topic_size"`
	MessagesCount        uint64                 `json:"messages_count"`
	PartitionsCount      uint32                 `json:"partitions_count"`
	Partitions           []partitionJSON        `json:"partitions"`
	Options              map[string]optionEntry `json:"options"`
}

type partitionJSON struct {
	ID            uint32   `json:"id"`
	CreatedAt     uint64   `json:"created_at"`
	SegmentsCount uint32   `json:"segments_count"`
	CurrentOffset uint64   `json:"current_offset"`
	Size          byteSize `json:"size"`
	MessagesCount uint64   `json:"messages_count"`
}

func renderTopic(h *wire.TopicHeader) topicJSON {
	return topicJSON{ID: h.ID, CreatedAt: h.CreatedAtMicros, Name: string(h.Name), Size: byteSize(h.SizeBytes),
		MessageExpiry: h.MessageExpiryMicros, CompressionAlgorithm: compressionName(h.CompressionAlgorithm),
		MaxTopicSize: h.MaxTopicSizeBytes, MessagesCount: h.MessagesCount, PartitionsCount: h.PartitionsCount,
		Options: topicOptionsJSON(h.ExplicitOptions, h.DerivedOptions)}
}

func renderTopicDetails(t *wire.TopicDetails) topicDetailsJSON {
	h := renderTopic(&t.TopicHeader)
	d := topicDetailsJSON{ID: h.ID, CreatedAt: h.CreatedAt, Name: h.Name, Size: h.Size, MessageExpiry: h.MessageExpiry,
		CompressionAlgorithm: h.CompressionAlgorithm, MaxTopicSize: h.MaxTopicSize, MessagesCount: h.MessagesCount,
		PartitionsCount: h.PartitionsCount, Partitions: make([]partitionJSON, len(t.Partitions)), Options: h.Options}
	for i, p := range t.Partitions {
		d.Partitions[i] = partitionJSON{ID: p.ID, CreatedAt: p.CreatedAtMicros, SegmentsCount: p.SegmentsCount,
			CurrentOffset: p.CurrentOffset, Size: byteSize(p.SizeBytes), MessagesCount: p.MessagesCount}
	}
	return d
}

// Users (core/common/src/types/).
type userJSON struct {
	ID        uint32                 `json:"id"`
	CreatedAt uint64                 `json:"created_at"`
	Status    string                 `json:"status"`
	Username  string                 `json:"username"`
	Options   map[string]optionEntry `json:"options"`
}

type userDetailsJSON struct {
	ID          uint32                 `json:"id"`
	CreatedAt   uint64                 `json:"created_at"`
	Status      string                 `json:"status"`
	Username    string                 `json:"username"`
	Permissions *permissionsJSON       `json:"permissions"`
	Options     map[string]optionEntry `json:"options"`
}

func renderUser(h *wire.UserHeader) userJSON {
	return userJSON{ID: h.ID, CreatedAt: h.CreatedAtMicros, Status: userStatusName(h.Status), Username: string(h.Username),
		Options: plainOptionsJSON(h.Options)}
}

func renderUserDetails(u *wire.UserDetails) userDetailsJSON {
	h := renderUser(&u.UserHeader)
	d := userDetailsJSON{ID: h.ID, CreatedAt: h.CreatedAt, Status: h.Status, Username: h.Username, Options: h.Options}
	if u.HasPermissions {
		d.Permissions = renderPermissions(&u.Permissions)
	}
	return d
}

// Personal access tokens.
type patJSON struct {
	Name     string  `json:"name"`
	ExpiryAt *uint64 `json:"expiry_at"`
}

type createdTokenJSON struct {
	Token string `json:"token"`
}

// Consumer groups.
type groupJSON struct {
	ID              uint32 `json:"id"`
	Name            string `json:"name"`
	PartitionsCount uint32 `json:"partitions_count"`
	MembersCount    uint32 `json:"members_count"`
}

type groupDetailsJSON struct {
	ID              uint32       `json:"id"`
	Name            string       `json:"name"`
	PartitionsCount uint32       `json:"partitions_count"`
	MembersCount    uint32       `json:"members_count"`
	Members         []memberJSON `json:"members"`
}

type memberJSON struct {
	ID              uint32   `json:"id"`
	PartitionsCount uint32   `json:"partitions_count"`
	Partitions      []uint32 `json:"partitions"`
}

func renderGroup(h *wire.ConsumerGroupHeader) groupJSON {
	return groupJSON{ID: h.ID, Name: string(h.Name), PartitionsCount: h.PartitionsCount, MembersCount: h.MembersCount}
}

func renderGroupDetails(g *wire.ConsumerGroupDetails) groupDetailsJSON {
	d := groupDetailsJSON{ID: g.ID, Name: string(g.Name), PartitionsCount: g.PartitionsCount, MembersCount: g.MembersCount,
		Members: make([]memberJSON, len(g.Members))}
	for i, m := range g.Members {
		ids := append([]uint32{}, m.PartitionIDs...)
		d.Members[i] = memberJSON{ID: m.ID, PartitionsCount: uint32(len(ids)), Partitions: ids}
	}
	return d
}

// System (core/common/src/types/).
type statsJSON struct {
	ProcessID           uint32                     `json:"process_id"`
	CPUUsage            float32                    `json:"cpu_usage"`
	TotalCPUUsage       float32                    `json:"total_cpu_usage"`
	MemoryUsage         byteSize                   `json:"memory_usage"`
	TotalMemory         byteSize                   `json:"total_memory"`
	AvailableMemory     byteSize                   `json:"available_memory"`
	RunTime             uint64                     `json:"run_time"`
	StartTime           uint64                     `json:"start_time"`
	ReadBytes           byteSize                   `json:"read_bytes"`
	WrittenBytes        byteSize                   `json:"written_bytes"`
	MessagesSizeBytes   byteSize                   `json:"messages_size_bytes"`
	StreamsCount        uint32                     `json:"streams_count"`
	TopicsCount         uint32                     `json:"topics_count"`
	PartitionsCount     uint32                     `json:"partitions_count"`
	SegmentsCount       uint32                     `json:"segments_count"`
	MessagesCount       uint64                     `json:"messages_count"`
	ClientsCount        uint32                     `json:"clients_count"`
	ConsumerGroupsCount uint32                     `json:"consumer_groups_count"`
	Hostname            string                     `json:"hostname"`
	OSName              string                     `json:"os_name"`
	OSVersion           string                     `json:"os_version"`
	KernelVersion       string                     `json:"kernel_version"`
	IggyServerVersion   string                     `json:"iggy_server_version"`
	IggyServerSemver    *uint32                    `json:"iggy_server_semver"`
	CacheMetrics        map[string]cacheMetricJSON `json:"cache_metrics"`
	ThreadsCount        uint32                     `json:"threads_count"`
	FreeDiskSpace       byteSize                   `json:"free_disk_space"`
	TotalDiskSpace      byteSize                   `json:"total_disk_space"`
}

type cacheMetricJSON struct {
	Hits     uint64  `json:"hits"`
	Misses   uint64  `json:"misses"`
	HitRatio float32 `json:"hit_ratio"`
}

// finite keeps a float JSON can carry: encoding/json refuses NaN and infinities.
func finite(f float32) float32 {
	if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
		return 0
	}
	return f
}

func renderStats(s *wire.Stats) statsJSON {
	j := statsJSON{ProcessID: s.ProcessID, CPUUsage: finite(s.CPUUsage), TotalCPUUsage: finite(s.TotalCPUUsage),
		MemoryUsage: byteSize(s.MemoryUsageBytes), TotalMemory: byteSize(s.TotalMemoryBytes),
		AvailableMemory: byteSize(s.AvailableMemoryBytes), RunTime: s.RunTimeMicros, StartTime: s.StartTimeMicros,
		ReadBytes: byteSize(s.ReadBytes), WrittenBytes: byteSize(s.WrittenBytes), MessagesSizeBytes: byteSize(s.MessagesSizeBytes),
		StreamsCount: s.StreamsCount, TopicsCount: s.TopicsCount, PartitionsCount: s.PartitionsCount,
		SegmentsCount: s.SegmentsCount, MessagesCount: s.MessagesCount, ClientsCount: s.ClientsCount,
		ConsumerGroupsCount: s.ConsumerGroupsCount, Hostname: string(s.Hostname), OSName: string(s.OSName),
		OSVersion: string(s.OSVersion), KernelVersion: string(s.KernelVersion), IggyServerVersion: string(s.IggyServerVersion),
		CacheMetrics: map[string]cacheMetricJSON{}, ThreadsCount: s.ThreadsCount,
		FreeDiskSpace: byteSize(s.FreeDiskSpaceBytes), TotalDiskSpace: byteSize(s.TotalDiskSpaceBytes)}
	if s.IggyServerSemver != 0 {
		v := s.IggyServerSemver
		j.IggyServerSemver = &v
	}
	for _, m := range s.CacheMetrics {
		key := strconv.FormatUint(uint64(m.StreamID), 10) + "-" + strconv.FormatUint(uint64(m.TopicID), 10) + "-" +
			strconv.FormatUint(uint64(m.PartitionID), 10)
		j.CacheMetrics[key] = cacheMetricJSON{Hits: m.Hits, Misses: m.Misses, HitRatio: finite(m.HitRatio)}
	}
	return j
}

type clientJSON struct {
	ClientID            uint32  `json:"client_id"`
	UserID              *uint32 `json:"user_id"`
	Address             string  `json:"address"`
	Transport           string  `json:"transport"`
	ConsumerGroupsCount uint32  `json:"consumer_groups_count"`
}

type clientDetailsJSON struct {
	ClientID            uint32            `json:"client_id"`
	UserID              *uint32           `json:"user_id"`
	Address             string            `json:"address"`
	Transport           string            `json:"transport"`
	ConsumerGroupsCount uint32            `json:"consumer_groups_count"`
	ConsumerGroups      []clientGroupJSON `json:"consumer_groups"`
}

type clientGroupJSON struct {
	StreamID uint32 `json:"stream_id"`
	TopicID  uint32 `json:"topic_id"`
	GroupID  uint32 `json:"group_id"`
}

func renderClient(h *wire.ClientHeader) clientJSON {
	c := clientJSON{ClientID: h.ClientID, Address: string(h.Address), Transport: wire.ClientTransportName(h.Transport),
		ConsumerGroupsCount: h.ConsumerGroupsCount}
	if h.UserID != wire.ClientUserIDNone {
		id := h.UserID
		c.UserID = &id
	}
	return c
}

type clusterJSON struct {
	Name  string            `json:"name"`
	Nodes []clusterNodeJSON `json:"nodes"`
}

type clusterNodeJSON struct {
	Name      string        `json:"name"`
	IP        string        `json:"ip"`
	Endpoints endpointsJSON `json:"endpoints"`
	Role      string        `json:"role"`
	Status    string        `json:"status"`
}

type endpointsJSON struct {
	TCP       uint16 `json:"tcp"`
	QUIC      uint16 `json:"quic"`
	HTTP      uint16 `json:"http"`
	WebSocket uint16 `json:"websocket"`
}

var nodeStatusNames = []string{"healthy", "starting", "stopping", "unreachable", "maintenance", "unknown"}

func renderCluster(m *wire.ClusterMetadata) clusterJSON {
	j := clusterJSON{Name: string(m.Name), Nodes: make([]clusterNodeJSON, len(m.Nodes))}
	for i, n := range m.Nodes {
		role, status := "follower", "unknown"
		if n.Role == wire.ClusterRoleLeader {
			role = "leader"
		}
		if int(n.Status) < len(nodeStatusNames) {
			status = nodeStatusNames[n.Status]
		}
		j.Nodes[i] = clusterNodeJSON{Name: string(n.Name), IP: string(n.IP),
			Endpoints: endpointsJSON{TCP: n.TCPPort, QUIC: n.QUICPort, HTTP: n.HTTPPort, WebSocket: n.WebSocketPort},
			Role:      role, Status: status}
	}
	return j
}

// optionSpecJSON is one entry of GET /options/{scope} (apache/iggy
// core/server/src/http/system.rs).
type optionSpecJSON struct {
	Key          string `json:"key"`
	Kind         string `json:"kind"`
	DefaultValue []int  `json:"default_value"`
	Description  string `json:"description"`
}

// headerKindNames are the kinds' JSON names (core/common/src/types/), by code.
var headerKindNames = map[wire.HeaderKind]string{
	wire.HeaderRaw: "raw", wire.HeaderString: "string", wire.HeaderBool: "bool", wire.HeaderInt8: "int8",
	wire.HeaderInt16: "int16", wire.HeaderInt32: "int32", wire.HeaderInt64: "int64", wire.HeaderInt128: "int128",
	wire.HeaderUint8: "uint8", wire.HeaderUint16: "uint16", wire.HeaderUint32: "uint32", wire.HeaderUint64: "uint64",
	wire.HeaderUint128: "uint128", wire.HeaderFloat32: "float32", wire.HeaderFloat64: "float64",
}

func kindName(k wire.HeaderKind) string {
	if n, ok := headerKindNames[k]; ok {
		return n
	}
	return "raw"
}

func renderOptionSpec(o *wire.OptionDescriptor) optionSpecJSON {
	d := make([]int, len(o.Default))
	for i, b := range o.Default {
		d[i] = int(b)
	}
	return optionSpecJSON{Key: string(o.Key), Kind: kindName(o.Kind), DefaultValue: d, Description: string(o.Description)}
}

type consumerOffsetJSON struct {
	PartitionID   uint32 `json:"partition_id"`
	CurrentOffset uint64 `json:"current_offset"`
	StoredOffset  uint64 `json:"stored_offset"`
}
