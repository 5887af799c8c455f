package procstats

import (
	"io"
	"io/fs"
	"sync"
	"time"
)

// MinimumCPUInterval is the shortest interval CPU percentages are measured over
// (the reference's sysinfo MINIMUM_CPU_UPDATE_INTERVAL on Linux): a sample
// sooner after the last measured one repeats its percentages.
const MinimumCPUInterval = 200 * time.Millisecond

// fileMaxBytes bounds what a sample reads of one file. /proc/stat is the largest
// it reads: its cpu lines come first and take ~100 bytes a core.
const fileMaxBytes = 1 << 20

// Figures is one sample of the process and the machine. A figure whose file
// could not be read or parsed is 0.
type Figures struct {
	ProcessCPUPercent    float32
	TotalCPUPercent      float32
	ResidentBytes        uint64
	TotalMemoryBytes     uint64
	AvailableMemoryBytes uint64
	ReadBytes            uint64
	WrittenBytes         uint64
	Threads              uint32
}

// Sampler samples one process (self, or a pid) in a /proc tree; it keeps the
// last CPU measurement, so the CPU percentages cover the interval since then.
// Safe for concurrent use.
type Sampler struct {
	proc          fs.FS
	pid           string
	pageSizeBytes uint64

	mu       sync.Mutex
	measured bool
	last     cpuSample
	percents cpuPercents
}

// NewSampler samples process pid ("self" for the caller) of the /proc tree proc
// (os.DirFS("/proc") on a host), whose pages are pageSizeBytes.
func NewSampler(proc fs.FS, pid string, pageSizeBytes int) *Sampler {
	return &Sampler{proc: proc, pid: pid, pageSizeBytes: uint64(pageSizeBytes)}
}

// cpuSample is what a CPU measurement needs of one moment.
type cpuSample struct {
	at              time.Time
	machine         CPUTimes
	processTicks    uint64
	processMeasured bool
}

type cpuPercents struct{ process, total float32 }

// Sample reads the figures at now, the caller's clock (the interval of the CPU
// percentages is measured on it).
func (s *Sampler) Sample(now time.Time) Figures {
	var f Figures
	process, processErr := parseFile(s.proc, s.pid+"/stat", ParseProcessStat)
	if processErr == nil {
		f.ResidentBytes = process.ResidentPages * s.pageSizeBytes
		f.Threads = process.Threads
	}
	if m, err := parseFile(s.proc, "meminfo", ParseMeminfo); err == nil {
		f.TotalMemoryBytes, f.AvailableMemoryBytes = m.TotalBytes, m.AvailableBytes
	}
	if io, err := parseFile(s.proc, s.pid+"/io", ParseIO); err == nil {
		f.ReadBytes, f.WrittenBytes = io.ReadBytes, io.WrittenBytes
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.measured || now.Sub(s.last.at) >= MinimumCPUInterval {
		machine, err := parseFile(s.proc, "stat", ParseCPUTimes)
		if err != nil {
			// No measurement: the next sample measures against the last good one.
			s.percents = cpuPercents{}
		} else {
			cur := cpuSample{at: now, machine: machine, processTicks: process.CPUTicks, processMeasured: processErr == nil}
			s.percents = measureCPU(s.last, cur)
			s.last, s.measured = cur, true
		}
	}
	f.ProcessCPUPercent, f.TotalCPUPercent = s.percents.process, s.percents.total
	return f
}

// measureCPU gives the percentages over the interval from prev to cur; prev is
// the zero sample before the first measurement, so the machine's first interval
// is the time since boot and the process's first percentage is 0.
func measureCPU(prev, cur cpuSample) cpuPercents {
	if cur.machine.TotalTicks <= prev.machine.TotalTicks {
		return cpuPercents{}
	}
	totalTicks := cur.machine.TotalTicks - prev.machine.TotalTicks
	idleTicks := cur.machine.IdleTicks - min(prev.machine.IdleTicks, cur.machine.IdleTicks)
	busyTicks := totalTicks - min(idleTicks, totalTicks)
	p := cpuPercents{total: float32(float64(busyTicks) / float64(totalTicks) * 100)}
	if prev.processMeasured && cur.processMeasured && cur.processTicks >= prev.processTicks {
		// The interval's length in ticks of one core.
		cores := float64(cur.machine.CPUs)
		perCoreTicks := float64(totalTicks) / cores
		percent := float64(cur.processTicks-prev.processTicks) / perCoreTicks * 100
		p.process = float32(min(percent, cores*100))
	}
	return p
}

// parseFile reads name of fsys, at most fileMaxBytes of it, and parses it.
func parseFile[T any](fsys fs.FS, name string, parse func([]byte) (T, error)) (T, error) {
	text, err := readBounded(fsys, name)
	if err != nil {
		var zero T
		return zero, err
	}
	return parse(text)
}

func readBounded(fsys fs.FS, name string) ([]byte, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, fileMaxBytes))
}
