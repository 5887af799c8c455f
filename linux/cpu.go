package linux

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"unsafe"

	"github.com/klauspost/cpuid/v2"
	"golang.org/x/sys/unix"
)

// cpuSetBitsMax bounds the affinity mask we are willing to size (the kernel's
// nr_cpu_ids); 64Ki CPUs is far beyond any machine Linux runs on today.
const cpuSetBitsMax = 1 << 16

// AllowedCPUs returns the CPUs the calling thread may run on, ascending. Call it once at
// startup, before any shard pins its thread: a new thread inherits the mask of the
// thread that created it, so the answer is the process's allowed set (cgroup cpuset,
// taskset, container limits) only while no thread has been narrowed.
func AllowedCPUs() ([]int, error) {
	for bitCount := 1024; bitCount <= cpuSetBitsMax; bitCount *= 2 {
		set := unix.NewCPUSet(bitCount)
		err := unix.SchedGetaffinityDynamic(0, set)
		if errors.Is(err, unix.EINVAL) {
			continue // the kernel's mask is larger than ours
		}
		if err != nil {
			return nil, fmt.Errorf("linux: sched_getaffinity: %w", err)
		}
		cpus := make([]int, 0, set.Count())
		for cpu := range bitCount {
			if set.IsSet(cpu) {
				cpus = append(cpus, cpu)
			}
		}
		return cpus, nil
	}
	return nil, fmt.Errorf("linux: sched_getaffinity: affinity mask larger than %d CPUs", cpuSetBitsMax)
}

// PinCurrentThread locks the calling goroutine to its OS thread (runtime.LockOSThread)
// and restricts that thread to cpu. sched_setaffinity with pid 0 acts on the calling
// thread only, which is why the goroutine must be locked first: otherwise the Go
// scheduler could move the goroutine off the pinned thread, or run other goroutines on
// it.
//
// The goroutine stays locked. Do not call runtime.UnlockOSThread afterwards: the pinned
// thread would go back to the scheduler's pool with its narrowed mask. A shard's
// goroutine should instead return while still locked, which makes the runtime destroy
// the thread.
func PinCurrentThread(cpu int) error {
	if cpu < 0 || cpu >= cpuSetBitsMax {
		return fmt.Errorf("linux: pin to CPU %d: out of range [0, %d)", cpu, cpuSetBitsMax)
	}
	runtime.LockOSThread()
	set := unix.NewCPUSet(max(cpu+1, 1024))
	set.Set(cpu)
	if err := unix.SchedSetaffinityDynamic(0, set); err != nil {
		if errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("linux: pin to CPU %d: not in the process's allowed CPUs (cpuset or taskset): %w", cpu, err)
		}
		return fmt.Errorf("linux: pin to CPU %d: sched_setaffinity: %w", cpu, err)
	}
	return nil
}

// Topology is what the CPU says about itself, for choosing the shard count and for the
// startup log. Counts are 0 and cache sizes -1 when undetectable (common in VMs).
type Topology struct {
	Brand          string
	Vendor         string
	PhysicalCores  int
	ThreadsPerCore int // 1 when undetectable
	LogicalCores   int
	CacheLineBytes int
	L1DataBytes    int
	L1InstrBytes   int
	L2Bytes        int
	L3Bytes        int
	Hypervisor     string // empty on bare metal
}

// HostTopology reads the topology from CPUID (github.com/klauspost/cpuid/v2).
func HostTopology() Topology {
	c := cpuid.CPU
	t := Topology{
		Brand:          strings.TrimSpace(c.BrandName),
		Vendor:         c.VendorString,
		PhysicalCores:  c.PhysicalCores,
		ThreadsPerCore: c.ThreadsPerCore,
		LogicalCores:   c.LogicalCores,
		CacheLineBytes: c.CacheLine,
		L1DataBytes:    c.Cache.L1D,
		L1InstrBytes:   c.Cache.L1I,
		L2Bytes:        c.Cache.L2,
		L3Bytes:        c.Cache.L3,
	}
	if c.VM() {
		t.Hypervisor = c.HypervisorVendorString
		if t.Hypervisor == "" {
			t.Hypervisor = "unknown"
		}
	}
	if t.ThreadsPerCore < 1 {
		t.ThreadsPerCore = 1
	}
	return t
}

// String is one line for the startup log.
func (t Topology) String() string {
	s := fmt.Sprintf("%s (%s): %d physical cores x %d threads = %d logical; cache line %d B, L1d %s, L1i %s, L2 %s, L3 %s",
		t.Brand, t.Vendor, t.PhysicalCores, t.ThreadsPerCore, t.LogicalCores, t.CacheLineBytes,
		cacheSize(t.L1DataBytes), cacheSize(t.L1InstrBytes), cacheSize(t.L2Bytes), cacheSize(t.L3Bytes))
	if t.Hypervisor != "" {
		s += "; hypervisor " + t.Hypervisor
	}
	return s
}

func cacheSize(bytes int) string {
	switch {
	case bytes < 0:
		return "unknown"
	case bytes >= 1<<20 && bytes%(1<<20) == 0:
		return strconv.Itoa(bytes>>20) + " MiB"
	case bytes >= 1<<10 && bytes%(1<<10) == 0:
		return strconv.Itoa(bytes>>10) + " KiB"
	}
	return strconv.Itoa(bytes) + " B"
}

// CPUCore identifies the physical core a logical CPU belongs to.
type CPUCore struct {
	Package int // physical_package_id
	Core    int // core_id, unique within a package
}

// CoreOf reads which physical core cpu belongs to from sysfs
// (/sys/devices/system/cpu/cpuN/topology).
func CoreOf(cpu int) (CPUCore, error) {
	dir := "/sys/devices/system/cpu/cpu" + strconv.Itoa(cpu) + "/topology/"
	pkg, err := readIntFile(dir + "physical_package_id")
	if err != nil {
		return CPUCore{}, err
	}
	core, err := readIntFile(dir + "core_id")
	if err != nil {
		return CPUCore{}, err
	}
	return CPUCore{Package: pkg, Core: core}, nil
}

// FirstThreadPerCore keeps, of cpus, the first logical CPU of each physical core, in
// order: a shard per physical core, so that two shards never share a core's execution
// units through SMT. core maps a CPU to its core (CoreOf on a host, a table in tests).
func FirstThreadPerCore(cpus []int, core func(cpu int) (CPUCore, error)) ([]int, error) {
	seen := make(map[CPUCore]bool, len(cpus))
	kept := make([]int, 0, len(cpus))
	for _, cpu := range cpus {
		c, err := core(cpu)
		if err != nil {
			return nil, fmt.Errorf("linux: topology of CPU %d: %w", cpu, err)
		}
		if !seen[c] {
			seen[c] = true
			kept = append(kept, cpu)
		}
	}
	return kept, nil
}

// SuggestShardCount is the default shard count: one shard per allowed CPU, capped by
// configuredMax when it is positive, and at least one.
func SuggestShardCount(allowedCPUCount, configuredMax int) int {
	n := allowedCPUCount
	if configuredMax > 0 && n > configuredMax {
		n = configuredMax
	}
	return max(n, 1)
}

func readIntFile(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	v, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	return v, nil
}

// NameCurrentThread sets the calling thread's name (at most 15 bytes are kept), which
// top -H, perf and /proc/<pid>/task/<tid>/comm show: a shard's thread reads "shard-3"
// there instead of the process name.
func NameCurrentThread(name string) error {
	if len(name) > 15 {
		name = name[:15]
	}
	b := append([]byte(name), 0)
	if err := unix.Prctl(unix.PR_SET_NAME, uintptr(unsafe.Pointer(&b[0])), 0, 0, 0); err != nil {
		return fmt.Errorf("linux: naming thread %q: %w", name, err)
	}
	return nil
}

// NiceCurrentThread sets the calling thread's nice value (-20..19; higher yields
// more), for a thread of background work that must not take the CPU from the
// shards: on Linux the nice value is per thread (setpriority on its tid). Raising it
// needs no privilege; lowering it below the current value does.
func NiceCurrentThread(nice int) error {
	if err := unix.Setpriority(unix.PRIO_PROCESS, unix.Gettid(), nice); err != nil {
		return fmt.Errorf("linux: nice %d for thread %d: %w", nice, unix.Gettid(), err)
	}
	return nil
}
