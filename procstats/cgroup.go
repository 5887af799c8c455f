package procstats

import (
	"bytes"
	"io/fs"
	"path"
	"strconv"
	"strings"
)

// cgroupDepthMax bounds the walk from a process's cgroup up to the root.
const cgroupDepthMax = 64

// cgroupMemoryFiles names the files of one cgroup version's memory controller.
type cgroupMemoryFiles struct {
	// dir is the controller's directory under /sys/fs/cgroup.
	dir                      string
	limit, usage             string
	inactiveFile, activeFile string
}

var (
	cgroupV2 = cgroupMemoryFiles{dir: ".", limit: "memory.max", usage: "memory.current",
		inactiveFile: "inactive_file", activeFile: "active_file"}
	cgroupV1 = cgroupMemoryFiles{dir: "memory", limit: "memory.limit_in_bytes", usage: "memory.usage_in_bytes",
		inactiveFile: "total_inactive_file", activeFile: "total_active_file"}
)

// ParseCgroupPaths reads /proc/<pid>/cgroup's text: the process's cgroup in the
// unified (v2) hierarchy, and in the v1 hierarchy of the memory controller, as
// paths relative to their hierarchy's root ("." for the root); "" where the
// process has none.
func ParseCgroupPaths(text []byte) (v2, v1Memory string) {
	for len(text) > 0 {
		var line []byte
		line, text, _ = bytes.Cut(text, []byte("\n"))
		fields := strings.SplitN(string(line), ":", 3)
		if len(fields) != 3 || !strings.HasPrefix(fields[2], "/") {
			continue
		}
		dir := path.Clean(strings.TrimPrefix(fields[2], "/"))
		if strings.HasPrefix(dir, "..") || !fs.ValidPath(dir) {
			continue
		}
		switch {
		case fields[0] == "0" && fields[1] == "" && v2 == "":
			v2 = dir
		case v1Memory == "" && hasController(fields[1], "memory"):
			v1Memory = dir
		}
	}
	return v2, v1Memory
}

func hasController(controllers, name string) bool {
	for c := range strings.SplitSeq(controllers, ",") {
		if c == name {
			return true
		}
	}
	return false
}

// CgroupMemory scopes the host's memory to a process's memory cgroup, as the
// reference does (apache/iggy core/system_stats/src/cgroup_memory.rs): the
// total is the tightest limit below the host's total of the cgroup and its
// ancestors, and what is available the least, over those limited levels, of
// the limit less the level's usage that is not reclaimable file cache. The
// cgroup tree is root (/sys/fs/cgroup on a host), the process's cgroups
// cgroupText (/proc/<pid>/cgroup); v2 is read first, then v1. ok is false
// where no level limits memory below host.TotalBytes.
func CgroupMemory(root fs.FS, cgroupText []byte, host Memory) (m Memory, ok bool) {
	v2, v1 := ParseCgroupPaths(cgroupText)
	if v2 != "" {
		if m, ok := cgroupMemoryWithin(root, cgroupV2, v2, host); ok {
			return m, true
		}
	}
	if v1 != "" {
		return cgroupMemoryWithin(root, cgroupV1, v1, host)
	}
	return Memory{}, false
}

func cgroupMemoryWithin(root fs.FS, files cgroupMemoryFiles, dir string, host Memory) (Memory, bool) {
	m := Memory{TotalBytes: host.TotalBytes, AvailableBytes: host.AvailableBytes}
	limited, availableMeasured := false, false
	for range cgroupDepthMax {
		level := path.Join(files.dir, dir)
		if limit, err := readCgroupValue(root, path.Join(level, files.limit)); err == nil && limit < host.TotalBytes {
			limited = true
			m.TotalBytes = min(m.TotalBytes, limit)
			if available, ok := cgroupLevelAvailable(root, files, level, limit); ok {
				if !availableMeasured {
					m.AvailableBytes = available
				}
				m.AvailableBytes, availableMeasured = min(m.AvailableBytes, available), true
			}
		}
		if dir == "." {
			break
		}
		dir = path.Dir(dir)
	}
	if !limited {
		return Memory{}, false
	}
	m.AvailableBytes = min(m.AvailableBytes, m.TotalBytes)
	return m, true
}

// cgroupLevelAvailable is a limited level's limit less its usage that is not
// reclaimable file cache (the kernel's limit − usage falls toward 0 as the page
// cache fills, long before memory is short).
func cgroupLevelAvailable(root fs.FS, files cgroupMemoryFiles, level string, limit uint64) (uint64, bool) {
	usage, err := readCgroupValue(root, path.Join(level, files.usage))
	if err != nil {
		return 0, false
	}
	stat, err := readBounded(root, path.Join(level, "memory.stat"))
	if err != nil {
		return 0, false
	}
	var reclaimable uint64
	for len(stat) > 0 {
		var line []byte
		line, stat, _ = bytes.Cut(stat, []byte("\n"))
		key, value, _ := bytes.Cut(line, []byte(" "))
		if k := string(key); k == files.inactiveFile || k == files.activeFile {
			if v, err := strconv.ParseUint(string(bytes.TrimSpace(value)), 10, 64); err == nil {
				reclaimable += v
			}
		}
	}
	return limit - min(limit, usage-min(usage, reclaimable)), true
}

// readCgroupValue reads a file of one number; v2's "max" (no limit) is the
// largest number.
func readCgroupValue(root fs.FS, name string) (uint64, error) {
	text, err := readBounded(root, name)
	if err != nil {
		return 0, err
	}
	text = bytes.TrimSpace(text)
	if string(text) == "max" {
		return 1<<64 - 1, nil
	}
	return strconv.ParseUint(string(text), 10, 64)
}
