package linux

import "fmt"

// Host is the set of facts the server logs at startup and decides from (shard count,
// pinning, whether io_uring can run).
type Host struct {
	Kernel      KernelVersion
	AllowedCPUs []int
	Topology    Topology
	OpenFiles   Rlimit
	Memlock     Rlimit
	IOURing     IOURingProbe // ClassifyIOURing(h.IOURing) is the verdict
}

// Survey gathers the Host facts. It only reads (and creates, then closes, two tiny
// io_uring instances); raising limits and pinning are separate, explicit calls. Call it
// before any thread is pinned (see AllowedCPUs).
func Survey() (Host, error) {
	var h Host
	var err error
	if h.Kernel, err = RunningKernel(); err != nil {
		return Host{}, err
	}
	if h.AllowedCPUs, err = AllowedCPUs(); err != nil {
		return Host{}, err
	}
	if h.OpenFiles, err = OpenFilesLimit(); err != nil {
		return Host{}, err
	}
	if h.Memlock, err = MemlockLimit(); err != nil {
		return Host{}, err
	}
	h.Topology = HostTopology()
	h.IOURing = ProbeIOURing()
	return h, nil
}

// String is a short summary for the startup log.
func (h Host) String() string {
	return fmt.Sprintf("Linux %s; %d allowed CPUs %v; %s; RLIMIT_NOFILE %s; RLIMIT_MEMLOCK %s; io_uring_disabled=%d",
		h.Kernel, len(h.AllowedCPUs), h.AllowedCPUs, h.Topology, h.OpenFiles, h.Memlock, h.IOURing.DisabledSysctl)
}
