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
	w := newCgroupWalk(cgroupText)
	return w.memory(host, func(version, level int, file cgroupFile) ([]byte, error) {
		return readBounded(root, w.path(version, level, file))
	})
}

// cgroupFile is one of the files a walk reads of a level.
type cgroupFile int

const (
	cgroupLimit cgroupFile = iota
	cgroupUsage
	cgroupStat
	cgroupFiles // how many
)

func (files cgroupMemoryFiles) name(file cgroupFile) string {
	switch file {
	case cgroupLimit:
		return files.limit
	case cgroupUsage:
		return files.usage
	default:
		return "memory.stat"
	}
}

// cgroupVersions are the hierarchies a walk reads, in its order.
var cgroupVersions = [...]cgroupMemoryFiles{cgroupV2, cgroupV1}

// cgroupWalk is the way up from a process's cgroups to the root, in each
// hierarchy of cgroupVersions: levels[version][0] is the process's cgroup's
// directory, each next one its parent's, at most cgroupDepthMax of them; none
// in a hierarchy the process is not in.
type cgroupWalk struct {
	levels [len(cgroupVersions)][]string
}

func newCgroupWalk(cgroupText []byte) cgroupWalk {
	var w cgroupWalk
	v2, v1 := ParseCgroupPaths(cgroupText)
	for version, dir := range [...]string{v2, v1} {
		if dir == "" {
			continue
		}
		for range cgroupDepthMax {
			w.levels[version] = append(w.levels[version], path.Join(cgroupVersions[version].dir, dir))
			if dir == "." {
				break
			}
			dir = path.Dir(dir)
		}
	}
	return w
}

// path names file of a level in the cgroup tree.
func (w *cgroupWalk) path(version, level int, file cgroupFile) string {
	return path.Join(w.levels[version][level], cgroupVersions[version].name(file))
}

// readCgroupFile reads file of a level of one of a walk's hierarchies.
type readCgroupFile func(version, level int, file cgroupFile) ([]byte, error)

// memory is CgroupMemory's answer on the files read reads.
func (w *cgroupWalk) memory(host Memory, read readCgroupFile) (Memory, bool) {
	for version, levels := range w.levels {
		if len(levels) == 0 {
			continue
		}
		if m, ok := cgroupMemoryWithin(version, len(levels), read, host); ok {
			return m, true
		}
	}
	return Memory{}, false
}

func cgroupMemoryWithin(version, levels int, read readCgroupFile, host Memory) (Memory, bool) {
	m := Memory{TotalBytes: host.TotalBytes, AvailableBytes: host.AvailableBytes}
	limited, availableMeasured := false, false
	for level := range levels {
		text, err := read(version, level, cgroupLimit)
		if err != nil {
			continue
		}
		if limit, err := parseCgroupValue(text); err == nil && limit < host.TotalBytes {
			limited = true
			m.TotalBytes = min(m.TotalBytes, limit)
			if available, ok := cgroupLevelAvailable(version, level, read, limit); ok {
				if !availableMeasured {
					m.AvailableBytes = available
				}
				m.AvailableBytes, availableMeasured = min(m.AvailableBytes, available), true
			}
		}
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
func cgroupLevelAvailable(version, level int, read readCgroupFile, limit uint64) (uint64, bool) {
	text, err := read(version, level, cgroupUsage)
	if err != nil {
		return 0, false
	}
	usage, err := parseCgroupValue(text)
	if err != nil {
		return 0, false
	}
	stat, err := read(version, level, cgroupStat)
	if err != nil {
		return 0, false
	}
	files := cgroupVersions[version]
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

// parseCgroupValue reads a file of one number; v2's "max" (no limit) is the
// largest number.
func parseCgroupValue(text []byte) (uint64, error) {
	text = bytes.TrimSpace(text)
	if string(text) == "max" {
		return 1<<64 - 1, nil
	}
	return strconv.ParseUint(string(text), 10, 64)
}
