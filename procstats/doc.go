// Package procstats reads the figures GET_STATS reports about the process and the
// machine from Linux's /proc, with the meanings the reference server's figures have
// (apache/iggy core/system_stats/src/lib.rs, which takes them from the sysinfo
// crate):
//
//	cpu_usage         the process's CPU time over the interval since the previous
//	                  sample, in percent of one core (up to 100 × the CPU count);
//	                  0 on the first sample, which has no earlier one
//	total_cpu_usage   the whole machine's busy time over the same interval, in
//	                  percent of all cores (0..100); the first sample's interval
//	                  is the time since boot
//	memory_usage      the process's resident set (/proc/self/stat rss × page size)
//	total_memory      MemTotal of /proc/meminfo
//	available_memory  MemAvailable of /proc/meminfo (the kernel's estimate of what
//	                  can be allocated without swapping, not MemFree)
//	read_bytes        read_bytes and write_bytes of /proc/self/io: what the
//	written_bytes     process's threads made the storage layer read and write,
//	                  since the process started (page-cache hits are not reads)
//	threads_count     the process's threads (/proc/self/stat num_threads)
//	os_name           NAME of /etc/os-release (DISTRIB_ID of /etc/lsb-release)
//	os_version        "Linux (<NAME> <VERSION_ID>)", or "Linux (<NAME>)" without
//	                  a version, or "Linux" without either
//
// Samples closer together than MinimumCPUInterval do not measure CPU again: the
// sample repeats the previous percentages (the tick counters advance every 10 ms,
// so a shorter interval is mostly rounding).
//
// Why a package of its own: the parsers are pure functions of a file's text,
// table-tested on real kernel formats and on truncated and garbage text; the
// Sampler is the one piece of state (the previous CPU sample), bounded and cheap:
// a sample reads four small files and starts nothing. A file that cannot be read
// or parsed leaves its figures 0; it is never an error of the whole sample.
//
// The reference also scopes total_cpu_usage to a cpuset and the memory figures
// to a memory cgroup when the process is confined; this package reports the
// host's figures.
package procstats
