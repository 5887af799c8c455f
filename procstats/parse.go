package procstats

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"unicode"
)

// CPUTimes is the machine's CPU time from the "cpu" line of /proc/stat, in clock
// ticks (USER_HZ) since boot.
type CPUTimes struct {
	// TotalTicks is every state's time: user, nice, system, idle, iowait, irq,
	// softirq and steal (guest time is already inside user and nice).
	TotalTicks uint64
	// IdleTicks is idle and iowait: the time no task ran.
	IdleTicks uint64
	// Cores are the "cpuN" lines, the cores the kernel accounts, in its order.
	Cores []CoreTimes
}

// CoreTimes is one core's time from its "cpuN" line of /proc/stat.
type CoreTimes struct {
	CPU                   int
	TotalTicks, IdleTicks uint64
}

// ParseCPUTimes reads /proc/stat's text: its first line must be the "cpu" line
// with at least the four fields every kernel has (user nice system idle), and
// the "cpuN" lines follow it.
func ParseCPUTimes(text []byte) (CPUTimes, error) {
	return parseCPUTimes(text, nil)
}

// parseCPUTimes is ParseCPUTimes, appending the cores to cores (a sampler's
// slice of an earlier sample, so that a sample does not allocate one).
func parseCPUTimes(text []byte, cores []CoreTimes) (CPUTimes, error) {
	line, rest, _ := bytes.Cut(text, []byte("\n"))
	name, ticks := cutField(line)
	if string(name) != "cpu" {
		return CPUTimes{}, errors.New(`procstats: /proc/stat does not start with a "cpu" line`)
	}
	var t CPUTimes
	var err error
	if t.TotalTicks, t.IdleTicks, err = parseTicks(ticks); err != nil {
		return CPUTimes{}, fmt.Errorf("procstats: /proc/stat cpu line: %w", err)
	}
	t.Cores = cores
	for len(rest) > 0 {
		line, rest, _ = bytes.Cut(rest, []byte("\n"))
		name, ticks := cutField(line)
		if len(name) <= 3 || !bytes.HasPrefix(name, []byte("cpu")) {
			break
		}
		cpu, err := strconv.ParseUint(string(name[3:]), 10, 31)
		if err != nil {
			break
		}
		core := CoreTimes{CPU: int(cpu)}
		if core.TotalTicks, core.IdleTicks, err = parseTicks(ticks); err != nil {
			return CPUTimes{}, fmt.Errorf("procstats: /proc/stat %s line: %w", name, err)
		}
		t.Cores = append(t.Cores, core)
	}
	if len(t.Cores) == 0 {
		return CPUTimes{}, errors.New(`procstats: /proc/stat has no "cpuN" line`)
	}
	return t, nil
}

// cutField cuts a line's first field from the rest of the line, fields being
// what bytes.Fields splits (runs of non-space runes).
func cutField(line []byte) (field, rest []byte) {
	start := bytes.IndexFunc(line, isNotSpace)
	if start < 0 {
		return nil, nil
	}
	line = line[start:]
	end := bytes.IndexFunc(line, unicode.IsSpace)
	if end < 0 {
		return line, nil
	}
	return line[:end], line[end:]
}

func isNotSpace(r rune) bool { return !unicode.IsSpace(r) }

// parseTicks reads a cpu line's fields after its name: user nice system idle
// iowait irq softirq steal guest guest_nice, the four first in every kernel.
// Guest time is already inside user and nice, so the total leaves it out.
func parseTicks(fields []byte) (totalTicks, idleTicks uint64, err error) {
	var ticks [8]uint64
	n := 0
	for f := range bytes.FieldsSeq(fields) {
		if n < len(ticks) {
			if ticks[n], err = strconv.ParseUint(string(f), 10, 64); err != nil {
				return 0, 0, fmt.Errorf("field %d: %w", n+1, err)
			}
		}
		n++
	}
	if n < 4 {
		return 0, 0, fmt.Errorf("%d fields, want 4 or more", n)
	}
	for _, v := range ticks {
		totalTicks += v
	}
	return totalTicks, ticks[3] + ticks[4], nil
}

// Process is a process's figures from /proc/<pid>/stat.
type Process struct {
	// CPUTicks is the time the process's threads ran, user and system, in clock
	// ticks (USER_HZ): the unit of CPUTimes.
	CPUTicks uint64
	Threads  uint32
	// ResidentPages is the resident set, in pages.
	ResidentPages uint64
}

// The fields of /proc/<pid>/stat that Process reads, numbered as proc(5) numbers
// them (pid is 1, comm 2, state 3).
const (
	statUtime      = 14
	statStime      = 15
	statNumThreads = 20
	statRSS        = 24
)

// ParseProcessStat reads /proc/<pid>/stat's text. The command name (field 2) is
// in parentheses and may itself hold spaces and parentheses, so the fields are
// counted from its last closing parenthesis.
func ParseProcessStat(text []byte) (Process, error) {
	end := bytes.LastIndexByte(text, ')')
	if end < 0 {
		return Process{}, errors.New("procstats: /proc/<pid>/stat has no command name")
	}
	// The fields wanted, in ascending order, and where their values go.
	wanted := [...]int{statUtime, statStime, statNumThreads, statRSS}
	var values [len(wanted)]uint64
	found := 0
	n := 3 // the first field after the command name is field 3, state
	for f := range bytes.FieldsSeq(text[end+1:]) {
		if n == wanted[found] {
			v, err := strconv.ParseUint(string(f), 10, 64)
			if err != nil {
				return Process{}, fmt.Errorf("procstats: /proc/<pid>/stat field %d: %w", n, err)
			}
			values[found] = v
			if found++; found == len(wanted) {
				break
			}
		}
		n++
	}
	if found < len(wanted) {
		return Process{}, fmt.Errorf("procstats: /proc/<pid>/stat ends before field %d", wanted[found])
	}
	var p Process
	p.CPUTicks = values[0] + values[1]
	p.Threads = uint32(min(values[2], 1<<32-1))
	p.ResidentPages = values[3]
	return p, nil
}

// Memory is the machine's memory from /proc/meminfo.
type Memory struct {
	TotalBytes     uint64
	AvailableBytes uint64
}

// ParseMeminfo reads /proc/meminfo's text. It needs MemTotal and MemAvailable
// (Linux 3.14 and later); a value in kB is converted to bytes.
func ParseMeminfo(text []byte) (Memory, error) {
	var m Memory
	var haveTotal, haveAvailable bool
	for len(text) > 0 && !(haveTotal && haveAvailable) {
		var line []byte
		line, text, _ = bytes.Cut(text, []byte("\n"))
		key, value, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			continue
		}
		var dst *uint64
		switch string(key) {
		case "MemTotal":
			dst, haveTotal = &m.TotalBytes, true
		case "MemAvailable":
			dst, haveAvailable = &m.AvailableBytes, true
		default:
			continue
		}
		v, err := parseMeminfoValue(value)
		if err != nil {
			return Memory{}, fmt.Errorf("procstats: /proc/meminfo %s: %w", key, err)
		}
		*dst = v
	}
	if !haveTotal || !haveAvailable {
		return Memory{}, errors.New("procstats: /proc/meminfo lacks MemTotal or MemAvailable")
	}
	return m, nil
}

// parseMeminfoValue reads "   16303596 kB" (or a count with no unit) as bytes.
func parseMeminfoValue(value []byte) (uint64, error) {
	number, rest := cutField(value)
	unit, rest := cutField(rest)
	if len(number) == 0 || len(bytes.TrimSpace(rest)) > 0 {
		return 0, fmt.Errorf("value %q is not a number and a unit", value)
	}
	v, err := strconv.ParseUint(string(number), 10, 64)
	if err != nil {
		return 0, err
	}
	if len(unit) == 0 {
		return v, nil
	}
	if string(unit) != "kB" {
		return 0, fmt.Errorf("unit %q is not kB", unit)
	}
	if v > (1<<64-1)/1024 {
		return 0, fmt.Errorf("%d kB overflows", v)
	}
	return v * 1024, nil
}

// IO is a process's storage traffic from /proc/<pid>/io.
type IO struct {
	ReadBytes    uint64
	WrittenBytes uint64
}

// ParseIO reads /proc/<pid>/io's text: its read_bytes and write_bytes lines.
func ParseIO(text []byte) (IO, error) {
	var io IO
	var haveRead, haveWritten bool
	for len(text) > 0 && !(haveRead && haveWritten) {
		var line []byte
		line, text, _ = bytes.Cut(text, []byte("\n"))
		key, value, ok := bytes.Cut(line, []byte(": "))
		if !ok {
			continue
		}
		var dst *uint64
		switch string(key) {
		case "read_bytes":
			dst, haveRead = &io.ReadBytes, true
		case "write_bytes":
			dst, haveWritten = &io.WrittenBytes, true
		default:
			continue
		}
		v, err := strconv.ParseUint(string(bytes.TrimSpace(value)), 10, 64)
		if err != nil {
			return IO{}, fmt.Errorf("procstats: /proc/<pid>/io %s: %w", key, err)
		}
		*dst = v
	}
	if !haveRead || !haveWritten {
		return IO{}, errors.New("procstats: /proc/<pid>/io lacks read_bytes or write_bytes")
	}
	return io, nil
}
