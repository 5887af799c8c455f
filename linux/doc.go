// Package linux gathers the host facts and knobs a shard-per-core server needs before
// and while it starts shards: which CPUs the process may run on and how to pin a
// shard's thread to one, the CPU topology (to choose the shard count and to log), the
// file and locked-memory limits, socket options on raw descriptors (the ring owns
// sockets as plain fds, not net.Conn), and whether io_uring can be used at all.
//
// Why a package of its own: these are the places where a deployment goes wrong before
// a single request is served (a container's seccomp profile, a sysctl, a low
// ulimit), so each check returns an error that names the cause and the remedy, and
// each decision is a pure function of the facts gathered (ClassifyIOURing,
// ParseKernelVersion, SuggestShardCount) so it is table-tested without the host in
// the state being tested.
//
// The io_uring features the ring relies on, and the kernel that brought each one; the
// newest sets MinimumKernel:
//
//	feature                                            kernel
//	IORING_OP_MSG_RING (wake another shard)            5.18
//	provided buffer rings (IORING_REGISTER_PBUF_RING)  5.19
//	multishot accept, IORING_FILE_INDEX_ALLOC          5.19
//	multishot recv, IORING_MSG_SEND_FD                 6.0
//	IORING_SETUP_SINGLE_ISSUER                         6.0
//	IORING_SETUP_DEFER_TASKRUN                         6.1 (the first LTS with all of these)
//
// Everything here is Linux-only and uses golang.org/x/sys/unix; nothing here runs on a
// hot path.
package linux
