package procstats

import (
	"fmt"
	"os"
	"testing"
	"testing/fstest"
	"time"
)

// fakeProc is a /proc tree of one process, pid 7, on a 2-core machine, whose
// tick counters the test advances.
type fakeProc struct {
	fs fstest.MapFS
}

func newFakeProc() *fakeProc {
	p := &fakeProc{fs: fstest.MapFS{
		"meminfo": {Data: []byte(procMeminfo)},
		"7/io":    {Data: []byte(procSelfIO)},
	}}
	p.set(0, 0, 0)
	return p
}

// set writes the machine's busy and idle ticks and the process's ticks.
func (p *fakeProc) set(busyTicks, idleTicks, processTicks uint64) {
	// busy split between user and system, idle between idle and iowait
	p.fs["stat"] = &fstest.MapFile{Data: fmt.Appendf(nil,
		"cpu  %d 0 %d %d %d 0 0 0 0 0\ncpu0 0 0 0 0 0 0 0 0 0 0\ncpu1 0 0 0 0 0 0 0 0 0 0\nintr 5\n",
		busyTicks-busyTicks/2, busyTicks/2, idleTicks-idleTicks/2, idleTicks/2)}
	p.fs["7/stat"] = &fstest.MapFile{Data: fmt.Appendf(nil,
		"7 (iggy-shard) S 1 7 7 0 -1 4194304 99 0 0 0 %d %d 0 0 20 0 9 0 3374233 3133440 413 0\n",
		processTicks-processTicks/3, processTicks/3)}
}

func TestSamplerCPUPercentages(t *testing.T) {
	proc := newFakeProc()
	s := NewSampler(liveFS{proc.fs}, "7", 4096)
	start := time.Unix(1_764_900_000, 0)

	// Since boot the machine was busy 300 of 1,000 ticks; the process has no
	// earlier sample, so it is 0 as the reference's first sample is.
	proc.set(300, 700, 50)
	f := s.Sample(start)
	if f.TotalCPUPercent != 30 || f.ProcessCPUPercent != 0 {
		t.Fatalf("first sample: total %v%%, process %v%%; want 30%%, 0%%", f.TotalCPUPercent, f.ProcessCPUPercent)
	}
	want := Figures{TotalCPUPercent: 30, ResidentBytes: 413 * 4096, TotalMemoryBytes: 24731408 << 10,
		AvailableMemoryBytes: 23372848 << 10, ReadBytes: 8192, WrittenBytes: 323932160, Threads: 9}
	if f != want {
		t.Fatalf("first sample: got %+v, want %+v", f, want)
	}

	// One second: 200 ticks over 2 cores, 100 a core. The machine was busy 50,
	// the process ran 75 ticks: 75% of a core, and the machine 25% busy.
	proc.set(350, 850, 125)
	f = s.Sample(start.Add(time.Second))
	if f.TotalCPUPercent != 25 || f.ProcessCPUPercent != 75 {
		t.Fatalf("after 1 s: total %v%%, process %v%%; want 25%%, 75%%", f.TotalCPUPercent, f.ProcessCPUPercent)
	}

	// Sooner than MinimumCPUInterval: the same percentages, not a new interval.
	proc.set(550, 850, 325)
	f = s.Sample(start.Add(time.Second + MinimumCPUInterval - time.Millisecond))
	if f.TotalCPUPercent != 25 || f.ProcessCPUPercent != 75 {
		t.Fatalf("within the minimum interval: total %v%%, process %v%%; want 25%%, 75%%", f.TotalCPUPercent, f.ProcessCPUPercent)
	}
	// Measured at last: the interval runs from the last measurement, 200 ticks
	// all busy, the process on both cores the whole time.
	f = s.Sample(start.Add(time.Second + MinimumCPUInterval))
	if f.TotalCPUPercent != 100 || f.ProcessCPUPercent != 200 {
		t.Fatalf("both cores busy: total %v%%, process %v%%; want 100%%, 200%%", f.TotalCPUPercent, f.ProcessCPUPercent)
	}

	// The process's time is accounted otherwise than the machine's ticks (its
	// scheduler run time, scaled), so it can run ahead of them: never more
	// than every core.
	proc.set(650, 850, 600)
	f = s.Sample(start.Add(2 * time.Second))
	if f.ProcessCPUPercent != 200 {
		t.Fatalf("process ahead of the machine: %v%%, want capped at 200%%", f.ProcessCPUPercent)
	}

	// A counter that went back (another /proc, a restarted container) gives
	// 0 for the interval, not a wrapped figure, and the next interval is fine.
	proc.set(100, 100, 10)
	f = s.Sample(start.Add(3 * time.Second))
	if f.TotalCPUPercent != 0 || f.ProcessCPUPercent != 0 {
		t.Fatalf("counters went back: total %v%%, process %v%%; want 0", f.TotalCPUPercent, f.ProcessCPUPercent)
	}
	proc.set(200, 200, 60)
	f = s.Sample(start.Add(4 * time.Second))
	if f.TotalCPUPercent != 50 || f.ProcessCPUPercent != 50 {
		t.Fatalf("after the counters went back: total %v%%, process %v%%; want 50%%, 50%%", f.TotalCPUPercent, f.ProcessCPUPercent)
	}
}

// A file that cannot be read or parsed leaves its figures 0 and the others
// whole; CPU is measured again from the last good sample once /proc/stat is back.
func TestSamplerUnreadableFiles(t *testing.T) {
	proc := newFakeProc()
	s := NewSampler(liveFS{proc.fs}, "7", 4096)
	start := time.Unix(1_764_900_000, 0)
	proc.set(300, 700, 50)
	s.Sample(start)

	stat := proc.fs["stat"]
	delete(proc.fs, "stat")
	proc.fs["meminfo"] = &fstest.MapFile{Data: []byte("MemTotal: 5")}
	f := s.Sample(start.Add(time.Second))
	if f.TotalCPUPercent != 0 || f.ProcessCPUPercent != 0 || f.TotalMemoryBytes != 0 || f.AvailableMemoryBytes != 0 {
		t.Fatalf("without /proc/stat and a truncated meminfo: %+v, want CPU and memory 0", f)
	}
	if f.ResidentBytes != 413*4096 || f.WrittenBytes != 323932160 || f.Threads != 9 {
		t.Fatalf("the readable files' figures: %+v", f)
	}

	proc.fs["stat"] = stat
	proc.set(500, 900, 150)
	f = s.Sample(start.Add(2 * time.Second))
	if f.TotalCPUPercent != 50 || f.ProcessCPUPercent != 50 {
		t.Fatalf("/proc/stat back: total %v%%, process %v%%; want 50%%, 50%% since the last good sample", f.TotalCPUPercent, f.ProcessCPUPercent)
	}

	// Without the process's stat its CPU is 0, and so is the next interval's
	// (it has no start); the machine's is measured all along.
	proc.set(600, 1000, 200)
	delete(proc.fs, "7/stat")
	if f = s.Sample(start.Add(3 * time.Second)); f.TotalCPUPercent != 50 || f.ProcessCPUPercent != 0 || f.ResidentBytes != 0 || f.Threads != 0 {
		t.Fatalf("without the process's stat: %+v", f)
	}
	proc.set(700, 1100, 300)
	if f = s.Sample(start.Add(4 * time.Second)); f.ProcessCPUPercent != 0 {
		t.Fatalf("the interval after the process's stat came back: process %v%%, want 0", f.ProcessCPUPercent)
	}
	proc.set(800, 1200, 350)
	if f = s.Sample(start.Add(5 * time.Second)); f.ProcessCPUPercent != 50 {
		t.Fatalf("the next interval: process %v%%, want 50%%", f.ProcessCPUPercent)
	}

	if f := NewSampler(fstest.MapFS{}, "self", 4096).Sample(start); f != (Figures{}) {
		t.Fatalf("an empty /proc: %+v, want all 0", f)
	}
}

// A long life: thousands of samples at irregular intervals, some within the
// minimum interval, on the production clock's scale; every measured figure
// stays in its range and matches the ticks given.
func TestSamplerLongLife(t *testing.T) {
	proc := newFakeProc()
	s := NewSampler(liveFS{proc.fs}, "7", 4096)
	now := time.Unix(1_764_900_000, 0)
	var busy, idle, process uint64
	lastMeasured := now
	var wantTotal, wantProcess float32
	for i := range 5000 {
		step := time.Duration(50+i%400) * time.Millisecond
		now = now.Add(step)
		ticks := uint64(step / (10 * time.Millisecond) * 2) // 100 Hz, 2 cores
		busyNow := ticks * uint64(i%5) / 4
		busy, idle, process = busy+busyNow, idle+ticks-busyNow, process+busyNow/2
		proc.set(busy, idle, process)
		f := s.Sample(now)
		if i == 0 || now.Sub(lastMeasured) >= MinimumCPUInterval {
			lastMeasured = now
			wantTotal, wantProcess = f.TotalCPUPercent, f.ProcessCPUPercent
		}
		if f.TotalCPUPercent != wantTotal || f.ProcessCPUPercent != wantProcess ||
			f.TotalCPUPercent < 0 || f.TotalCPUPercent > 100 || f.ProcessCPUPercent < 0 || f.ProcessCPUPercent > 200 {
			t.Fatalf("sample %d: %+v (want %v%%, %v%% until the next measurement)", i, f, wantTotal, wantProcess)
		}
	}
}

// The host's own /proc: the figures of this test process are plausible.
func TestSamplerHost(t *testing.T) {
	s := NewSampler(os.DirFS("/proc"), "self", os.Getpagesize())
	defer s.Close()
	f := s.Sample(time.Now())
	if f.ResidentBytes < 1<<20 || f.ResidentBytes > 24<<30 {
		t.Errorf("resident %d bytes, want within [1 MiB, 24 GiB]", f.ResidentBytes)
	}
	if f.TotalMemoryBytes == 0 || f.AvailableMemoryBytes == 0 || f.AvailableMemoryBytes > f.TotalMemoryBytes {
		t.Errorf("memory: total %d, available %d", f.TotalMemoryBytes, f.AvailableMemoryBytes)
	}
	if f.Threads < 1 || f.TotalCPUPercent <= 0 || f.TotalCPUPercent > 100 || f.ProcessCPUPercent != 0 {
		t.Errorf("threads %d, total CPU %v%%, process CPU %v%% (a first sample: 0)", f.Threads, f.TotalCPUPercent, f.ProcessCPUPercent)
	}
	// Closed, the sampler opens its files again at the next sample.
	s.Close()
	if f := s.Sample(time.Now()); f.ResidentBytes == 0 || f.TotalMemoryBytes == 0 || f.Threads == 0 {
		t.Errorf("a sample after Close: %+v", f)
	}
}

// BenchmarkSample is one GET_STATS's reading of the host's /proc and cgroup
// tree, confined as the server's sampler is.
func BenchmarkSample(b *testing.B) {
	s := NewSampler(os.DirFS("/proc"), "self", os.Getpagesize()).Confined([]int{0}, os.DirFS("/sys/fs/cgroup"))
	defer s.Close()
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(MinimumCPUInterval) // every sample measures CPU
		s.Sample(now)
	}
}

// Samples from many goroutines at once (GET_STATS over TCP and HTTP) share one
// Sampler: run with -race.
func TestSamplerConcurrent(t *testing.T) {
	s := NewSampler(os.DirFS("/proc"), "self", os.Getpagesize())
	defer s.Close()
	done := make(chan Figures)
	start := time.Now()
	for g := range 4 {
		go func() {
			var f Figures
			for i := range 50 {
				f = s.Sample(start.Add(time.Duration(g*50+i) * MinimumCPUInterval / 4))
			}
			done <- f
		}()
	}
	for range 4 {
		if f := <-done; f.ResidentBytes == 0 || f.TotalCPUPercent < 0 || f.TotalCPUPercent > 100 {
			t.Errorf("a concurrent sample: %+v", f)
		}
	}
}
