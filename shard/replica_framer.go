package shard

import (
	"encoding/binary"
	"errors"
	"fmt"
	"unsafe"

	"github.com/iggy-shard/iggy-shard/arena"
	"github.com/iggy-shard/iggy-shard/wire"
)

// replicaReadBufferBytes is a registered replica connection's standing read buffer:
// every recv of small frames lands in it (many per recv under load), and a frame up
// to this size is served from it in place. A larger frame gets a buffer of its own,
// received into directly, so a 4 MiB prepare is copied by the kernel once and by
// nobody else. During the handshake (256-byte frames, from a peer nobody vouched for
// yet) the read buffer is a standing 4 KiB one: a flood of half-open handshakes holds
// small buffers, not the 64 KiB ones client frames need.
const replicaReadBufferBytes = 64 << 10

// ReplicaFrameError says why a replica connection's byte stream was refused. The
// connection is closed: peers are not answered (the protocol has no eviction between
// replicas), and nothing of the offending frame reaches the handler.
type ReplicaFrameError struct {
	Reason string
	Fault  wire.HeaderFault // the header fault, when the header was refused by wire
}

func (e *ReplicaFrameError) Error() string {
	if e.Fault != wire.FaultNone {
		return "shard: replica frame refused: " + e.Reason + ": " + e.Fault.Error()
	}
	return "shard: replica frame refused: " + e.Reason
}

// errReplicaBuffersExhausted: neither the arena nor the heap fallback could hold a
// frame (only the arena's bookkeeping can fail; the heap does not).
var errReplicaBuffersExhausted = errors.New("shard: no buffer for a replica frame")

// replicaFramer cuts a replica connection's byte stream into frames and validates each
// before anything of it is believed. It is a pure state machine over its buffers: the
// caller receives into RecvTarget, reports the count with Received, then takes frames
// with Next until it returns none.
//
// During the handshake every frame must be exactly one 256-byte header (the handshake
// state machine reads it). After it, each header is validated as soon as its 256
// bytes are in, before its body is buffered: wire.DecodeReplicaHeader (size within
// MessageSizeMax, a replica-plane command, so Reply (8) and Eviction (13) and the
// unused commands are refused; the frame seal; the command's own rules), no handshake
// command, this cluster's id, and a Prepare's identity; the body seal once the body
// is in. A frame is delivered 16-byte aligned (headers are viewed in place): in place
// in the read buffer, copied to the scratch buffer when it sits at an unaligned
// offset, or in its own buffer.
type replicaFramer struct {
	buffers   BufferSource
	cluster   wire.Uint128
	sizeMax   uint32
	handshake bool

	read       arena.Buffer // the standing read buffer; bytes [start, end) are unparsed
	readSize   int          // the part of read in use: 4 KiB in the handshake, then 64 KiB
	start, end int
	// scratch holds an aligned copy of a frame or header at an unaligned offset,
	// readSize bytes, taken when first needed (from the arena, else the heap).
	scratch       []byte
	scratchBuffer arena.Buffer

	// big is a frame larger than what the read buffer holds, received into directly:
	// bigData[:bigFilled] has arrived of len(bigData). bigBuffer is its arena buffer,
	// zero when it is on the heap (the arena was dry).
	bigBuffer arena.Buffer
	bigData   []byte
	bigFilled int
	// bigDelivered: the frame Next returned is big; it is released on the next call
	// unless detached.
	bigDelivered bool
}

func newReplicaFramer(buffers BufferSource, cluster wire.Uint128, sizeMax uint32) (*replicaFramer, error) {
	f := &replicaFramer{buffers: buffers, cluster: cluster, sizeMax: sizeMax, handshake: true, readSize: standingFrameBytes}
	var err error
	if f.read, err = buffers.Acquire(standingFrameBytes); err != nil {
		return nil, errReplicaBuffersExhausted
	}
	return f, nil
}

// EndHandshake switches from handshake frames to consensus frames, and to the large
// read buffer. Without one free it keeps the small buffer: frames above 4 KiB then
// take buffers of their own, which works, a little slower.
func (f *replicaFramer) EndHandshake() {
	f.handshake = false
	bigger, err := f.buffers.Acquire(replicaReadBufferBytes)
	if err != nil {
		return
	}
	f.end = copy(bigger.Full(), f.read.Full()[f.start:f.end])
	f.start = 0
	f.buffers.Release(f.read)
	f.read, f.readSize = bigger, replicaReadBufferBytes
	f.releaseScratch() // sized for the small buffer
}

// scratchBytes returns the scratch buffer, taking it first.
func (f *replicaFramer) scratchBytes() []byte {
	if f.scratch == nil {
		if b, err := f.buffers.Acquire(f.readSize); err == nil {
			f.scratchBuffer, f.scratch = b, b.Full()[:f.readSize]
		} else {
			f.scratch = alignedHeapBytes(f.readSize)
		}
	}
	return f.scratch
}

func (f *replicaFramer) releaseScratch() {
	if !f.scratchBuffer.IsZero() {
		f.buffers.Release(f.scratchBuffer)
	}
	f.scratch, f.scratchBuffer = nil, arena.Buffer{}
}

// RecvTarget returns where the next received bytes go: the rest of a big frame, or
// the free end of the read buffer (compacted first when the frame in progress would
// not fit behind what is already there).
func (f *replicaFramer) RecvTarget() []byte {
	if f.bigData != nil && !f.bigDelivered {
		return f.bigData[f.bigFilled:]
	}
	buf := f.read.Full()[:f.readSize]
	if f.start == f.end {
		f.start, f.end = 0, 0
	} else if f.start > 0 {
		need := headerSizeBytes
		if size, ok := wire.PeekSize(buf[f.start:f.end]); ok && int(size) > need {
			need = min(int(size), f.readSize)
		}
		if len(buf)-f.start < need {
			f.end = copy(buf, buf[f.start:f.end])
			f.start = 0
		}
	}
	return buf[f.end:]
}

// Received accounts for n bytes received into the last RecvTarget.
func (f *replicaFramer) Received(n int) {
	if f.bigData != nil && !f.bigDelivered {
		f.bigFilled += n
		return
	}
	f.end += n
}

// Next returns the next complete, validated frame, or nil when more bytes are needed.
// The frame stays valid until the next call of Next or Close, unless Detach took it.
// An error is final: close the connection.
func (f *replicaFramer) Next() ([]byte, error) {
	if f.bigDelivered {
		f.releaseBig()
	}
	if f.bigData != nil {
		if f.bigFilled < len(f.bigData) {
			return nil, nil
		}
		frame := f.bigData
		if err := f.checkBody(frame); err != nil {
			return nil, err
		}
		f.bigDelivered = true
		return frame, nil
	}
	buf := f.read.Full()[:f.readSize]
	avail := f.end - f.start
	if avail < headerSizeBytes {
		return nil, nil
	}
	header := buf[f.start : f.start+headerSizeBytes]
	aligned := uintptr(unsafe.Pointer(unsafe.SliceData(header)))%wire.HeaderAlignment == 0
	if !aligned {
		header = f.scratchBytes()[:headerSizeBytes]
		copy(header, buf[f.start:])
	}
	size, err := f.checkHeader(header)
	if err != nil {
		return nil, err
	}
	if size > f.readSize {
		return nil, f.startBig(buf[f.start:f.end], size)
	}
	if avail < size {
		return nil, nil
	}
	frame := buf[f.start : f.start+size : f.start+size]
	f.start += size
	if !aligned {
		frame = f.scratchBytes()[:size:size]
		copy(frame, buf[f.start-size:f.start])
	}
	if err := f.checkBody(frame); err != nil {
		return nil, err
	}
	return frame, nil
}

// startBig moves the beginning of a frame larger than the read buffer into a buffer
// of its own; the rest is received straight into it. The header has been validated
// (sealed, or a prepare's identity checked), so its size is what the peer means to
// send, within MessageSizeMax.
func (f *replicaFramer) startBig(have []byte, size int) error {
	b, err := f.buffers.Acquire(size)
	var data []byte
	if err == nil {
		data = b.Full()[:size:size]
	} else {
		// The arena has no buffer this large free: a heap buffer, rare and bounded
		// by one frame per connection, rather than closing a replica link for the
		// server's own shortage.
		data = alignedHeapBytes(size)
	}
	f.bigBuffer, f.bigData = b, data
	f.bigFilled = copy(data, have)
	f.start, f.end = 0, 0
	return nil
}

// alignedHeapBytes returns n heap bytes whose first byte is 16-byte aligned.
func alignedHeapBytes(n int) []byte {
	raw := make([]byte, n+wire.HeaderAlignment)
	off := int(-uintptr(unsafe.Pointer(unsafe.SliceData(raw))) & (wire.HeaderAlignment - 1))
	return raw[off : off+n : off+n]
}

// checkHeader validates a complete header (16-byte aligned) and returns the frame
// size.
func (f *replicaFramer) checkHeader(header []byte) (int, error) {
	if f.handshake {
		if size := binary.LittleEndian.Uint32(header[sizeFieldOffset:]); size != headerSizeBytes {
			return 0, &ReplicaFrameError{Reason: fmt.Sprintf("a handshake frame of %d bytes, not %d", size, headerSizeBytes)}
		}
		return headerSizeBytes, nil
	}
	h, err := wire.DecodeReplicaHeader(header, f.sizeMax)
	if err != nil {
		var fault wire.HeaderFault
		errors.As(err, &fault)
		return 0, &ReplicaFrameError{Reason: "bad header", Fault: fault}
	}
	switch {
	case h.Command >= wire.CommandReplicaHello && h.Command <= wire.CommandReplicaFinish:
		return 0, &ReplicaFrameError{Reason: "a handshake frame (" + h.Command.String() + ") after the handshake"}
	case h.Cluster != f.cluster:
		return 0, &ReplicaFrameError{Reason: "a frame of another cluster"}
	case !wire.ReplicaHeaderSealValid(h):
		return 0, &ReplicaFrameError{Reason: h.Command.String() + " identity checksum mismatch"}
	}
	return int(h.Size), nil
}

// checkBody checks the body seal of a complete frame, where it has one.
func (f *replicaFramer) checkBody(frame []byte) error {
	if f.handshake {
		return nil
	}
	h, _ := wire.ViewHeader[wire.GenericHeader](frame)
	if !wire.ReplicaBodySealValid(h, frame[headerSizeBytes:]) {
		return &ReplicaFrameError{Reason: h.Command.String() + " body seal mismatch"}
	}
	return nil
}

// Partial reports whether a frame has started and not completed.
func (f *replicaFramer) Partial() bool {
	return f.bigData != nil && !f.bigDelivered || f.end > f.start
}

// InBigFrame reports whether RecvTarget is the rest of a large frame.
func (f *replicaFramer) InBigFrame() bool { return f.bigData != nil && !f.bigDelivered }

// InBig reports whether the frame Next returned last lives in its own buffer (Detach
// can take it without a copy).
func (f *replicaFramer) InBig() bool { return f.bigDelivered }

// Detach hands the big frame Next just returned to the caller: its arena buffer (zero
// when it is on the heap), to be released to the same arena.
func (f *replicaFramer) Detach() arena.Buffer {
	if !f.bigDelivered {
		panic("shard: replicaFramer.Detach without a delivered big frame")
	}
	b := f.bigBuffer
	f.bigBuffer, f.bigData, f.bigFilled, f.bigDelivered = arena.Buffer{}, nil, 0, false
	return b
}

func (f *replicaFramer) releaseBig() {
	if !f.bigBuffer.IsZero() {
		f.buffers.Release(f.bigBuffer)
	}
	f.bigBuffer, f.bigData, f.bigFilled, f.bigDelivered = arena.Buffer{}, nil, 0, false
}

// Close releases every buffer the framer holds.
func (f *replicaFramer) Close() {
	f.releaseBig()
	if !f.read.IsZero() {
		f.buffers.Release(f.read)
	}
	f.releaseScratch()
	f.read = arena.Buffer{}
}
