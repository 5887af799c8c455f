package procstats

import (
	"reflect"
	"strings"
	"testing"
)

// Texts as Linux 6.x writes them (a 2-core machine, this package's own test
// process), and the same texts cut short or spoiled.
const (
	procStat = "cpu  3446368 29682 1115114 842315 1110670 0 150354 53712 0 0\n" +
		"cpu0 1737544 15281 558281 408581 560358 0 67635 26599 0 0\n" +
		"cpu1 1708824 14400 556833 433734 550312 0 82719 27113 0 0\n" +
		"intr 1017346338 0 9 0 0 0 0 0 0 0 0 0 0 0\n" +
		"ctxt 1987345345\nbtime 1764900000\nprocesses 2736745\nprocs_running 3\nprocs_blocked 0\n"
	// a comm with a space and a parenthesis: the fields count from the last ')'
	procSelfStat = "27987 (iggy (shard) 0) S 27980 27980 25048 0 -1 4194304 99 0 0 0 " +
		"1234 567 0 0 20 0 7 0 3374233 3133440 413 18446744073709551615 94759178874880 " +
		"94759178894761 140729560942688 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n"
	procMeminfo = "MemTotal:       24731408 kB\nMemFree:         1502204 kB\n" +
		"MemAvailable:   23372848 kB\nBuffers:          212420 kB\nCached:         20583740 kB\n"
	procSelfIO = "rchar: 323934931\nwchar: 323929600\nsyscr: 632687\nsyscw: 632675\n" +
		"read_bytes: 8192\nwrite_bytes: 323932160\ncancelled_write_bytes: 0\n"
)

func TestParseCPUTimes(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		want       CPUTimes
		wantErr    bool
	}{
		{name: "linux 6", text: procStat, want: CPUTimes{
			TotalTicks: 3446368 + 29682 + 1115114 + 842315 + 1110670 + 0 + 150354 + 53712,
			IdleTicks:  842315 + 1110670, Cores: []CoreTimes{
				{CPU: 0, TotalTicks: 1737544 + 15281 + 558281 + 408581 + 560358 + 67635 + 26599, IdleTicks: 408581 + 560358},
				{CPU: 1, TotalTicks: 1708824 + 14400 + 556833 + 433734 + 550312 + 82719 + 27113, IdleTicks: 433734 + 550312}}}},
		// guest time is inside user and nice: not counted twice
		{name: "guest", text: "cpu 10 2 5 80 3 0 0 0 4 1\ncpu3 10 2 5 80 3 0 0 0 4 1\n",
			want: CPUTimes{TotalTicks: 100, IdleTicks: 83, Cores: []CoreTimes{{CPU: 3, TotalTicks: 100, IdleTicks: 83}}}},
		// Linux 2.6.0 had only the four first fields, and a single core
		{name: "four fields", text: "cpu 10 1 5 84\ncpu0 10 1 5 84\n", want: CPUTimes{TotalTicks: 100, IdleTicks: 84, Cores: []CoreTimes{{TotalTicks: 100, IdleTicks: 84}}}},
		// the cpu lines end at the first other line, even a cpu-like one
		{name: "cpu lines end", text: "cpu 1 0 0 1\ncpu0 1 0 0 1\ncpufreq 3\ncpu1 1 0 0 1\n", want: CPUTimes{TotalTicks: 2, IdleTicks: 1, Cores: []CoreTimes{{TotalTicks: 2, IdleTicks: 1}}}},
		{name: "no trailing newline", text: "cpu 1 0 0 1\ncpu0 1 0 0 1", want: CPUTimes{TotalTicks: 2, IdleTicks: 1, Cores: []CoreTimes{{TotalTicks: 2, IdleTicks: 1}}}},
		// fields split as bytes.Fields splits them: runs of any space
		{name: "tabs and runs of spaces", text: "  cpu\t1  2\t\t3 4 \n\tcpu0 \t1 2 3 4\t\n",
			want: CPUTimes{TotalTicks: 10, IdleTicks: 4, Cores: []CoreTimes{{TotalTicks: 10, IdleTicks: 4}}}},
		{name: "a unicode space", text: "cpu\u00a01 2 3 4\ncpu7\u20031 2 3 4\n",
			want: CPUTimes{TotalTicks: 10, IdleTicks: 4, Cores: []CoreTimes{{CPU: 7, TotalTicks: 10, IdleTicks: 4}}}},
		{name: "blank lines end the cpu lines", text: "cpu 1 0 0 1\ncpu0 1 0 0 1\n\ncpu1 1 0 0 1\n",
			want: CPUTimes{TotalTicks: 2, IdleTicks: 1, Cores: []CoreTimes{{TotalTicks: 2, IdleTicks: 1}}}},
		{name: "empty", text: "", wantErr: true},
		{name: "blank", text: " \t\n", wantErr: true},
		{name: "cpu glued to its ticks", text: "cpu1 2 3 4\ncpu0 1 2 3 4\n", wantErr: true},
		{name: "truncated in the cpu line", text: "cpu  3446368 29682", wantErr: true},
		{name: "truncated before the cpuN lines", text: "cpu 1 2 3 4\n", wantErr: true},
		{name: "not /proc/stat", text: procMeminfo, wantErr: true},
		{name: "garbage field", text: "cpu 1 2 x 4\ncpu0 1 2 3 4\n", wantErr: true},
		{name: "negative field", text: "cpu 1 2 -3 4\ncpu0 1 2 3 4\n", wantErr: true},
		{name: "binary", text: "\x00\xff\xfe", wantErr: true},
		{name: "truncated in a core's line", text: procStat[:strings.Index(procStat, "cpu1")+9], wantErr: true},
		{name: "garbage core field", text: "cpu 1 2 3 4\ncpu0 1 2 y 4\n", wantErr: true},
	} {
		got, err := ParseCPUTimes([]byte(tc.text))
		if (err != nil) != tc.wantErr || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: got %+v, %v; want %+v, error %t", tc.name, got, err, tc.want, tc.wantErr)
		}
	}
}

func TestParseProcessStat(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		want       Process
		wantErr    bool
	}{
		{name: "comm with parentheses", text: procSelfStat, want: Process{CPUTicks: 1234 + 567, Threads: 7, ResidentPages: 413}},
		{name: "plain comm", text: "1 (init) S 0 1 1 0 -1 4194560 1 2 3 4 50 60 0 0 20 0 1 0 5 6 70 18446744073709551615",
			want: Process{CPUTicks: 110, Threads: 1, ResidentPages: 70}},
		{name: "tabs and runs of spaces", text: "1 (a b)\tS 0 1 1 0  -1 4194560 1 2 3 4 50\t\t60 0 0 20 0 1 0 5 6 70\n",
			want: Process{CPUTicks: 110, Threads: 1, ResidentPages: 70}},
		{name: "ends at rss", text: "1 (a) S 0 1 1 0 -1 4194560 1 2 3 4 50 60 0 0 20 0 1 0 5 6 70", want: Process{CPUTicks: 110, Threads: 1, ResidentPages: 70}},
		{name: "garbage rss", text: "1 (a) S 0 1 1 0 -1 4194560 1 2 3 4 50 60 0 0 20 0 1 0 5 6 7O", wantErr: true},
		{name: "garbage field not read", text: "1 (a) S x 1 1 0 -1 4194560 1 2 3 4 50 60 0 0 20 0 1 0 5 6 70", want: Process{CPUTicks: 110, Threads: 1, ResidentPages: 70}},
		{name: "truncated before rss", text: procSelfStat[:strings.Index(procSelfStat, " 413 ")], wantErr: true},
		{name: "truncated in comm", text: "27987 (iggy", wantErr: true},
		{name: "empty", text: "", wantErr: true},
		{name: "garbage utime", text: "1 (a) S 0 1 1 0 -1 4194560 1 2 3 4 five 60 0 0 20 0 1 0 5 6 70", wantErr: true},
		{name: "not a stat file", text: procSelfIO, wantErr: true},
	} {
		got, err := ParseProcessStat([]byte(tc.text))
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("%s: got %+v, %v; want %+v, error %t", tc.name, got, err, tc.want, tc.wantErr)
		}
	}
}

func TestParseMeminfo(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		want       Memory
		wantErr    bool
	}{
		{name: "linux 6", text: procMeminfo, want: Memory{TotalBytes: 24731408 << 10, AvailableBytes: 23372848 << 10}},
		{name: "available before total", text: "MemAvailable: 1 kB\nMemTotal: 2 kB\n", want: Memory{TotalBytes: 2048, AvailableBytes: 1024}},
		// before Linux 3.14 there is no MemAvailable: MemFree is not it
		{name: "no MemAvailable", text: "MemTotal: 2 kB\nMemFree: 1 kB\n", wantErr: true},
		{name: "truncated", text: procMeminfo[:20], wantErr: true},
		{name: "empty", text: "", wantErr: true},
		{name: "garbage value", text: "MemTotal: lots kB\nMemAvailable: 1 kB\n", wantErr: true},
		{name: "tabs, no unit", text: "MemTotal:\t2\tkB\nMemAvailable:1\n", want: Memory{TotalBytes: 2048, AvailableBytes: 1}},
		{name: "three fields", text: "MemTotal: 2 kB x\nMemAvailable: 1 kB\n", wantErr: true},
		{name: "no value", text: "MemTotal:\nMemAvailable: 1 kB\n", wantErr: true},
		{name: "unknown unit", text: "MemTotal: 2 MB\nMemAvailable: 1 kB\n", wantErr: true},
		{name: "overflow", text: "MemTotal: 18446744073709551615 kB\nMemAvailable: 1 kB\n", wantErr: true},
		{name: "not meminfo", text: procStat, wantErr: true},
	} {
		got, err := ParseMeminfo([]byte(tc.text))
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("%s: got %+v, %v; want %+v, error %t", tc.name, got, err, tc.want, tc.wantErr)
		}
	}
}

func TestParseIO(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		want       IO
		wantErr    bool
	}{
		{name: "linux 6", text: procSelfIO, want: IO{ReadBytes: 8192, WrittenBytes: 323932160}},
		// rchar and wchar count page-cache hits and sockets too: they are not these
		{name: "only chars", text: "rchar: 5\nwchar: 6\n", wantErr: true},
		{name: "truncated", text: procSelfIO[:strings.Index(procSelfIO, "write_bytes")], wantErr: true},
		{name: "empty", text: "", wantErr: true},
		{name: "garbage", text: "read_bytes: -1\nwrite_bytes: 2\n", wantErr: true},
	} {
		got, err := ParseIO([]byte(tc.text))
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("%s: got %+v, %v; want %+v, error %t", tc.name, got, err, tc.want, tc.wantErr)
		}
	}
}

func TestOSRelease(t *testing.T) {
	debian := "PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nNAME=\"Debian GNU/Linux\"\nVERSION_ID=\"12\"\nVERSION=\"12 (bookworm)\"\nID=debian\n"
	lsb := "DISTRIB_ID=Ubuntu\nDISTRIB_RELEASE=24.04\nDISTRIB_CODENAME=noble\n"
	for _, tc := range []struct {
		name, osRelease, lsbRelease string
		want                        string
	}{
		{name: "debian", osRelease: debian, want: "Linux (Debian GNU/Linux 12)"},
		// rolling releases have no VERSION_ID
		{name: "no version", osRelease: "NAME=\"Arch Linux\"\nID=arch\n", want: "Linux (Arch Linux)"},
		{name: "single quotes", osRelease: "NAME='Fedora Linux'\nVERSION_ID=41\n", want: "Linux (Fedora Linux 41)"},
		{name: "lsb fallback", lsbRelease: lsb, want: "Linux (Ubuntu 24.04)"},
		{name: "version from lsb", osRelease: "NAME=Ubuntu\n", lsbRelease: lsb, want: "Linux (Ubuntu 24.04)"},
		{name: "version without name", osRelease: "VERSION_ID=3\n", want: "Linux (unknown 3)"},
		{name: "neither", want: "Linux"},
		{name: "garbage", osRelease: "\x00\xff=\n==\n", want: "Linux"},
	} {
		if got := ParseOSRelease([]byte(tc.osRelease), []byte(tc.lsbRelease)).LongVersion(); got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
}
