package shard

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/iggy-shard/iggy-shard/arena"
)

// Wire constants the framer reads before any other decoding: the header is fixed-size,
// its size field sits at byte 48 and its command byte at 60 (see the package doc).
const (
	headerSizeBytes    = 256
	sizeFieldOffset    = 48
	commandFieldOffset = 60
	commandRequest     = 5
)

// FrameSizeMaxDefault is the largest frame a client may send: 64 MiB, the limit every
// Iggy SDK enforces on its own side.
const FrameSizeMaxDefault = 64 << 20

// FrameError says why a connection's byte stream cannot be framed. The connection is
// closed; for a size out of range the client first gets an Eviction frame.
type FrameError struct {
	Reason FrameErrorReason
	Value  uint32 // the offending size or command byte
	Limit  uint32 // the bound it broke, when there is one
}

// FrameErrorReason enumerates the ways a client byte stream is malformed.
type FrameErrorReason uint8

const (
	// FrameSizeTooSmall: the header's size field is below 256.
	FrameSizeTooSmall FrameErrorReason = iota + 1
	// FrameSizeTooLarge: the header's size field is above the configured maximum.
	FrameSizeTooLarge
	// FrameNotRequest: the command byte is not Request (5); replica-plane traffic or
	// garbage on the client port.
	FrameNotRequest
)

func (e *FrameError) Error() string {
	switch e.Reason {
	case FrameSizeTooSmall:
		return fmt.Sprintf("shard: frame size %d < header size %d", e.Value, e.Limit)
	case FrameSizeTooLarge:
		return fmt.Sprintf("shard: frame size %d > frame size max %d", e.Value, e.Limit)
	case FrameNotRequest:
		return fmt.Sprintf("shard: frame command %d is not Request (%d)", e.Value, commandRequest)
	}
	return fmt.Sprintf("shard: frame error reason %d", e.Reason)
}

// ErrFrameBuffersExhausted is returned when the shard's arena has no buffer for a frame.
// It is not final: the framer is as it was before the failed acquire, and the bytes
// Feed did not consume can be fed again once buffers are back. The connection waits
// for them, unread (Conn.waitingForBuffer); what keeps one client from holding the
// buffers others wait for is the bound on its retained frames (retainedBytesMax).
var ErrFrameBuffersExhausted = errors.New("shard: no frame buffer available")

// BufferSource is what a Framer draws frame buffers from: a shard's *arena.Arena.
type BufferSource interface {
	Acquire(sizeBytes int) (arena.Buffer, error)
	Release(b arena.Buffer)
}

// Framer cuts a connection's byte stream into frames, each in one contiguous
// 16-byte-aligned buffer: [256-byte header][size-256 body]. It is a pure state machine
// (bytes in, frames or a typed error out); it does no I/O and keeps no clock.
//
// The header is assembled into a standing buffer; a frame that fits stays there, so a
// stream of small requests never touches the arena. A larger frame moves to a buffer
// that grows with the bytes that actually arrived (at most twice what was received, or
// the declared size when smaller): a header claiming 64 MiB followed by silence costs
// one small buffer, not 64 MiB.
type Framer struct {
	buffers         BufferSource
	frameSizeMax    uint32
	standingSizeMax int // frames up to this size are assembled in the standing buffer

	standing   arena.Buffer // reused for every small frame
	current    arena.Buffer // where the frame being assembled lives
	inStanding bool         // current is the standing buffer
	filled     int          // bytes of the current frame received so far
	size       int          // declared frame size; 0 until the header is complete
	lastSize   int          // the size of the last frame delivered; 0 before the first

	delivered bool // a frame was returned and is still the caller's to read
}

// NewFramer returns a framer that draws buffers from buffers and refuses frames larger
// than frameSizeMax bytes. standingSizeBytes (a buffer class size of the arena, at least
// 256) is the size of the standing buffer kept for small frames.
func NewFramer(buffers BufferSource, frameSizeMax uint32, standingSizeBytes int) *Framer {
	if standingSizeBytes < headerSizeBytes {
		panic("shard: standing frame buffer smaller than a header")
	}
	if frameSizeMax < headerSizeBytes {
		panic("shard: frame size max smaller than a header")
	}
	return &Framer{buffers: buffers, frameSizeMax: frameSizeMax, standingSizeMax: standingSizeBytes}
}

// Partial reports whether a frame has started but not completed: the state in which a
// silent peer is holding a buffer hostage, so the shard applies its frame timeout.
func (f *Framer) Partial() bool { return f.filled > 0 && !f.delivered }

// Feed consumes bytes from p until a frame completes or p is exhausted. It returns how
// many bytes it consumed and the completed frame, if any. The frame stays valid until
// the next Feed or Close, unless Detach hands its buffer to the caller.
//
// A *FrameError is final: the connection must be closed. ErrFrameBuffersExhausted is
// not: feed the unconsumed bytes again later.
func (f *Framer) Feed(p []byte) (consumed int, frame []byte, err error) {
	f.recycle()
	for consumed < len(p) {
		if f.current.IsZero() {
			if err := f.acquireStanding(); err != nil {
				return consumed, nil, err
			}
		}
		buf := f.current.Full()
		if f.size == 0 {
			n := copy(buf[f.filled:headerSizeBytes], p[consumed:])
			f.filled += n
			consumed += n
			if f.filled < headerSizeBytes {
				return consumed, nil, nil
			}
			if err := f.checkHeader(buf[:headerSizeBytes]); err != nil {
				return consumed, nil, err
			}
		} else {
			if f.filled == len(buf) {
				if err := f.grow(); err != nil {
					return consumed, nil, err
				}
				buf = f.current.Full()
			}
			end := min(f.size, len(buf))
			n := copy(buf[f.filled:end], p[consumed:])
			f.filled += n
			consumed += n
		}
		if f.size != 0 && f.filled == f.size {
			f.delivered, f.lastSize = true, f.size
			return consumed, buf[:f.size:f.size], nil
		}
	}
	return consumed, nil, nil
}

// Space returns where the next bytes of the frame being assembled go, once its
// header is in and while its body is not complete, for a caller that reads them
// there itself (a TLS session's plaintext, a recv of the connection's socket) and
// tells Filled how many came: one copy fewer than Feed. It returns nil otherwise, or when the frame's buffer is full and
// no larger one is to be had (Feed then reports ErrFrameBuffersExhausted).
func (f *Framer) Space() []byte {
	if f.size == 0 || f.delivered {
		return nil
	}
	buf := f.current.Full()
	if f.filled == len(buf) {
		if f.grow() != nil {
			return nil
		}
		buf = f.current.Full()
	}
	return buf[f.filled:min(f.size, len(buf))]
}

// Awaited returns how many bytes of the frame being assembled are still to come,
// once its header is in; 0 otherwise.
func (f *Framer) Awaited() int {
	if f.size == 0 || f.delivered {
		return 0
	}
	return f.size - f.filled
}

// Filled accounts for n bytes read into Space; it returns the frame when they
// complete it, valid as Feed's.
func (f *Framer) Filled(n int) (frame []byte) {
	f.filled += n
	if f.filled < f.size {
		return nil
	}
	f.delivered, f.lastSize = true, f.size
	return f.current.Full()[:f.size:f.size]
}

// Size returns the declared size of the frame being assembled once its header is
// in; 0 otherwise (before its header, or once it was delivered).
func (f *Framer) Size() int {
	if f.delivered {
		return 0
	}
	return f.size
}

// HeaderAwaited returns how many bytes of the next frame's header are still to
// come: all of it between frames, none once it is in.
func (f *Framer) HeaderAwaited() int {
	switch {
	case f.delivered:
		return headerSizeBytes
	case f.size == 0:
		return headerSizeBytes - f.filled
	}
	return 0
}

// LastSize returns the size of the last frame delivered (0 before the first): what
// a connection expects of its next frame.
func (f *Framer) LastSize() int { return f.lastSize }

// checkHeader validates what the framer needs from a complete header: a size within
// [256, frameSizeMax] and the Request command. The rest of the header is wire's job.
func (f *Framer) checkHeader(header []byte) error {
	size := binary.LittleEndian.Uint32(header[sizeFieldOffset:])
	if size < headerSizeBytes {
		return &FrameError{Reason: FrameSizeTooSmall, Value: size, Limit: headerSizeBytes}
	}
	if size > f.frameSizeMax {
		return &FrameError{Reason: FrameSizeTooLarge, Value: size, Limit: f.frameSizeMax}
	}
	if command := header[commandFieldOffset]; command != commandRequest {
		return &FrameError{Reason: FrameNotRequest, Value: uint32(command)}
	}
	f.size = int(size)
	return nil
}

// grow moves the frame to a buffer twice as large (capped at the declared size), so
// memory follows the bytes received and not the size a peer claims.
func (f *Framer) grow() error {
	old := f.current
	want := min(f.size, 2*len(old.Full()))
	next, err := f.buffers.Acquire(want)
	if err != nil {
		return ErrFrameBuffersExhausted
	}
	copy(next.Full(), old.Full()[:f.filled])
	if !f.inStanding {
		f.buffers.Release(old)
	}
	f.current, f.inStanding = next, false
	return nil
}

func (f *Framer) acquireStanding() error {
	if f.standing.IsZero() {
		b, err := f.buffers.Acquire(f.standingSizeMax)
		if err != nil {
			return ErrFrameBuffersExhausted
		}
		f.standing = b
	}
	f.current, f.inStanding = f.standing, true
	return nil
}

// recycle readies the framer for the next frame after one was delivered.
func (f *Framer) recycle() {
	if !f.delivered {
		return
	}
	f.releaseCurrent()
	f.filled, f.size, f.delivered = 0, 0, false
}

// releaseCurrent drops the current buffer, returning it to the arena unless it is the
// standing one.
func (f *Framer) releaseCurrent() {
	if !f.current.IsZero() && !f.inStanding {
		f.buffers.Release(f.current)
	}
	f.current, f.inStanding = arena.Buffer{}, false
}

// Detach hands the buffer of the frame just delivered to the caller, who must Release
// it to the same arena (on the same shard) when done. The framer continues with a fresh
// buffer. It panics when no frame is delivered: that is our bug.
func (f *Framer) Detach() arena.Buffer {
	if !f.delivered {
		panic("shard: Detach without a delivered frame")
	}
	b := f.current
	if f.inStanding {
		f.standing = arena.Buffer{}
	}
	f.current, f.inStanding = arena.Buffer{}, false
	f.filled, f.size, f.delivered = 0, 0, false
	return b
}

// Close releases every buffer the framer holds. The framer must not be used afterwards.
func (f *Framer) Close() {
	f.releaseCurrent()
	if !f.standing.IsZero() {
		f.buffers.Release(f.standing)
	}
	f.standing = arena.Buffer{}
	f.filled, f.size, f.lastSize, f.delivered = 0, 0, 0, false
}
