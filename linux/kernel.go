package linux

import (
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// KernelVersion is a Linux release's major.minor.patch (the part of `uname -r` before
// any distribution suffix).
type KernelVersion struct {
	Major, Minor, Patch int
}

// MinimumKernel is the oldest kernel the ring supports: IORING_SETUP_DEFER_TASKRUN
// arrived in 6.1 (see the table in the package doc).
var MinimumKernel = KernelVersion{Major: 6, Minor: 1}

func (v KernelVersion) String() string {
	return fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch)
}

// Less reports whether v is older than w.
func (v KernelVersion) Less(w KernelVersion) bool {
	if v.Major != w.Major {
		return v.Major < w.Major
	}
	if v.Minor != w.Minor {
		return v.Minor < w.Minor
	}
	return v.Patch < w.Patch
}

// IsZero reports whether v is unknown.
func (v KernelVersion) IsZero() bool { return v == KernelVersion{} }

// ParseKernelVersion parses a release string such as "6.1.0-18-amd64",
// "6.8.0-rc3+" or "5.15.0-91-generic". Major and minor are required; a missing patch
// is 0; anything after the first non-digit of a component is a distribution suffix.
func ParseKernelVersion(release string) (KernelVersion, error) {
	var parts [3]int
	rest := release
	for i := range parts {
		digitCount := 0
		for digitCount < len(rest) && digitCount < 9 && rest[digitCount] >= '0' && rest[digitCount] <= '9' {
			digitCount++
		}
		if digitCount == 0 {
			if i < 2 {
				return KernelVersion{}, fmt.Errorf("linux: kernel release %q: no %s version number", release, [...]string{"major", "minor"}[i])
			}
			break
		}
		parts[i], _ = strconv.Atoi(rest[:digitCount]) // at most 9 digits: cannot fail
		rest = rest[digitCount:]
		if i < 2 {
			if !strings.HasPrefix(rest, ".") {
				if i == 0 {
					return KernelVersion{}, fmt.Errorf("linux: kernel release %q: no minor version number", release)
				}
				break
			}
			rest = rest[1:]
		}
	}
	return KernelVersion{Major: parts[0], Minor: parts[1], Patch: parts[2]}, nil
}

// RunningKernel returns the version of the running kernel (uname(2)).
func RunningKernel() (KernelVersion, error) {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return KernelVersion{}, fmt.Errorf("linux: uname: %w", err)
	}
	return ParseKernelVersion(unix.ByteSliceToString(u.Release[:]))
}
