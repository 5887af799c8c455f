package arena

import (
	"math/bits"

	"golang.org/x/sys/unix"
)

// TrimIdle gives back to the kernel the pages of every idle buffer of the classes
// that return them (IdlePagesReturn): the free buffers neither acquired nor
// released since the previous TrimIdle, and used since their pages last went back.
// It returns how many bytes of pages it gave back (a page shared with a buffer
// that is not idle stays). The owner calls it every
// TrimIdleInterval or so (the arena has no clock); a buffer in use, or lent to a
// ring, is never touched. One madvise per run of adjacent idle buffers.
func (a *Arena) TrimIdle() (returnedBytes int) {
	if a.closed {
		panic("arena: TrimIdle after Close")
	}
	for ci := range a.classes {
		c := &a.classes[ci]
		if !c.trimIdle {
			continue
		}
		for w := range c.resident {
			idle := c.resident[w] &^ c.inUse[w] &^ c.recent[w]
			c.recent[w] = 0
			for idle != 0 {
				first := bits.TrailingZeros64(idle)
				count := bits.TrailingZeros64(^(idle >> first)) // the run's length
				run := ^uint64(0) << first
				if first+count < 64 {
					run &= 1<<(first+count) - 1
				}
				idle &^= run
				// Only the pages wholly inside the run: the kernel would round a
				// partial page out, zeroing a neighbour's bytes.
				start := alignUp((w*64+first)*c.bufferSizeBytes, pageBytes)
				end := alignDown((w*64+first+count)*c.bufferSizeBytes, pageBytes)
				if start < end {
					// Advice only: a range the kernel refuses keeps its pages, and
					// is tried again at the next TrimIdle.
					if unix.Madvise(c.mem[start:end], unix.MADV_DONTNEED) != nil {
						continue
					}
					returnedBytes += end - start
				}
				c.resident[w] &^= run
				c.trimmedCount += uint64(count)
			}
		}
	}
	return returnedBytes
}

// pin stops TrimIdle giving back the class's pages, for good: the class is handed
// to the kernel to register, which pins the pages it finds there.
func (c *class) pin() { c.trimIdle = false }

// pageBytes is the kernel's page size, the unit madvise works in.
var pageBytes = unix.Getpagesize()

func alignUp(n, align int) int   { return (n + align - 1) / align * align }
func alignDown(n, align int) int { return n / align * align }
