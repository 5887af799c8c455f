package wire

import (
	"encoding/binary"
	"math"
)

// Stats is the GetStats reply (apache/iggy
// core/binary_protocol/src/responses/system/get_stats.rs): a 108-byte numeric prefix,
// five Str32 strings, the server semver, the cache metrics and three trailing numbers.
//
//	  0 process_id u32          4 cpu_usage f32            8 total_cpu_usage f32
//	 12 memory_usage u64       20 total_memory u64        28 available_memory u64
//	 36 run_time u64 µs        44 start_time u64 µs       52 read_bytes u64
//	 60 written_bytes u64      68 messages_size_bytes u64 76 streams_count u32
//	 80 topics_count u32       84 partitions_count u32    88 segments_count u32
//	 92 messages_count u64    100 clients_count u32      104 consumer_groups_count u32
//	108 hostname, os_name, os_version, kernel_version, iggy_server_version: Str32 each
//	    iggy_server_semver u32 (major·1_000_000 + minor·1_000 + patch; 0 = unknown)
//	    cache_metrics_count u32, then 32 bytes each:
//	      [stream_id u32][topic_id u32][partition_id u32][hits u64][misses u64][hit_ratio f32]
//	    threads_count u32, free_disk_space u64, total_disk_space u64
//
// (The crate's comment says the prefix is 104 bytes; its encoder writes 108.)
type Stats struct {
	ProcessID            uint32
	CPUUsage             float32
	TotalCPUUsage        float32
	MemoryUsageBytes     uint64
	TotalMemoryBytes     uint64
	AvailableMemoryBytes uint64
	RunTimeMicros        uint64
	StartTimeMicros      uint64
	ReadBytes            uint64
	WrittenBytes         uint64
	MessagesSizeBytes    uint64
	StreamsCount         uint32
	TopicsCount          uint32
	PartitionsCount      uint32
	SegmentsCount        uint32
	MessagesCount        uint64
	ClientsCount         uint32
	ConsumerGroupsCount  uint32
	Hostname             []byte
	OSName               []byte
	OSVersion            []byte
	KernelVersion        []byte
	IggyServerVersion    []byte
	IggyServerSemver     uint32
	CacheMetrics         []CacheMetric
	ThreadsCount         uint32
	FreeDiskSpaceBytes   uint64
	TotalDiskSpaceBytes  uint64
}

// StatsSemver packs a server version for Stats.IggyServerSemver:
// major·1_000_000 + minor·1_000 + patch (0.9.0 is 9000). It is not the login
// reply's protocol version packing.
func StatsSemver(major, minor, patch uint32) uint32 {
	return major*1_000_000 + minor*1_000 + patch
}

// CacheMetric is one partition's cache hit statistics in Stats. The reference server
// always sends none.
type CacheMetric struct {
	StreamID    uint32
	TopicID     uint32
	PartitionID uint32
	Hits        uint64
	Misses      uint64
	HitRatio    float32
}

const (
	statsPrefixBytes      = 108
	cacheMetricNumBytes   = 32
	statsFixedSuffixBytes = 4 + 4 + 4 + 8 + 8 // semver, metrics count, threads, disk ×2
)

// EncodedLen is the exact number of bytes Append writes.
func (s *Stats) EncodedLen() int {
	return statsPrefixBytes + 5*4 + len(s.Hostname) + len(s.OSName) + len(s.OSVersion) +
		len(s.KernelVersion) + len(s.IggyServerVersion) + statsFixedSuffixBytes +
		cacheMetricNumBytes*len(s.CacheMetrics)
}

// Append encodes s onto b.
func (s *Stats) Append(b []byte) []byte {
	b = appendU32(b, s.ProcessID)
	b = appendU32(b, math.Float32bits(s.CPUUsage))
	b = appendU32(b, math.Float32bits(s.TotalCPUUsage))
	b = appendU64(b, s.MemoryUsageBytes)
	b = appendU64(b, s.TotalMemoryBytes)
	b = appendU64(b, s.AvailableMemoryBytes)
	b = appendU64(b, s.RunTimeMicros)
	b = appendU64(b, s.StartTimeMicros)
	b = appendU64(b, s.ReadBytes)
	b = appendU64(b, s.WrittenBytes)
	b = appendU64(b, s.MessagesSizeBytes)
	b = appendU32(b, s.StreamsCount)
	b = appendU32(b, s.TopicsCount)
	b = appendU32(b, s.PartitionsCount)
	b = appendU32(b, s.SegmentsCount)
	b = appendU64(b, s.MessagesCount)
	b = appendU32(b, s.ClientsCount)
	b = appendU32(b, s.ConsumerGroupsCount)
	b = appendBlock32(b, s.Hostname)
	b = appendBlock32(b, s.OSName)
	b = appendBlock32(b, s.OSVersion)
	b = appendBlock32(b, s.KernelVersion)
	b = appendBlock32(b, s.IggyServerVersion)
	b = appendU32(b, s.IggyServerSemver)
	b = appendU32(b, uint32(len(s.CacheMetrics)))
	for i := range s.CacheMetrics {
		m := &s.CacheMetrics[i]
		b = appendU32(b, m.StreamID)
		b = appendU32(b, m.TopicID)
		b = appendU32(b, m.PartitionID)
		b = appendU64(b, m.Hits)
		b = appendU64(b, m.Misses)
		b = appendU32(b, math.Float32bits(m.HitRatio))
	}
	b = appendU32(b, s.ThreadsCount)
	b = appendU64(b, s.FreeDiskSpaceBytes)
	return appendU64(b, s.TotalDiskSpaceBytes)
}

// Decode reads a GetStats body, reusing the capacity of s.CacheMetrics. The string
// fields alias body. On error s is unchanged.
func (s *Stats) Decode(body []byte) error {
	d := newDecoder(body)
	var v Stats
	// One bounds check for the 108-byte numeric prefix instead of one per field.
	b := d.take(statsPrefixBytes)
	if b == nil {
		return d.err
	}
	le := binary.LittleEndian
	v.ProcessID = le.Uint32(b[0:])
	v.CPUUsage = math.Float32frombits(le.Uint32(b[4:]))
	v.TotalCPUUsage = math.Float32frombits(le.Uint32(b[8:]))
	v.MemoryUsageBytes = le.Uint64(b[12:])
	v.TotalMemoryBytes = le.Uint64(b[20:])
	v.AvailableMemoryBytes = le.Uint64(b[28:])
	v.RunTimeMicros = le.Uint64(b[36:])
	v.StartTimeMicros = le.Uint64(b[44:])
	v.ReadBytes = le.Uint64(b[52:])
	v.WrittenBytes = le.Uint64(b[60:])
	v.MessagesSizeBytes = le.Uint64(b[68:])
	v.StreamsCount = le.Uint32(b[76:])
	v.TopicsCount = le.Uint32(b[80:])
	v.PartitionsCount = le.Uint32(b[84:])
	v.SegmentsCount = le.Uint32(b[88:])
	v.MessagesCount = le.Uint64(b[92:])
	v.ClientsCount = le.Uint32(b[100:])
	v.ConsumerGroupsCount = le.Uint32(b[104:])
	v.Hostname = d.str32()
	v.OSName = d.str32()
	v.OSVersion = d.str32()
	v.KernelVersion = d.str32()
	v.IggyServerVersion = d.str32()
	v.IggyServerSemver = d.u32()
	count := d.u32()
	if !d.countFits(count, cacheMetricNumBytes) {
		return d.err
	}
	raw := d.take(cacheMetricNumBytes * int(count))
	v.ThreadsCount = d.u32()
	v.FreeDiskSpaceBytes = d.u64()
	v.TotalDiskSpaceBytes = d.u64()
	if err := d.end(); err != nil {
		return err
	}
	metrics := growLen(s.CacheMetrics[:0], int(count))
	for i := range metrics {
		e := raw[cacheMetricNumBytes*i:]
		metrics[i] = CacheMetric{
			StreamID:    binary.LittleEndian.Uint32(e),
			TopicID:     binary.LittleEndian.Uint32(e[4:]),
			PartitionID: binary.LittleEndian.Uint32(e[8:]),
			Hits:        binary.LittleEndian.Uint64(e[12:]),
			Misses:      binary.LittleEndian.Uint64(e[20:]),
			HitRatio:    math.Float32frombits(binary.LittleEndian.Uint32(e[28:])),
		}
	}
	v.CacheMetrics = metrics
	*s = v
	return nil
}
