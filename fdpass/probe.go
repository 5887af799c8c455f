package fdpass

import (
	"errors"
	"fmt"
	"time"

	"github.com/iggy-shard/iggy-shard/ring"
	"golang.org/x/sys/unix"
)

// probeTimeout bounds the wait for the probe's one completion; the kernel answers a
// msg_ring between two idle rings at once, so this only guards against a hang.
const probeTimeout = 5 * time.Second

// Probed is the result of Probe: the mode to use and, for the startup log, why.
type Probed struct {
	Mode Mode
	Why  string
}

// Probe finds out whether this kernel can send a file into another ring
// (IORING_MSG_SEND_FD) by doing it once, between two throwaway rings, with a pipe:
// asking the opcode probe is not enough, since IORING_OP_MSG_RING (5.18) predates its
// send-fd command (6.0) and both fail unknown commands with EINVAL. An error means
// io_uring itself is unusable (see linux.CheckIOURing).
func Probe() (Probed, error) {
	// No SINGLE_ISSUER: the probe may run on any thread.
	source, err := ring.New(ring.Options{SQEntries: 2})
	if err != nil {
		return Probed{}, fmt.Errorf("fdpass: probe: %w", err)
	}
	defer source.Close()
	if !source.Supports(ring.OpMsgRing) {
		return Probed{Mode: ModeQueue, Why: "kernel lacks IORING_OP_MSG_RING (before 5.18)"}, nil
	}
	target, err := ring.New(ring.Options{SQEntries: 2})
	if err != nil {
		return Probed{}, fmt.Errorf("fdpass: probe: %w", err)
	}
	defer target.Close()
	var pipe [2]int
	if err := unix.Pipe2(pipe[:], unix.O_CLOEXEC); err != nil {
		return Probed{}, fmt.Errorf("fdpass: probe: pipe: %w", err)
	}
	defer unix.Close(pipe[0])
	defer unix.Close(pipe[1])
	if err := source.RegisterFiles([]int32{int32(pipe[0])}); err != nil {
		return Probed{}, fmt.Errorf("fdpass: probe: %w", err)
	}
	if err := target.RegisterFiles([]int32{-1}); err != nil {
		return Probed{}, fmt.Errorf("fdpass: probe: %w", err)
	}
	sqe, err := source.GetSQE()
	if err != nil {
		return Probed{}, fmt.Errorf("fdpass: probe: %w", err)
	}
	sqe.PrepareMsgRingFd(target.Fd(), 0, 0, packUserData(kindIncoming, 1, 0), 0)
	sqe.UserData = 1
	if _, err := source.Submit(); err != nil {
		return Probed{}, fmt.Errorf("fdpass: probe: %w", err)
	}
	cqe, err := source.WaitCQETimeout(probeTimeout)
	if err != nil {
		return Probed{}, fmt.Errorf("fdpass: probe: no completion for msg_ring send-fd: %w", err)
	}
	res := cqe.Res
	source.CQESeen()
	switch {
	case res >= 0:
		return Probed{Mode: ModeMsgRing, Why: "kernel installs files into another ring (IORING_MSG_SEND_FD)"}, nil
	case errors.Is(unix.Errno(-res), unix.EINVAL):
		return Probed{Mode: ModeQueue, Why: "kernel lacks IORING_MSG_SEND_FD (before 6.0): msg_ring send-fd fails with EINVAL"}, nil
	}
	return Probed{Mode: ModeQueue, Why: fmt.Sprintf("msg_ring send-fd failed in the probe: %s", unix.ErrnoName(unix.Errno(-res)))}, nil
}
