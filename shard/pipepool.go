package shard

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// A reply spliced from a segment file goes file -> pipe -> socket: a pipe is
// the kernel's only way to move page references between two files. Each pipe
// costs two descriptors against the process's open-file limit and up to its
// capacity in kernel memory while it is full, so a shard keeps a bounded pool
// and lends a pipe to one reply at a time (not one per connection); a reply
// that finds the pool empty takes the copying path. A pipe comes back only
// empty: one a reply left bytes in (its socket closed midway) is closed, so no
// reply can ever send another's leftover bytes.

// PipesPerShardMaxDefault is Config.PipesPerShardMax's default: the replies a
// shard splices at once. 32 pipes are 64 descriptors and, full, 32 MiB of
// kernel memory per shard.
const PipesPerShardMaxDefault = 32

// PipeSizeBytesDefault is Config.PipeSizeBytes's default: a poll of 1,000
// messages of 1,000 bytes is ~1 MB, spliced in one file -> pipe step.
const PipeSizeBytesDefault = 1 << 20

// ErrNoPipe is Take's answer when all the pool's pipes are lent: the reply
// takes the copying path.
var ErrNoPipe = errors.New("shard: every pipe of the pool is lent")

// Pipe is a pipe lent by a PipePool, blocking at both ends (io_uring runs a
// splice that would block in its workers).
type Pipe struct {
	ReadFd, WriteFd int
	// CapacityBytes is what the kernel granted (F_GETPIPE_SZ): the most one
	// file -> pipe splice moves before the pipe is emptied.
	CapacityBytes int
}

// PipePool is one shard's pipes. It is used on the shard's goroutine only.
type PipePool struct {
	free          []Pipe
	lent          int
	pipesMax      int
	sizeBytesWant int
	created       uint64 // pipes made, over the pool's life
	closedDirty   uint64 // pipes given back holding bytes, and closed
}

func newPipePool(pipesMax, sizeBytes int) PipePool {
	return PipePool{pipesMax: pipesMax, sizeBytesWant: sizeBytes}
}

// Take lends a pipe, empty, making one if none is free and the bound allows:
// ErrNoPipe when pipesMax are lent, or the kernel's error when a pipe cannot
// be made (the open-file limit): either way the reply can still be copied.
func (p *PipePool) Take() (Pipe, error) {
	if n := len(p.free); n > 0 {
		pipe := p.free[n-1]
		p.free = p.free[:n-1]
		p.lent++
		return pipe, nil
	}
	if p.lent >= p.pipesMax {
		return Pipe{}, ErrNoPipe
	}
	pipe, err := makePipe(p.sizeBytesWant)
	if err != nil {
		return Pipe{}, err
	}
	p.created++
	p.lent++
	return pipe, nil
}

// Give takes a lent pipe back. A pipe still holding bytes (a reply cut short)
// is closed, never lent again.
func (p *PipePool) Give(pipe Pipe) {
	if p.lent == 0 {
		panic("shard: a pipe given back to a pool that lent none")
	}
	p.lent--
	queued, err := unix.IoctlGetInt(pipe.ReadFd, unix.TIOCINQ)
	if err != nil || queued != 0 {
		p.closedDirty++
		closePipe(pipe)
		return
	}
	p.free = append(p.free, pipe)
}

// Lent returns the pipes lent now; Created those made over the pool's life;
// ClosedDirty those given back holding bytes and closed.
func (p *PipePool) Lent() int           { return p.lent }
func (p *PipePool) Created() uint64     { return p.created }
func (p *PipePool) ClosedDirty() uint64 { return p.closedDirty }

// close closes the free pipes. Lent pipes are their borrowers' to give back
// or close.
func (p *PipePool) close() {
	for _, pipe := range p.free {
		closePipe(pipe)
	}
	p.free = p.free[:0]
}

func makePipe(sizeBytesWant int) (Pipe, error) {
	var fds [2]int
	if err := unix.Pipe2(fds[:], unix.O_CLOEXEC); err != nil {
		return Pipe{}, fmt.Errorf("shard: pipe: %w", err)
	}
	pipe := Pipe{ReadFd: fds[0], WriteFd: fds[1]}
	granted, err := setPipeSize(pipe.WriteFd, sizeBytesWant)
	if err != nil {
		closePipe(pipe)
		return Pipe{}, err
	}
	pipe.CapacityBytes = granted
	return pipe, nil
}

// setPipeSize asks for sizeBytesWant and settles for less: an unprivileged
// process gets at most /proc/sys/fs/pipe-max-size (EPERM above it), and a user
// over fs/pipe-user-pages-soft keeps the size the pipe has (EPERM again).
// It returns the size granted.
func setPipeSize(fd, sizeBytesWant int) (int, error) {
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETPIPE_SZ, sizeBytesWant); err != nil {
		if maxBytes, ok := pipeMaxSizeBytes(); ok && maxBytes < sizeBytesWant {
			unix.FcntlInt(uintptr(fd), unix.F_SETPIPE_SZ, maxBytes)
		}
	}
	granted, err := unix.FcntlInt(uintptr(fd), unix.F_GETPIPE_SZ, 0)
	if err != nil {
		return 0, fmt.Errorf("shard: F_GETPIPE_SZ: %w", err)
	}
	return granted, nil
}

func pipeMaxSizeBytes() (int, bool) {
	b, err := os.ReadFile("/proc/sys/fs/pipe-max-size")
	if err != nil {
		return 0, false
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	return n, err == nil && n > 0
}

func closePipe(pipe Pipe) {
	unix.Close(pipe.ReadFd)
	unix.Close(pipe.WriteFd)
}
