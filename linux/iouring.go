package linux

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Setup flags from linux/io_uring.h that the ring sets; the probe asks for the same.
const (
	setupSingleIssuer uint32 = 1 << 12 // IORING_SETUP_SINGLE_ISSUER, 6.0
	setupDeferTaskrun uint32 = 1 << 13 // IORING_SETUP_DEFER_TASKRUN, 6.1; needs SINGLE_ISSUER
)

// RequiredSetupFlags are the io_uring_setup flags every shard's ring uses.
const RequiredSetupFlags = setupSingleIssuer | setupDeferTaskrun

// ioUringParams is struct io_uring_params (120 bytes); the probe needs only flags in
// and features out, the offsets are left as bytes.
type ioUringParams struct {
	sqEntries    uint32
	cqEntries    uint32
	flags        uint32
	sqThreadCPU  uint32
	sqThreadIdle uint32
	features     uint32
	wqFd         uint32
	resv         [3]uint32
	offsets      [80]byte // struct io_sqring_offsets + struct io_cqring_offsets
}

var _ [120 - unsafe.Sizeof(ioUringParams{})]struct{}
var _ [unsafe.Sizeof(ioUringParams{}) - 120]struct{}

// The sysctls that gate io_uring (both since 6.6; absent before).
const (
	disabledSysctlPath = "/proc/sys/kernel/io_uring_disabled"
	groupSysctlPath    = "/proc/sys/kernel/io_uring_group"
)

// IOURingProbe is what the availability check observed. ClassifyIOURing turns it into
// a verdict; keeping the two apart makes every combination testable.
type IOURingProbe struct {
	// DisabledSysctl is kernel.io_uring_disabled: 0 enabled for all, 1 only for members
	// of kernel.io_uring_group (and CAP_SYS_ADMIN), 2 disabled; -1 when the sysctl does
	// not exist (kernels before 6.6) or could not be read.
	DisabledSysctl int
	// GroupID is kernel.io_uring_group, or -1 when unknown.
	GroupID int
	// SetupErrno is the error of a plain io_uring_setup with one entry; 0 on success.
	SetupErrno unix.Errno
	// FlagsErrno is the error of io_uring_setup with RequiredSetupFlags; 0 on success.
	// Only meaningful when SetupErrno is 0.
	FlagsErrno unix.Errno
	// Features is io_uring_params.features reported by the successful setup.
	Features uint32
	// Kernel is the running kernel; zero when uname could not be parsed.
	Kernel KernelVersion
}

// IOURingCause names why io_uring is unusable.
type IOURingCause int

const (
	CauseKernelTooOld     IOURingCause = iota + 1 // release older than MinimumKernel
	CauseNotBuiltIn                               // ENOSYS: no io_uring in this kernel, or a filter answering ENOSYS
	CauseSysctlDisabled                           // kernel.io_uring_disabled=2
	CauseSysctlGroup                              // kernel.io_uring_disabled=1 and we are not in the group
	CauseSeccomp                                  // EPERM while the sysctl allows io_uring: a seccomp filter
	CauseFlagsUnsupported                         // setup works, RequiredSetupFlags do not
	CauseResources                                // ENOMEM, EMFILE, ENFILE
	CauseOther                                    // any other errno
)

var causeNames = [...]string{
	CauseKernelTooOld:     "kernel too old",
	CauseNotBuiltIn:       "io_uring not available in this kernel",
	CauseSysctlDisabled:   "disabled by sysctl",
	CauseSysctlGroup:      "restricted to a group by sysctl",
	CauseSeccomp:          "blocked by seccomp",
	CauseFlagsUnsupported: "required setup flags unsupported",
	CauseResources:        "out of resources",
	CauseOther:            "io_uring_setup failed",
}

func (c IOURingCause) String() string {
	if c > 0 && int(c) < len(causeNames) {
		return causeNames[c]
	}
	return "IOURingCause(" + strconv.Itoa(int(c)) + ")"
}

// IOURingError says why this host cannot run the ring, and what to do about it.
type IOURingError struct {
	Cause IOURingCause
	Probe IOURingProbe
	// Message names the cause and the remedy, for the operator.
	Message string
}

func (e *IOURingError) Error() string { return e.Message }

// Unwrap exposes the errno of the failing io_uring_setup, if any.
func (e *IOURingError) Unwrap() error {
	switch {
	case e.Probe.SetupErrno != 0:
		return e.Probe.SetupErrno
	case e.Probe.FlagsErrno != 0:
		return e.Probe.FlagsErrno
	}
	return nil
}

// ClassifyIOURing decides from a probe whether the ring can run here: nil if it can,
// otherwise an *IOURingError whose message names the cause and the remedy. It is a
// pure function of the probe.
func ClassifyIOURing(p IOURingProbe) error {
	fail := func(cause IOURingCause, format string, args ...any) error {
		return &IOURingError{Cause: cause, Probe: p, Message: "io_uring unavailable: " + fmt.Sprintf(format, args...)}
	}
	kernelKnown := !p.Kernel.IsZero()
	tooOld := kernelKnown && p.Kernel.Less(MinimumKernel)
	upgrade := fmt.Sprintf("run on Linux %d.%d or newer", MinimumKernel.Major, MinimumKernel.Minor)
	switch p.SetupErrno {
	case 0:
		if tooOld {
			return fail(CauseKernelTooOld, "kernel %s is older than %s, the oldest with every io_uring feature the ring uses (IORING_SETUP_DEFER_TASKRUN); %s",
				p.Kernel, MinimumKernel, upgrade)
		}
		if p.FlagsErrno != 0 {
			return fail(CauseFlagsUnsupported, "io_uring_setup works but rejects IORING_SETUP_SINGLE_ISSUER|IORING_SETUP_DEFER_TASKRUN (%s) on kernel %s; %s",
				errnoName(p.FlagsErrno), kernelOrUnknown(p.Kernel), upgrade)
		}
		return nil
	case unix.ENOSYS:
		if tooOld && p.Kernel.Less(KernelVersion{Major: 5, Minor: 1}) {
			return fail(CauseNotBuiltIn, "io_uring_setup returned ENOSYS: kernel %s predates io_uring (5.1); %s", p.Kernel, upgrade)
		}
		return fail(CauseNotBuiltIn, "io_uring_setup returned ENOSYS on kernel %s: the kernel is built without CONFIG_IO_URING, or a seccomp filter (systemd SystemCallFilter=, gVisor) answers ENOSYS; use a kernel built with CONFIG_IO_URING=y and allow io_uring_setup, io_uring_enter and io_uring_register",
			kernelOrUnknown(p.Kernel))
	case unix.EPERM:
		switch p.DisabledSysctl {
		case 2:
			return fail(CauseSysctlDisabled, "io_uring is disabled by sysctl kernel.io_uring_disabled=2; run `sysctl -w kernel.io_uring_disabled=0` as root (and persist it in /etc/sysctl.d/)")
		case 1:
			group := "kernel.io_uring_group"
			if p.GroupID >= 0 {
				group = fmt.Sprintf("kernel.io_uring_group (gid %d)", p.GroupID)
			}
			return fail(CauseSysctlGroup, "io_uring is restricted by sysctl kernel.io_uring_disabled=1 to members of %s and CAP_SYS_ADMIN; add the server's user to that group, or run `sysctl -w kernel.io_uring_disabled=0` as root", group)
		}
		return fail(CauseSeccomp, "io_uring_setup is blocked (EPERM) although sysctl kernel.io_uring_disabled allows it, probably by a container seccomp profile (Docker's and containerd's defaults block io_uring); run the container with --security-opt seccomp=unconfined or a profile that allows io_uring_setup, io_uring_enter and io_uring_register")
	case unix.ENOMEM:
		return fail(CauseResources, "io_uring_setup returned ENOMEM: not enough memory for even a one-entry ring (kernels before 5.12 also count rings against RLIMIT_MEMLOCK); free memory or raise `ulimit -l`")
	case unix.EMFILE, unix.ENFILE:
		return fail(CauseResources, "io_uring_setup returned %s: out of file descriptors; raise `ulimit -n` (RLIMIT_NOFILE) or fs.file-max", errnoName(p.SetupErrno))
	}
	if tooOld {
		return fail(CauseKernelTooOld, "io_uring_setup returned %s on kernel %s, older than %s; %s",
			errnoName(p.SetupErrno), p.Kernel, MinimumKernel, upgrade)
	}
	return fail(CauseOther, "io_uring_setup returned %s on kernel %s; check dmesg and the kernel's io_uring configuration",
		errnoName(p.SetupErrno), kernelOrUnknown(p.Kernel))
}

func kernelOrUnknown(v KernelVersion) string {
	if v.IsZero() {
		return "(unknown version)"
	}
	return v.String()
}

// errnoName is "EPERM (operation not permitted)" rather than the bare text.
func errnoName(e unix.Errno) string {
	if name := unix.ErrnoName(e); name != "" {
		return name + " (" + e.Error() + ")"
	}
	return e.Error()
}

// ProbeIOURing gathers the facts for ClassifyIOURing from this host: the sysctls, the
// kernel release, and two one-entry io_uring_setup calls (plain, then with
// RequiredSetupFlags) whose rings are closed at once.
func ProbeIOURing() IOURingProbe {
	p := IOURingProbe{
		DisabledSysctl: readSysctlInt(disabledSysctlPath),
		GroupID:        readSysctlInt(groupSysctlPath),
	}
	if v, err := RunningKernel(); err == nil {
		p.Kernel = v
	}
	var features uint32
	features, p.SetupErrno = trySetup(0)
	if p.SetupErrno == 0 {
		p.Features = features
		_, p.FlagsErrno = trySetup(RequiredSetupFlags)
	}
	return p
}

// CheckIOURing probes this host and classifies the result: nil when the ring can run.
func CheckIOURing() (IOURingProbe, error) {
	p := ProbeIOURing()
	return p, ClassifyIOURing(p)
}

// trySetup creates a one-entry ring with flags and closes it.
func trySetup(flags uint32) (features uint32, errno unix.Errno) {
	params := ioUringParams{flags: flags}
	fd, _, e := unix.Syscall(unix.SYS_IO_URING_SETUP, 1, uintptr(unsafe.Pointer(&params)), 0)
	if e != 0 {
		return 0, e
	}
	// Linux releases the descriptor even when close reports an error, and a ring with
	// nothing submitted has nothing to flush: there is nothing to act on.
	_ = unix.Close(int(fd))
	return params.features, 0
}

func readSysctlInt(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return -1
	}
	v, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return -1
	}
	return v
}
