// Package fdpass moves a connection's file descriptor from the shard that accepted it
// (shard 0) to the shard that will serve it, without leaking or double-closing it on
// any path.
//
// Two ways, chosen once at startup by Probe:
//
//   - ModeMsgRing (Linux 6.0+): IORING_OP_MSG_RING with IORING_MSG_SEND_FD installs
//     the file from a slot of the sender ring's registered-file table straight into
//     the target ring's table, at a slot the target reserved or at one the kernel
//     picks (IORING_FILE_INDEX_ALLOC), and posts a CQE on the target ring that wakes
//     it. The target never sees a plain descriptor and never makes a system call to
//     adopt it.
//   - ModeQueue (older kernels): a duplicate of the descriptor (F_DUPFD_CLOEXEC)
//     travels as a Handoff over the inter-shard queue; the sender closes its own copy
//     at once. The queue is the shard's; this package needs only an EnqueueFunc.
//
// Ownership is the whole design. From the moment SendFd or SendSlot is called the
// Sender owns the descriptor (or slot), and every path ends with it in exactly one
// place: installed at the target, or closed exactly once. In ModeMsgRing the send
// is linked (IOSQE_IO_HARDLINK) to the close of the sender's slot, so the kernel
// closes the sender's copy after the send whatever its result, and the Outcome is
// reported only when both completions have arrived: at that point nothing of the
// connection is left on the sender, and on failure (target ring gone, target
// thread exited, target table full) the connection is closed.
//
// user_data of the CQEs this package causes (bit 63 set, so ring.Table never claims
// them; the shard routes them with Owns):
//
//	 63  62 .. 56  55 . 53  52 ............ 32  31 .............. 0
//	+---+---------+--------+------------------+-------------------+
//	| 1 |  0x46   |  kind  | slot+1 | gen     | cookie | in-flight |
//	+---+---------+--------+------------------+-------------------+
//	kind 1 (on the target ring): a file arrived; bits 32..52 are the explicit
//	       target slot + 1, or 0 when the kernel chose it (then cqe.res is the slot);
//	       bits 0..31 the sender's cookie.
//	kind 2, 3 (on the sender ring): the send, and the close of the sender's slot, of
//	       in-flight entry bits 0..31 in its generation bits 32..52.
//
// A Sender belongs to its ring's thread, like the ring; it allocates nothing per
// handoff.
package fdpass
