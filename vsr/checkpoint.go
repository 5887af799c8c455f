package vsr

import "fmt"

// The checkpoint rule. A caller that restarts from checkpoints
// (CoreConfig.ReportsCheckpoints) takes one every CheckpointIntervalOps applied
// ops, and the primary never proposes an op a journal window (JournalSlots) or
// more above the last checkpoint it was told of: a restart from that checkpoint
// must find every later op in the window (Propose, ErrCheckpointDue). The two
// bounds meet. With a window of W slots, a pipeline of P prepares and a
// checkpoint every I ops, counted from the last checkpoint c:
//
//   - The checkpoint comes due at the applied op c+I; the primary proposes at most
//     up to c+W-1. For I >= W the op that would bring the checkpoint due is never
//     proposed: no op commits again, on any replica, for good. This is the
//     lock-up of a cluster at the old defaults (W = I = 1,024).
//   - For W-P < I < W the checkpoint still comes due, but the ops a full pipeline
//     would put in flight before it reach c+W: the primary's proposals are
//     refused (ErrCheckpointDue) and its pipeline runs dry at every checkpoint.
//   - The caller writes the checkpoint of op c+I (c+I or a little later: it
//     takes the one after the Ready that applied it) while the primary goes on:
//     a second pipeline may be proposed before it is durable and the window
//     moves. So that neither pipeline is ever refused: I + 2P <= W.
//
// CheckpointIntervalOpsMax is that largest I, as TigerBeetle derives
// vsr_checkpoint_ops from journal_slot_count minus two pipelines (and its LSM
// compaction bar, which has no counterpart here) in src/constants.zig.
//
// What does not move the bound:
//
//   - A failed checkpoint: the caller keeps the last durable one as c (reporting
//     nothing) and tries again later, at whatever op it has applied then; the
//     primary, stopped at c+W-1 in the worst case, goes on once one succeeds.
//     Counting the next try from the failed op instead would put it at c+2I,
//     past c+W-1: the lock-up again, after a single failed write.
//   - A backup whose checkpoint lags: the bound is the primary's own (a
//     backup's caller keeps every op above its own checkpoint in its journal). A
//     backup that becomes primary with a checkpoint a window or more below its
//     head has, once the view's log is applied, more than I ops past it: its
//     checkpoint is due at once, and its proposals wait for it, once.
//   - A window that grew on recovery (a caller that sizes its window to hold a
//     long recovered journal): the bound only widens, I + 2P <= W' for W' >= W.
//
// A replica that fell more than a window behind is not repaired from the log: it
// takes a state transfer (transfer.go), which counts as its checkpoint.

// ErrCheckpointDue is Propose's refusal of an op the journal window could not
// hold beside every op above the caller's last checkpoint: the caller takes its
// checkpoint first. It is a kind of ErrPipelineFull (the request waits).
var ErrCheckpointDue = fmt.Errorf("%w: a checkpoint is due", ErrPipelineFull)

// CheckpointIntervalOpsMax is the largest checkpoint interval a ReportsCheckpoints
// caller may use with a window of journalSlots and a pipeline of pipelineDepth
// (0: PipelineDepthDefault): journalSlots - 2*pipelineDepth (see above), 0 when
// the window is too small for any.
func CheckpointIntervalOpsMax(journalSlots, pipelineDepth int) uint64 {
	if pipelineDepth == 0 {
		pipelineDepth = PipelineDepthDefault
	}
	if room := journalSlots - 2*pipelineDepth; room > 0 {
		return uint64(room)
	}
	return 0
}

// checkCheckpointInterval asserts the rule where a core is built.
func checkCheckpointInterval(cfg *CoreConfig) error {
	if !cfg.ReportsCheckpoints {
		return nil
	}
	limit := CheckpointIntervalOpsMax(cfg.JournalSlots, cfg.PipelineDepth)
	if cfg.CheckpointIntervalOps < 1 || cfg.CheckpointIntervalOps > limit {
		return fmt.Errorf("vsr: checkpoint interval %d ops outside 1..%d (a window of %d slots less two pipelines of %d): a checkpoint must come due well inside the window",
			cfg.CheckpointIntervalOps, limit, cfg.JournalSlots, cfg.PipelineDepth)
	}
	return nil
}

// CheckpointOp is the op of the last checkpoint the caller reported (or recovered
// from, or installed).
func (c *Core) CheckpointOp() uint64 { return c.log.checkpointOp }
