package linux

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestParseKernelVersion(t *testing.T) {
	tests := []struct {
		release string
		want    KernelVersion
		wantErr bool
	}{
		{"6.18.44-fc-v595", KernelVersion{6, 18, 44}, false},
		{"6.1.0-18-amd64", KernelVersion{6, 1, 0}, false},
		{"5.15.0-91-generic", KernelVersion{5, 15, 0}, false},
		{"6.8.0-rc3+", KernelVersion{6, 8, 0}, false},
		{"6.1", KernelVersion{6, 1, 0}, false},
		{"6.1-rt", KernelVersion{6, 1, 0}, false},
		{"4.19.282+", KernelVersion{4, 19, 282}, false},
		{"6.10.3.fc40.x86_64", KernelVersion{6, 10, 3}, false},
		{"", KernelVersion{}, true},
		{"six.one", KernelVersion{}, true},
		{"6", KernelVersion{}, true},
		{"6.", KernelVersion{}, true},
		{"6-rc1", KernelVersion{}, true},
		{"99999999999.1.1", KernelVersion{}, true},
	}
	for _, tt := range tests {
		got, err := ParseKernelVersion(tt.release)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("ParseKernelVersion(%q) = %v, %v; want %v, error %v", tt.release, got, err, tt.want, tt.wantErr)
		}
	}
}

func FuzzParseKernelVersion(f *testing.F) {
	for _, s := range []string{"6.18.44-fc-v595", "5.15.0-91-generic", "6.1", "", "1.2.3.4", "0.0.0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, release string) {
		v, err := ParseKernelVersion(release)
		if err != nil {
			return
		}
		if v.Major < 0 || v.Minor < 0 || v.Patch < 0 {
			t.Fatalf("%q parsed to negative %v", release, v)
		}
		again, err := ParseKernelVersion(v.String())
		if err != nil || again != v {
			t.Fatalf("%q -> %v -> %q -> %v, %v", release, v, v.String(), again, err)
		}
	})
}

func TestKernelVersionLess(t *testing.T) {
	ordered := []KernelVersion{{4, 19, 0}, {5, 1, 0}, {5, 15, 99}, {6, 0, 0}, {6, 1, 0}, {6, 1, 1}, {6, 10, 0}}
	for i, v := range ordered {
		for j, w := range ordered {
			if got := v.Less(w); got != (i < j) {
				t.Errorf("%v.Less(%v) = %v", v, w, got)
			}
		}
	}
}

func TestClassifyIOURing(t *testing.T) {
	modern := KernelVersion{6, 8, 0}
	tests := []struct {
		name      string
		probe     IOURingProbe
		wantCause IOURingCause // 0: available
		wantText  []string     // the message must name the cause and the remedy
	}{
		{"available", IOURingProbe{DisabledSysctl: 0, Kernel: modern}, 0, nil},
		{"available, no sysctl", IOURingProbe{DisabledSysctl: -1, Kernel: KernelVersion{6, 1, 0}}, 0, nil},
		{"available, kernel unknown", IOURingProbe{DisabledSysctl: -1}, 0, nil},
		{"sysctl 2", IOURingProbe{DisabledSysctl: 2, GroupID: -1, SetupErrno: unix.EPERM, Kernel: modern},
			CauseSysctlDisabled, []string{"kernel.io_uring_disabled=2", "sysctl -w kernel.io_uring_disabled=0"}},
		{"sysctl 1", IOURingProbe{DisabledSysctl: 1, GroupID: 1005, SetupErrno: unix.EPERM, Kernel: modern},
			CauseSysctlGroup, []string{"kernel.io_uring_disabled=1", "gid 1005", "add the server's user to that group"}},
		{"sysctl 1, group unknown", IOURingProbe{DisabledSysctl: 1, GroupID: -1, SetupErrno: unix.EPERM, Kernel: modern},
			CauseSysctlGroup, []string{"kernel.io_uring_group and"}},
		{"seccomp", IOURingProbe{DisabledSysctl: 0, SetupErrno: unix.EPERM, Kernel: modern},
			CauseSeccomp, []string{"EPERM", "seccomp", "--security-opt seccomp=unconfined", "io_uring_register"}},
		{"seccomp, no sysctl", IOURingProbe{DisabledSysctl: -1, SetupErrno: unix.EPERM, Kernel: KernelVersion{6, 1, 0}},
			CauseSeccomp, []string{"seccomp"}},
		{"enosys on an old kernel", IOURingProbe{DisabledSysctl: -1, SetupErrno: unix.ENOSYS, Kernel: KernelVersion{4, 19, 0}},
			CauseNotBuiltIn, []string{"predates io_uring", "6.1 or newer"}},
		{"enosys on a new kernel", IOURingProbe{DisabledSysctl: -1, SetupErrno: unix.ENOSYS, Kernel: modern},
			CauseNotBuiltIn, []string{"CONFIG_IO_URING", "seccomp"}},
		{"works but kernel too old", IOURingProbe{DisabledSysctl: -1, Kernel: KernelVersion{5, 15, 0}},
			CauseKernelTooOld, []string{"5.15.0 is older than 6.1.0", "6.1 or newer"}},
		{"flags rejected", IOURingProbe{DisabledSysctl: -1, FlagsErrno: unix.EINVAL, Kernel: modern},
			CauseFlagsUnsupported, []string{"DEFER_TASKRUN", "EINVAL"}},
		{"einval on an old kernel", IOURingProbe{DisabledSysctl: -1, SetupErrno: unix.EINVAL, Kernel: KernelVersion{5, 4, 0}},
			CauseKernelTooOld, []string{"EINVAL", "older than 6.1.0"}},
		{"einval on a new kernel", IOURingProbe{DisabledSysctl: -1, SetupErrno: unix.EINVAL, Kernel: modern},
			CauseOther, []string{"EINVAL", "6.8.0"}},
		{"enomem", IOURingProbe{DisabledSysctl: 0, SetupErrno: unix.ENOMEM, Kernel: modern},
			CauseResources, []string{"ENOMEM", "ulimit -l"}},
		{"emfile", IOURingProbe{DisabledSysctl: 0, SetupErrno: unix.EMFILE, Kernel: modern},
			CauseResources, []string{"EMFILE", "ulimit -n"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ClassifyIOURing(tt.probe)
			if tt.wantCause == 0 {
				if err != nil {
					t.Fatalf("ClassifyIOURing = %v, want available", err)
				}
				return
			}
			var ue *IOURingError
			if !errors.As(err, &ue) {
				t.Fatalf("ClassifyIOURing = %v, want an *IOURingError", err)
			}
			if ue.Cause != tt.wantCause {
				t.Fatalf("cause %v, want %v (%v)", ue.Cause, tt.wantCause, err)
			}
			for _, s := range tt.wantText {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("message %q lacks %q", err, s)
				}
			}
			if e := tt.probe.SetupErrno; e != 0 && !errors.Is(err, e) {
				t.Errorf("error does not unwrap to %v", e)
			}
			if ue.Cause.String() == "" || strings.HasPrefix(ue.Cause.String(), "IOURingCause(") {
				t.Errorf("cause %d has no name", ue.Cause)
			}
		})
	}
}

// This host is expected to run the ring; if it cannot, the message says why and what to do.
func TestCheckIOURingOnThisHost(t *testing.T) {
	p, err := CheckIOURing()
	if err != nil {
		t.Fatalf("%v (probe %+v)", err, p)
	}
	if p.Kernel.IsZero() || p.Features == 0 {
		t.Fatalf("probe found no kernel version or no features: %+v", p)
	}
	t.Logf("io_uring available: kernel %v, sysctl io_uring_disabled=%d, features %#x", p.Kernel, p.DisabledSysctl, p.Features)
}

func TestRunningKernel(t *testing.T) {
	v, err := RunningKernel()
	if err != nil {
		t.Fatal(err)
	}
	if v.Major < 3 {
		t.Fatalf("running kernel %v", v)
	}
}

func TestAllowedCPUsAndPin(t *testing.T) {
	cpus, err := AllowedCPUs()
	if err != nil {
		t.Fatal(err)
	}
	if len(cpus) == 0 || !slices.IsSorted(cpus) || len(cpus) > runtime.NumCPU() {
		t.Fatalf("AllowedCPUs = %v (NumCPU %d)", cpus, runtime.NumCPU())
	}
	target := cpus[len(cpus)-1]
	type result struct {
		cpus []int
		err  error
	}
	done := make(chan result)
	// The goroutine ends while locked, so the runtime destroys the pinned thread instead
	// of reusing it.
	go func() {
		if err := PinCurrentThread(target); err != nil {
			done <- result{err: err}
			return
		}
		got, err := AllowedCPUs()
		done <- result{got, err}
	}()
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	if !slices.Equal(r.cpus, []int{target}) {
		t.Fatalf("after pinning to %d the thread may run on %v", target, r.cpus)
	}

	notAllowed := -1
	for cpu := range 1024 {
		if !slices.Contains(cpus, cpu) {
			notAllowed = cpu
			break
		}
	}
	go func() {
		done <- result{err: PinCurrentThread(notAllowed)}
	}()
	if r := <-done; r.err == nil || !strings.Contains(r.err.Error(), "CPU") {
		t.Fatalf("pinning to CPU %d (not allowed) = %v, want an error naming the CPU", notAllowed, r.err)
	}
	go func() { done <- result{err: PinCurrentThread(-1)} }()
	if r := <-done; r.err == nil {
		t.Fatal("pinning to CPU -1 succeeded")
	}
}

func TestFirstThreadPerCore(t *testing.T) {
	// Two packages, two cores each, two threads per core: CPUs n and n+4 are siblings.
	table := map[int]CPUCore{
		0: {0, 0}, 1: {0, 1}, 2: {1, 0}, 3: {1, 1},
		4: {0, 0}, 5: {0, 1}, 6: {1, 0}, 7: {1, 1},
	}
	core := func(cpu int) (CPUCore, error) {
		c, ok := table[cpu]
		if !ok {
			return CPUCore{}, os.ErrNotExist
		}
		return c, nil
	}
	got, err := FirstThreadPerCore([]int{0, 1, 2, 3, 4, 5, 6, 7}, core)
	if err != nil || !slices.Equal(got, []int{0, 1, 2, 3}) {
		t.Fatalf("FirstThreadPerCore = %v, %v", got, err)
	}
	got, err = FirstThreadPerCore([]int{4, 1, 5, 6}, core)
	if err != nil || !slices.Equal(got, []int{4, 1, 6}) {
		t.Fatalf("FirstThreadPerCore(4,1,5,6) = %v, %v", got, err)
	}
	if _, err := FirstThreadPerCore([]int{9}, core); err == nil || !strings.Contains(err.Error(), "CPU 9") {
		t.Fatalf("unknown CPU: %v", err)
	}
}

func TestCoreOfThisHost(t *testing.T) {
	cpus, err := AllowedCPUs()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat("/sys/devices/system/cpu/cpu0/topology/core_id"); err != nil {
		t.Skipf("no sysfs CPU topology here: %v", err)
	}
	kept, err := FirstThreadPerCore(cpus, CoreOf)
	if err != nil {
		t.Fatal(err)
	}
	if len(kept) == 0 || len(kept) > len(cpus) {
		t.Fatalf("FirstThreadPerCore(%v) = %v", cpus, kept)
	}
}

func TestSuggestShardCount(t *testing.T) {
	tests := []struct{ allowed, configuredMax, want int }{
		{8, 0, 8}, {8, 4, 4}, {2, 4, 2}, {0, 0, 1}, {1, -1, 1},
	}
	for _, tt := range tests {
		if got := SuggestShardCount(tt.allowed, tt.configuredMax); got != tt.want {
			t.Errorf("SuggestShardCount(%d, %d) = %d, want %d", tt.allowed, tt.configuredMax, got, tt.want)
		}
	}
}

func TestHostTopology(t *testing.T) {
	topo := HostTopology()
	if topo.ThreadsPerCore < 1 {
		t.Fatalf("ThreadsPerCore %d", topo.ThreadsPerCore)
	}
	s := topo.String()
	if !strings.Contains(s, topo.Brand) || !strings.Contains(s, "physical cores") {
		t.Fatalf("String() = %q", s)
	}
	t.Log(s)
	if got := cacheSize(48 << 10); got != "48 KiB" {
		t.Errorf("cacheSize(48 KiB) = %q", got)
	}
	if got := cacheSize(-1); got != "unknown" {
		t.Errorf("cacheSize(-1) = %q", got)
	}
	if got := cacheSize(32 << 20); got != "32 MiB" {
		t.Errorf("cacheSize(32 MiB) = %q", got)
	}
}

func TestRlimits(t *testing.T) {
	for _, tt := range []struct {
		name  string
		get   func() (Rlimit, error)
		raise func() (Rlimit, error)
	}{
		{"RLIMIT_NOFILE", OpenFilesLimit, RaiseOpenFilesLimit},
		{"RLIMIT_MEMLOCK", MemlockLimit, RaiseMemlockLimit},
	} {
		before, err := tt.get()
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if before.Soft > before.Hard {
			t.Fatalf("%s: soft %v above hard", tt.name, before)
		}
		after, err := tt.raise()
		if err != nil {
			t.Fatalf("%s: raise: %v", tt.name, err)
		}
		if after.Soft != before.Hard || after.Hard != before.Hard {
			t.Fatalf("%s: raised from %v to %v, want soft = hard = %d", tt.name, before, after, before.Hard)
		}
	}
	if got := (Rlimit{Soft: 1024, Hard: Unlimited}).String(); got != "1024 (hard unlimited)" {
		t.Errorf("Rlimit.String = %q", got)
	}
}

func TestSocketOptions(t *testing.T) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	for _, on := range []bool{true, false} {
		if err := SetNoDelay(fd, on); err != nil {
			t.Fatal(err)
		}
		if got, err := NoDelay(fd); err != nil || got != on {
			t.Fatalf("NoDelay = %v, %v; want %v", got, err, on)
		}
	}
	if err := SetReuseAddr(fd, true); err != nil {
		t.Fatal(err)
	}
	if v, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR); err != nil || v == 0 {
		t.Fatalf("SO_REUSEADDR = %d, %v", v, err)
	}
	if err := SetReusePort(fd, true); err != nil {
		t.Fatal(err)
	}
	if v, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEPORT); err != nil || v == 0 {
		t.Fatalf("SO_REUSEPORT = %d, %v", v, err)
	}
	const sizeBytes = 32 << 10 // below the default net.core.{r,w}mem_max, so not capped
	if err := SetReceiveBufferBytes(fd, sizeBytes); err != nil {
		t.Fatal(err)
	}
	if got, err := ReceiveBufferBytes(fd); err != nil || got < sizeBytes {
		t.Fatalf("SO_RCVBUF = %d, %v; want >= %d", got, err, sizeBytes)
	}
	if err := SetSendBufferBytes(fd, sizeBytes); err != nil {
		t.Fatal(err)
	}
	if got, err := SendBufferBytes(fd); err != nil || got < sizeBytes {
		t.Fatalf("SO_SNDBUF = %d, %v; want >= %d", got, err, sizeBytes)
	}

	// On a descriptor that is not a socket, the error names the option and the fd.
	var pipe [2]int
	if err := unix.Pipe2(pipe[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(pipe[0])
	defer unix.Close(pipe[1])
	err = SetNoDelay(pipe[0], true)
	if !errors.Is(err, unix.ENOTSOCK) || !strings.Contains(err.Error(), "TCP_NODELAY") {
		t.Fatalf("SetNoDelay on a pipe = %v", err)
	}
}

// Every combination of the probe's facts gets exactly one verdict, and every refusal
// names a cause and tells the operator what to do.
func TestClassifyIOURingExhaustive(t *testing.T) {
	sysctls := []int{-1, 0, 1, 2}
	errnos := []unix.Errno{0, unix.ENOSYS, unix.EPERM, unix.EINVAL, unix.ENOMEM, unix.EMFILE, unix.ENFILE, unix.EACCES, unix.EFAULT}
	kernels := []KernelVersion{{}, {4, 19, 0}, {5, 15, 0}, {6, 0, 9}, {6, 1, 0}, {6, 8, 0}}
	remedies := []string{"run ", "add ", "raise ", "use ", "check ", "free "}
	for _, sysctl := range sysctls {
		for _, setupErrno := range errnos {
			for _, flagsErrno := range []unix.Errno{0, unix.EINVAL} {
				for _, kernel := range kernels {
					p := IOURingProbe{DisabledSysctl: sysctl, GroupID: -1, SetupErrno: setupErrno, FlagsErrno: flagsErrno, Kernel: kernel}
					err := ClassifyIOURing(p)
					usable := setupErrno == 0 && flagsErrno == 0 && (kernel.IsZero() || !kernel.Less(MinimumKernel))
					if usable != (err == nil) {
						t.Fatalf("%+v: verdict %v, want usable=%v", p, err, usable)
					}
					if err == nil {
						continue
					}
					var ue *IOURingError
					if !errors.As(err, &ue) || ue.Cause < CauseKernelTooOld || ue.Cause > CauseOther {
						t.Fatalf("%+v: %v is not a classified *IOURingError", p, err)
					}
					msg := err.Error()
					if !strings.HasPrefix(msg, "io_uring unavailable: ") {
						t.Fatalf("%+v: message %q", p, msg)
					}
					if !slices.ContainsFunc(remedies, func(r string) bool { return strings.Contains(msg, r) }) {
						t.Fatalf("%+v: message %q names no remedy", p, msg)
					}
					if setupErrno == unix.EPERM && sysctl == 2 && ue.Cause != CauseSysctlDisabled {
						t.Fatalf("%+v: cause %v", p, ue.Cause)
					}
				}
			}
		}
	}
}

func TestSurvey(t *testing.T) {
	h, err := Survey()
	if err != nil {
		t.Fatal(err)
	}
	if h.Kernel.IsZero() || len(h.AllowedCPUs) == 0 || h.OpenFiles.Hard == 0 || h.IOURing.Kernel != h.Kernel {
		t.Fatalf("Survey = %+v", h)
	}
	if err := ClassifyIOURing(h.IOURing); err != nil {
		t.Fatal(err)
	}
	if s := h.String(); !strings.Contains(s, h.Kernel.String()) || !strings.Contains(s, "RLIMIT_NOFILE") {
		t.Fatalf("String() = %q", s)
	}
	t.Log(h)
}

func TestNameCurrentThread(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	// The name outlives the test on this thread; leave it as it was.
	comm := fmt.Sprintf("/proc/self/task/%d/comm", unix.Gettid())
	before, err := os.ReadFile(comm)
	if err != nil {
		t.Fatal(err)
	}
	defer NameCurrentThread(strings.TrimSpace(string(before)))
	if err := NameCurrentThread("shard-12-with-a-long-tail"); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(comm)
	if err != nil {
		t.Fatal(err)
	}
	if want := "shard-12-with-a\n"; string(got) != want {
		t.Fatalf("comm %q, want %q", got, want)
	}
}
