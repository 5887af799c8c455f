package procstats

import (
	"fmt"
	"io/fs"
	"testing"
	"testing/fstest"
	"time"
)

func TestParseCgroupPaths(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		v2, v1     string
	}{
		// a v1 host (this machine's sandbox): the memory controller's own path
		{name: "v1", text: "9:name=systemd:/\n8:pids:/\n4:memory:/process_api/eeaf0f78\n3:cpuset:/\n0::/\n", v2: ".", v1: "process_api/eeaf0f78"},
		{name: "v2", text: "0::/system.slice/iggy.service\n", v2: "system.slice/iggy.service"},
		{name: "v1 joint controllers", text: "5:cpuacct,memory,cpu:/docker/abc\n", v1: "docker/abc"},
		{name: "escapes the root", text: "0::/../../etc\n4:memory:/a/../../b\n"},
		{name: "relative", text: "0::system.slice\n"},
		{name: "garbage", text: "\x00:\xff\n::\n"},
		{name: "empty", text: ""},
	} {
		v2, v1 := ParseCgroupPaths([]byte(tc.text))
		if v2 != tc.v2 || v1 != tc.v1 {
			t.Errorf("%s: got %q, %q; want %q, %q", tc.name, v2, v1, tc.v2, tc.v1)
		}
	}
}

func TestCgroupMemory(t *testing.T) {
	host := Memory{TotalBytes: 10_000, AvailableBytes: 7_000}
	file := func(text string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(text)} }
	for _, tc := range []struct {
		name   string
		cgroup string
		tree   fstest.MapFS
		want   Memory
		wantOK bool
	}{
		{name: "v2 leaf limit, file cache added back", cgroup: "0::/iggy.slice\n", tree: fstest.MapFS{
			"memory.max":                file("max\n"),
			"iggy.slice/memory.max":     file("1000\n"),
			"iggy.slice/memory.current": file("900\n"),
			"iggy.slice/memory.stat":    file("anon 300\ninactive_file 400\nactive_file 100\n"),
		}, want: Memory{TotalBytes: 1000, AvailableBytes: 600}, wantOK: true},
		{name: "v2 a parent's tighter limit wins", cgroup: "0::/a/b\n", tree: fstest.MapFS{
			"a/memory.max": file("800"), "a/memory.current": file("500"), "a/memory.stat": file("inactive_file 100\n"),
			"a/b/memory.max": file("max"), "a/b/memory.current": file("400"), "a/b/memory.stat": file(""),
		}, want: Memory{TotalBytes: 800, AvailableBytes: 400}, wantOK: true},
		{name: "v2 the least available of two limited levels", cgroup: "0::/a/b\n", tree: fstest.MapFS{
			"a/memory.max": file("5000"), "a/memory.current": file("4900"), "a/memory.stat": file(""),
			"a/b/memory.max": file("1000"), "a/b/memory.current": file("10"), "a/b/memory.stat": file(""),
		}, want: Memory{TotalBytes: 1000, AvailableBytes: 100}, wantOK: true},
		{name: "v2 usage above the limit", cgroup: "0::/a\n", tree: fstest.MapFS{
			"a/memory.max": file("1000"), "a/memory.current": file("1200"), "a/memory.stat": file("active_file 100\n"),
		}, want: Memory{TotalBytes: 1000, AvailableBytes: 0}, wantOK: true},
		{name: "v2 a limit above the host's is none", cgroup: "0::/a\n", tree: fstest.MapFS{
			"a/memory.max": file("20000"), "a/memory.current": file("10"), "a/memory.stat": file(""),
		}},
		{name: "v2 no usage file: the host's available, under the limit", cgroup: "0::/a\n", tree: fstest.MapFS{
			"a/memory.max": file("5000"),
		}, want: Memory{TotalBytes: 5000, AvailableBytes: 5000}, wantOK: true},
		{name: "v1 (v2 mounted without the controller)", cgroup: "4:memory:/docker/x\n0::/\n", tree: fstest.MapFS{
			"memory/memory.limit_in_bytes":          file("9223372036854771712\n"),
			"memory/docker/x/memory.limit_in_bytes": file("2000\n"),
			"memory/docker/x/memory.usage_in_bytes": file("1500\n"),
			"memory/docker/x/memory.stat":           file("cache 700\ntotal_inactive_file 250\ntotal_active_file 250\ninactive_file 1\n"),
		}, want: Memory{TotalBytes: 2000, AvailableBytes: 1000}, wantOK: true},
		{name: "v1 unlimited (this machine's sandbox)", cgroup: "4:memory:/process_api/e\n0::/\n", tree: fstest.MapFS{
			"memory/process_api/e/memory.limit_in_bytes": file("9223372036854771712\n"),
			"memory/process_api/e/memory.usage_in_bytes": file("114012160\n"),
		}},
		{name: "garbage limit", cgroup: "0::/a\n", tree: fstest.MapFS{"a/memory.max": file("lots")}},
		{name: "no cgroup files", cgroup: "0::/a\n", tree: fstest.MapFS{}},
		{name: "no cgroup", cgroup: "", tree: fstest.MapFS{"memory.max": file("10")}},
	} {
		got, ok := CgroupMemory(tc.tree, []byte(tc.cgroup), host)
		if ok != tc.wantOK || got != tc.want {
			t.Errorf("%s: got %+v, %t; want %+v, %t", tc.name, got, ok, tc.want, tc.wantOK)
		}
	}
}

// A confined process's sample: its cores' CPU and its cgroup's memory.
func TestSamplerConfined(t *testing.T) {
	proc := fstest.MapFS{
		"meminfo":  {Data: []byte("MemTotal: 10 kB\nMemAvailable: 8 kB\n")},
		"7/cgroup": {Data: []byte("0::/iggy\n")},
		"7/stat":   {Data: []byte("7 (iggy-shard) S 1 7 7 0 -1 4194304 99 0 0 0 0 0 0 0 20 0 9 0 3374233 3133440 413 0\n")},
	}
	cgroups := fstest.MapFS{
		"iggy/memory.max": {Data: []byte("4096")}, "iggy/memory.current": {Data: []byte("1024")}, "iggy/memory.stat": {Data: []byte("")},
	}
	// 4 cores, each idle 250 ticks since boot and core 1 busy 50; then 100
	// ticks more each, core 1 busy all of them and the others idle: the machine
	// 25% busy, cores 1 and 3 50% on average.
	boot := []byte("cpu  50 0 0 1000 0 0 0 0 0 0\ncpu0 0 0 0 250 0 0 0 0 0 0\ncpu1 50 0 0 250 0 0 0 0 0 0\n" +
		"cpu2 0 0 0 250 0 0 0 0 0 0\ncpu3 0 0 0 250 0 0 0 0 0 0\n")
	sinceBoot := float32(float64(50) / 1050 * 100)
	later := []byte("cpu  150 0 0 1300 0 0 0 0 0 0\ncpu0 0 0 0 350 0 0 0 0 0 0\ncpu1 150 0 0 250 0 0 0 0 0 0\n" +
		"cpu2 0 0 0 350 0 0 0 0 0 0\ncpu3 0 0 0 350 0 0 0 0 0 0\n")
	start := time.Unix(1_764_900_000, 0)
	for _, tc := range []struct {
		name                 string
		allowed              []int
		cgroups              fstest.MapFS
		wantFirst, wantLater float32
		wantMemory           Memory
	}{
		// a core's first sample is 0, as the reference's is
		{name: "cores 1 and 3, a memory cgroup", allowed: []int{1, 3}, cgroups: cgroups,
			wantFirst: 0, wantLater: 50, wantMemory: Memory{TotalBytes: 4096, AvailableBytes: 3072}},
		{name: "every core, no cgroup tree", allowed: []int{0, 1, 2, 3},
			wantFirst: sinceBoot, wantLater: 25, wantMemory: Memory{TotalBytes: 10 << 10, AvailableBytes: 8 << 10}},
		{name: "a core the machine does not have", allowed: []int{1, 9},
			wantFirst: sinceBoot, wantLater: 25, wantMemory: Memory{TotalBytes: 10 << 10, AvailableBytes: 8 << 10}},
	} {
		var cg fs.FS
		if tc.cgroups != nil {
			cg = tc.cgroups
		}
		s := NewSampler(liveFS{proc}, "7", 4096).Confined(tc.allowed, cg)
		proc["stat"] = &fstest.MapFile{Data: boot}
		first := s.Sample(start)
		proc["stat"] = &fstest.MapFile{Data: later}
		f := s.Sample(start.Add(MinimumCPUInterval))
		if first.TotalCPUPercent != tc.wantFirst || f.TotalCPUPercent != tc.wantLater ||
			f.TotalMemoryBytes != tc.wantMemory.TotalBytes || f.AvailableMemoryBytes != tc.wantMemory.AvailableBytes {
			t.Errorf("%s: CPU %v%% then %v%%, memory %d/%d; want %v%% then %v%%, %+v", tc.name, first.TotalCPUPercent, f.TotalCPUPercent,
				f.AvailableMemoryBytes, f.TotalMemoryBytes, tc.wantFirst, tc.wantLater, tc.wantMemory)
		}
	}
}

// Many samples of a confined process: each interval's percentage is its cores'
// own, whichever of the sampler's two slices of cores the sample was parsed into.
func TestSamplerConfinedLongLife(t *testing.T) {
	proc := fstest.MapFS{"meminfo": {Data: []byte("MemTotal: 10 kB\nMemAvailable: 8 kB\n")}}
	s := NewSampler(liveFS{proc}, "7", 4096).Confined([]int{1, 3}, nil)
	now := time.Unix(1_764_900_000, 0)
	var busy, idle [4]uint64
	for i := range 200 {
		// 100 ticks a core; core 1 busy i%101 of them, core 3 (i*7)%101.
		want := float32((i%101)+(i*7)%101) / 2
		busy[1], idle[1] = busy[1]+uint64(i%101), idle[1]+100-uint64(i%101)
		busy[3], idle[3] = busy[3]+uint64(i*7%101), idle[3]+100-uint64(i*7%101)
		idle[0], idle[2] = idle[0]+100, idle[2]+100
		text := fmt.Appendf(nil, "cpu  %d 0 0 %d 0 0 0 0 0 0\n", busy[1]+busy[3], idle[0]+idle[1]+idle[2]+idle[3])
		for core := range 4 {
			text = fmt.Appendf(text, "cpu%d %d 0 0 %d 0 0 0 0 0 0\n", core, busy[core], idle[core])
		}
		proc["stat"] = &fstest.MapFile{Data: append(text, "intr 1 2 3\n"...)}
		now = now.Add(time.Second)
		f := s.Sample(now)
		if i > 0 && f.TotalCPUPercent != want {
			t.Fatalf("sample %d: cores 1 and 3 at %v%%, want %v%%", i, f.TotalCPUPercent, want)
		}
	}
}
