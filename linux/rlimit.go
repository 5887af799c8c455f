package linux

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// Unlimited is the value of an Rlimit field with no limit (RLIM_INFINITY).
const Unlimited = unix.RLIM_INFINITY

// Rlimit is a resource limit: the soft limit the kernel enforces and the hard ceiling
// an unprivileged process may raise it to.
type Rlimit struct {
	Soft uint64
	Hard uint64
}

func (l Rlimit) String() string { return limitString(l.Soft) + " (hard " + limitString(l.Hard) + ")" }

func limitString(v uint64) string {
	if v == Unlimited {
		return "unlimited"
	}
	return fmt.Sprint(v)
}

// OpenFilesLimit returns RLIMIT_NOFILE: every connection, segment file and ring is a
// descriptor.
func OpenFilesLimit() (Rlimit, error) { return getRlimit(unix.RLIMIT_NOFILE, "RLIMIT_NOFILE") }

// RaiseOpenFilesLimit raises the soft RLIMIT_NOFILE to the hard limit and returns the
// limit in force afterwards. (The Go runtime already does this at startup since Go
// 1.19; calling it again is harmless and makes the result explicit for the log.)
func RaiseOpenFilesLimit() (Rlimit, error) {
	return raiseSoftLimit(unix.RLIMIT_NOFILE, "RLIMIT_NOFILE")
}

// MemlockLimit returns RLIMIT_MEMLOCK in bytes: it bounds mlock'ed arenas and, on
// kernels before 5.12, io_uring rings and registered buffers.
func MemlockLimit() (Rlimit, error) { return getRlimit(unix.RLIMIT_MEMLOCK, "RLIMIT_MEMLOCK") }

// RaiseMemlockLimit raises the soft RLIMIT_MEMLOCK to the hard limit and returns the
// limit in force afterwards. Raising the hard limit needs CAP_SYS_RESOURCE (or
// `ulimit -l` / LimitMEMLOCK= in the service manager).
func RaiseMemlockLimit() (Rlimit, error) {
	return raiseSoftLimit(unix.RLIMIT_MEMLOCK, "RLIMIT_MEMLOCK")
}

func getRlimit(resource int, name string) (Rlimit, error) {
	var lim unix.Rlimit
	if err := unix.Getrlimit(resource, &lim); err != nil {
		return Rlimit{}, fmt.Errorf("linux: getrlimit %s: %w", name, err)
	}
	return Rlimit{Soft: lim.Cur, Hard: lim.Max}, nil
}

func raiseSoftLimit(resource int, name string) (Rlimit, error) {
	lim, err := getRlimit(resource, name)
	if err != nil {
		return Rlimit{}, err
	}
	if lim.Soft == lim.Hard {
		return lim, nil
	}
	if err := unix.Setrlimit(resource, &unix.Rlimit{Cur: lim.Hard, Max: lim.Hard}); err != nil {
		return lim, fmt.Errorf("linux: setrlimit %s soft %s -> %s: %w", name, limitString(lim.Soft), limitString(lim.Hard), err)
	}
	return getRlimit(resource, name)
}
