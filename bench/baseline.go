package bench

import (
	"context"
	"fmt"
	"os"
	"time"
)

// Baseline is what the machine moves with no server in the way, measured in the
// same run as the benchmark it is compared with: the producers' bytes over plain
// loopback TCP (RawLoopback), and the same frames written sequentially to a file,
// into the page cache and with an fdatasync after every MiB (what a topic's default
// save threshold asks of the server).
type Baseline struct {
	Loopback        Figures     `json:"loopback"`
	SequentialWrite []DiskWrite `json:"sequential_write"`
	// Ratios compares each role of the run with the baselines, wire bytes against
	// wire bytes: a ratio of 0.5 to loopback means the server path moved half of
	// what plain TCP moved on the same machine.
	Ratios []Ratio `json:"ratios"`
}

// DiskWrite is one sequential-write measurement.
type DiskWrite struct {
	Name           string  `json:"name"` // page-cache or fdatasync-per-MiB
	Dir            string  `json:"dir"`
	Bytes          uint64  `json:"bytes"`
	ElapsedSeconds float64 `json:"elapsed_seconds"`
	MBPerSec       float64 `json:"mb_per_second"`
}

// Ratio is one role's wire MB/s over each baseline's.
type Ratio struct {
	Role            Role    `json:"role"`
	ToLoopback      float64 `json:"to_loopback"`
	ToPageCache     float64 `json:"to_page_cache_write"`
	ToSyncedWrite   float64 `json:"to_fdatasync_per_mib_write"`
	WireMBPerSecond float64 `json:"wire_mb_per_second"`
}

// The DiskWrite names.
const (
	DiskWritePageCache = "page-cache"
	DiskWriteSynced    = "fdatasync-per-MiB"
)

const (
	// SyncEveryBytes is the synced write's fdatasync interval: the 1 MiB of a
	// topic's default save threshold (partition.Config).
	SyncEveryBytes = 1 << 20
	// baselineDiskBytesMax bounds each disk measurement, so that a big run does not
	// also write its whole volume twice more to the disk.
	baselineDiskBytesMax = 1 << 30
)

// MeasureBaseline measures the raw loopback bandwidth for cfg's shape (as many
// connections as cfg has producers, or consumers for a kind that only consumes,
// each writing cfg's batches; a run of --duration is measured for at most 3 s) and
// the sequential write bandwidth of a file in dir, for the same frames.
func MeasureBaseline(ctx context.Context, cfg Config, dir string) (*Baseline, error) {
	cfg = cfg.WithDefaults()
	loop := cfg
	loop.Kind = PinnedProducer
	loop.Producers = max(cfg.Producers, cfg.Consumers, 1)
	loop.Consumers, loop.ConsumerGroups, loop.Partitions = 0, 0, 1
	loop.Streams = loop.Producers
	loop.RateLimitBytesPerSecond = 0
	loop.Warmup = 0
	if loop.Duration > 0 {
		loop.Duration = min(loop.Duration, 3*time.Second)
	}
	lr, err := RawLoopback(ctx, loop)
	if err != nil {
		return nil, err
	}
	b := &Baseline{Loopback: lr.Totals[0]}
	frameBytes := int(lr.Totals[0].WireBytes / max(lr.Totals[0].Batches, 1))
	total := min(lr.Totals[0].WireBytes, baselineDiskBytesMax)
	for _, w := range []struct {
		name      string
		syncEvery int
	}{{DiskWritePageCache, 0}, {DiskWriteSynced, SyncEveryBytes}} {
		d, err := SequentialWrite(ctx, dir, frameBytes, total, w.syncEvery)
		if err != nil {
			return nil, err
		}
		d.Name = w.name
		b.SequentialWrite = append(b.SequentialWrite, d)
	}
	return b, nil
}

// SequentialWrite writes totalBytes in frames of frameBytes to a new file in dir,
// with an fdatasync after every syncEveryBytes (0: none, the page cache only), then
// removes the file. The rate counts the writes and syncs, not the file's creation.
func SequentialWrite(ctx context.Context, dir string, frameBytes int, totalBytes uint64, syncEveryBytes int) (DiskWrite, error) {
	d := DiskWrite{Dir: dir}
	if frameBytes < 1 {
		return d, fmt.Errorf("sequential write: frame of %d bytes", frameBytes)
	}
	f, err := os.CreateTemp(dir, "iggy-bench-baseline-*")
	if err != nil {
		return d, fmt.Errorf("sequential write: %w", err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	frame := make([]byte, frameBytes)
	unsynced := 0
	started := time.Now()
	for d.Bytes < totalBytes && ctx.Err() == nil {
		n, err := f.Write(frame)
		if err != nil {
			return d, fmt.Errorf("sequential write to %s: %w", f.Name(), err)
		}
		d.Bytes += uint64(n)
		unsynced += n
		if syncEveryBytes > 0 && unsynced >= syncEveryBytes {
			if err := f.Sync(); err != nil {
				return d, fmt.Errorf("sequential write to %s: fdatasync: %w", f.Name(), err)
			}
			unsynced = 0
		}
	}
	if err := ctx.Err(); err != nil {
		return d, err
	}
	elapsed := time.Since(started)
	d.ElapsedSeconds = elapsed.Seconds()
	if d.ElapsedSeconds > 0 {
		d.MBPerSec = float64(d.Bytes) / d.ElapsedSeconds / 1e6
	}
	return d, nil
}

// Compare sets r.Baseline to b, with the ratios of r's roles to it.
func (r *Report) Compare(b *Baseline) {
	b.Ratios = b.Ratios[:0]
	for _, f := range r.Totals {
		ratio := Ratio{Role: f.Role, WireMBPerSecond: f.WireMBPerSec}
		if b.Loopback.WireMBPerSec > 0 {
			ratio.ToLoopback = f.WireMBPerSec / b.Loopback.WireMBPerSec
		}
		for _, d := range b.SequentialWrite {
			if d.MBPerSec == 0 {
				continue
			}
			switch d.Name {
			case DiskWritePageCache:
				ratio.ToPageCache = f.WireMBPerSec / d.MBPerSec
			case DiskWriteSynced:
				ratio.ToSyncedWrite = f.WireMBPerSec / d.MBPerSec
			}
		}
		b.Ratios = append(b.Ratios, ratio)
	}
	r.Baseline = b
}
