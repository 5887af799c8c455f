// Package procstats reads the figures GET_STATS reports about the process and the
// machine from Linux's /proc, with the meanings the reference server's figures have
// (apache/iggy core/system_stats/src/lib.rs, which takes them from the sysinfo
// crate):
//
//	cpu_usage         the process's CPU time over the interval since the previous
//	                  sample, in percent of one core (up to 100 × the CPU count);
//	                  0 on the first sample, which has no earlier one
//	total_cpu_usage   the whole machine's busy time over the same interval, in
//	                  percent of all cores (0..100) or of the process's allowed
//	                  cores; the first sample's interval is the time since boot
//	                  (a core's first percentage is 0)
//	memory_usage      the process's resident set (/proc/self/stat rss × page size)
//	total_memory      MemTotal of /proc/meminfo, or a memory cgroup's lower limit
//	available_memory  MemAvailable of /proc/meminfo (the kernel's estimate of what
//	                  can be allocated without swapping, not MemFree), or what
//	                  the cgroup's limit leaves
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
// a sample reads four small files (and a confined process's cgroup files) and
// starts nothing. A file that cannot be read
// or parsed leaves its figures 0; it is never an error of the whole sample.
//
// A monitoring system polls GET_STATS every few seconds for as long as a node
// runs, so a sample allocates nothing once warm: the Sampler opens each file
// once and keeps it open (heldFile, held.go), reads it again from offset 0 into
// a buffer it keeps (a /proc or cgroupfs file answers each such read with its
// current text), and parses it in place; the slice of cores of /proc/stat is
// one of two the Sampler alternates between. A file that fails a read is opened
// again at the next sample; one that cannot be opened (a cgroup file this host
// lacks) is tried again every reopenInterval, not at every sample. A process
// moved to another cgroup is walked anew: /proc/<pid>/cgroup is read at every
// sample and the cgroup files are held for the walk it names.
//
// A process confined to some cores or to a memory cgroup gets the figures of
// what it may use, as the reference gives them (Sampler.Confined): the mean
// busy percentage of its cores, its cgroup's memory limit and what is
// available under it (CgroupMemory).
package procstats
