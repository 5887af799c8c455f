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
	// cgroups is the cgroup tree (/sys/fs/cgroup), nil to report the host's
	// memory whatever the process's cgroup limits.
	cgroups fs.FS
	// allowedCPUs are the cores the process may run on, ascending; the
	// machine's CPU percentage is theirs when they are fewer than all.
	allowedCPUs []int

	mu       sync.Mutex
	measured bool
	last     cpuSample
	percents cpuPercents
	// The files a sample reads, kept open with their buffers (heldFile), and
	// the cores of the sample before last, whose slice the next /proc/stat
	// is parsed into: a sample allocates nothing once they have grown.
	processStat, meminfo, processIO, processCgroup, machineStat heldFile
	heldCgroups                                                 heldCgroups
	spareCores                                                  []CoreTimes
}

// NewSampler samples process pid ("self" for the caller) of the /proc tree proc
// (os.DirFS("/proc") on a host), whose pages are pageSizeBytes. It keeps the
// files it reads open (four of /proc, and those of a confined process's
// cgroups) until Close.
func NewSampler(proc fs.FS, pid string, pageSizeBytes int) *Sampler {
	return &Sampler{proc: proc, pid: pid, pageSizeBytes: uint64(pageSizeBytes),
		processStat: heldFile{name: pid + "/stat"}, meminfo: heldFile{name: "meminfo"},
		processIO: heldFile{name: pid + "/io"}, processCgroup: heldFile{name: pid + "/cgroup"},
		machineStat: heldFile{name: "stat"}}
}

// Close closes the files the Sampler holds open; a Sample after Close opens
// them again.
func (s *Sampler) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, h := range [...]*heldFile{&s.processStat, &s.meminfo, &s.processIO, &s.processCgroup, &s.machineStat} {
		h.close()
	}
	s.heldCgroups.close()
}

// Confined scopes the figures to what the process may use, as the reference
// does for a process in a cpuset or a memory-limited cgroup: the machine's CPU
// percentage is the mean of allowedCPUs' when they are fewer than the
// machine's cores (take them before any thread is pinned to one), and the
// memory is CgroupMemory's of the cgroup tree cgroups (os.DirFS("/sys/fs/cgroup")).
// Call it before the first Sample.
func (s *Sampler) Confined(allowedCPUs []int, cgroups fs.FS) *Sampler {
	s.allowedCPUs, s.cgroups = allowedCPUs, cgroups
	return s
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
	// One sample at a time: the process's ticks and the machine's of a
	// measurement are read together, in the order of the measurements.
	s.mu.Lock()
	defer s.mu.Unlock()
	var f Figures
	process, processErr := parseHeld(&s.processStat, s.proc, now, ParseProcessStat)
	if processErr == nil {
		f.ResidentBytes = process.ResidentPages * s.pageSizeBytes
		f.Threads = process.Threads
	}
	if m, err := parseHeld(&s.meminfo, s.proc, now, ParseMeminfo); err == nil {
		if s.cgroups != nil {
			if cgroups, err := s.processCgroup.read(s.proc, now); err == nil {
				if scoped, ok := s.heldCgroups.memory(s.cgroups, cgroups, m, now); ok {
					m = scoped
				}
			}
		}
		f.TotalMemoryBytes, f.AvailableMemoryBytes = m.TotalBytes, m.AvailableBytes
	}
	if io, err := parseHeld(&s.processIO, s.proc, now, ParseIO); err == nil {
		f.ReadBytes, f.WrittenBytes = io.ReadBytes, io.WrittenBytes
	}

	if !s.measured || now.Sub(s.last.at) >= MinimumCPUInterval {
		var machine CPUTimes
		text, err := s.machineStat.read(s.proc, now)
		if err == nil {
			machine, err = parseCPUTimes(text, s.spareCores[:0])
		}
		if err != nil {
			// No measurement: the next sample measures against the last good one.
			s.percents = cpuPercents{}
		} else {
			cur := cpuSample{at: now, machine: machine, processTicks: process.CPUTicks, processMeasured: processErr == nil}
			s.percents = measureCPU(s.last, cur, s.allowedCPUs)
			s.spareCores = s.last.machine.Cores
			s.last, s.measured = cur, true
		}
	}
	f.ProcessCPUPercent, f.TotalCPUPercent = s.percents.process, s.percents.total
	return f
}

// measureCPU gives the percentages over the interval from prev to cur; prev is
// the zero sample before the first measurement, so the machine's first interval
// is the time since boot and the process's first percentage is 0 (and so is a
// core's, as the reference's sysinfo crate answers a first sample).
func measureCPU(prev, cur cpuSample, allowedCPUs []int) cpuPercents {
	if cur.machine.TotalTicks <= prev.machine.TotalTicks {
		return cpuPercents{}
	}
	totalTicks := cur.machine.TotalTicks - prev.machine.TotalTicks
	p := cpuPercents{total: busyPercent(totalTicks, prev.machine.IdleTicks, cur.machine.IdleTicks)}
	if scoped, ok := allowedCoresPercent(prev.machine.Cores, cur.machine.Cores, allowedCPUs); ok {
		p.total = scoped
	}
	if prev.processMeasured && cur.processMeasured && cur.processTicks >= prev.processTicks {
		// The interval's length in ticks of one core.
		cores := float64(len(cur.machine.Cores))
		perCoreTicks := float64(totalTicks) / cores
		percent := float64(cur.processTicks-prev.processTicks) / perCoreTicks * 100
		p.process = float32(min(percent, cores*100))
	}
	return p
}

// parseHeld reads a held file of fsys and parses it.
func parseHeld[T any](h *heldFile, fsys fs.FS, now time.Time, parse func([]byte) (T, error)) (T, error) {
	text, err := h.read(fsys, now)
	if err != nil {
		var zero T
		return zero, err
	}
	return parse(text)
}

// readBounded reads name of fsys, at most fileMaxBytes of it.
func readBounded(fsys fs.FS, name string) ([]byte, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, fileMaxBytes))
}

// busyPercent is the share of an interval of totalTicks that was not idle.
func busyPercent(totalTicks, prevIdleTicks, curIdleTicks uint64) float32 {
	idleTicks := curIdleTicks - min(prevIdleTicks, curIdleTicks)
	busyTicks := totalTicks - min(idleTicks, totalTicks)
	return float32(float64(busyTicks) / float64(totalTicks) * 100)
}

// allowedCoresPercent is the mean busy percentage of the allowed cores, when
// they are fewer than the machine's and each is in both samples; a core without
// an earlier sample counts 0.
func allowedCoresPercent(prev, cur []CoreTimes, allowed []int) (float32, bool) {
	if len(allowed) == 0 || len(allowed) >= len(cur) {
		return 0, false
	}
	find := func(cores []CoreTimes, cpu int) (CoreTimes, bool) {
		for _, c := range cores {
			if c.CPU == cpu {
				return c, true
			}
		}
		return CoreTimes{}, false
	}
	var sum float64
	for _, cpu := range allowed {
		c, ok := find(cur, cpu)
		if !ok {
			return 0, false
		}
		p, ok := find(prev, cpu)
		if ok && c.TotalTicks > p.TotalTicks {
			sum += float64(busyPercent(c.TotalTicks-p.TotalTicks, p.IdleTicks, c.IdleTicks))
		}
	}
	return float32(sum / float64(len(allowed))), true
}
