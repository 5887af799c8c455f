package wire

import (
	"math"
	"math/rand/v2"
	"testing"
)

func randStats(r *rand.Rand) *Stats {
	s := &Stats{
		ProcessID: r.Uint32(), CPUUsage: r.Float32() * 100, TotalCPUUsage: r.Float32() * 100,
		MemoryUsageBytes: r.Uint64(), TotalMemoryBytes: r.Uint64(), AvailableMemoryBytes: r.Uint64(),
		RunTimeMicros: r.Uint64(), StartTimeMicros: r.Uint64(), ReadBytes: r.Uint64(),
		WrittenBytes: r.Uint64(), MessagesSizeBytes: r.Uint64(), StreamsCount: r.Uint32(),
		TopicsCount: r.Uint32(), PartitionsCount: r.Uint32(), SegmentsCount: r.Uint32(),
		MessagesCount: r.Uint64(), ClientsCount: r.Uint32(), ConsumerGroupsCount: r.Uint32(),
		Hostname: randName(r), OSName: []byte("Linux"), OSVersion: randName(r),
		KernelVersion: randName(r), IggyServerVersion: []byte("0.9.0-edge.5"),
		IggyServerSemver: r.Uint32(), ThreadsCount: r.Uint32(),
		FreeDiskSpaceBytes: r.Uint64(), TotalDiskSpaceBytes: r.Uint64(),
	}
	if r.IntN(3) == 0 {
		s.Hostname = nil // Str32 may be empty
	}
	for range r.IntN(3) {
		s.CacheMetrics = append(s.CacheMetrics, CacheMetric{
			StreamID: r.Uint32(), TopicID: r.Uint32(), PartitionID: r.Uint32(),
			Hits: r.Uint64(), Misses: r.Uint64(), HitRatio: r.Float32(),
		})
	}
	return s
}

func TestStatsRoundTrip(t *testing.T) {
	checkRoundTrip(t, 16, randStats)
}

// The f32 fields travel as raw IEEE-754 bits, NaN payloads included.
func TestStatsFloatBits(t *testing.T) {
	nan := math.Float32frombits(0x7fc00001)
	s := Stats{CPUUsage: nan, TotalCPUUsage: float32(math.Inf(-1))}
	var got Stats
	if err := got.Decode(s.Append(nil)); err != nil {
		t.Fatal(err)
	}
	if math.Float32bits(got.CPUUsage) != 0x7fc00001 || !math.IsInf(float64(got.TotalCPUUsage), -1) {
		t.Fatalf("floats %v %v", got.CPUUsage, got.TotalCPUUsage)
	}
}

func TestStatsPrefixIs108Bytes(t *testing.T) {
	var s Stats
	b := s.Append(nil)
	// With empty strings and no metrics: prefix, five empty Str32, semver, count,
	// threads and the two disk sizes.
	if want := 108 + 5*4 + 4 + 4 + 4 + 8 + 8; len(b) != want {
		t.Fatalf("%d bytes, want %d", len(b), want)
	}
}

func BenchmarkStatsEncode(b *testing.B) {
	s := randStats(rand.New(rand.NewPCG(1, 1)))
	buf := make([]byte, 0, 1024)
	b.SetBytes(int64(s.EncodedLen()))
	b.ReportAllocs()
	for b.Loop() {
		buf = s.Append(buf[:0])
	}
}

func BenchmarkStatsDecode(b *testing.B) {
	body := randStats(rand.New(rand.NewPCG(1, 1))).Append(nil)
	var s Stats
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if err := s.Decode(body); err != nil {
			b.Fatal(err)
		}
	}
}

func TestStatsSemver(t *testing.T) {
	if got := StatsSemver(0, 9, 0); got != 9000 {
		t.Fatalf("0.9.0 = %d", got)
	}
	if got := StatsSemver(1, 2, 3); got != 1_002_003 {
		t.Fatalf("1.2.3 = %d", got)
	}
}

// Baselines for the two benchmarks above: encoding into a fresh buffer, and
// decoding into a fresh value with the strings copied out, the Go SDK's way.
func BenchmarkStatsEncodeFreshBuffer(b *testing.B) {
	s := randStats(rand.New(rand.NewPCG(1, 1)))
	b.SetBytes(int64(s.EncodedLen()))
	b.ReportAllocs()
	for b.Loop() {
		if out := s.Append(nil); len(out) == 0 {
			b.Fatal("empty")
		}
	}
}

func BenchmarkStatsDecodeFreshStrings(b *testing.B) {
	body := randStats(rand.New(rand.NewPCG(1, 1))).Append(nil)
	type sdkStats struct {
		Stats
		Hostname, OSName, OSVersion, KernelVersion, IggyServerVersion string
	}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		s := new(Stats)
		if err := s.Decode(body); err != nil {
			b.Fatal(err)
		}
		out := &sdkStats{
			Stats: *s, Hostname: string(s.Hostname), OSName: string(s.OSName), OSVersion: string(s.OSVersion),
			KernelVersion: string(s.KernelVersion), IggyServerVersion: string(s.IggyServerVersion),
		}
		if out.OSName == "" {
			b.Fatal("no os name")
		}
	}
}
