package shard

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
	"unsafe"

	"github.com/iggy-shard/iggy-shard/arena"
)

const testStandingBytes = 4 << 10

func newTestArena(t testing.TB) *arena.Arena {
	t.Helper()
	a, err := arena.New(arena.Config{Classes: []arena.ClassConfig{
		{BufferSizeBytes: 4 << 10, BufferCount: 8},
		{BufferSizeBytes: 64 << 10, BufferCount: 4},
		{BufferSizeBytes: 1 << 20, BufferCount: 2},
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return a
}

// testFrame returns a request frame with the given body, its size field set to the
// true total length.
func testFrame(body []byte) []byte {
	f := make([]byte, headerSizeBytes+len(body))
	binary.LittleEndian.PutUint32(f[sizeFieldOffset:], uint32(len(f)))
	f[commandFieldOffset] = commandRequest
	f[168] = 0x42 // some request number, to tell frames apart
	copy(f[headerSizeBytes:], body)
	return f
}

func headerWith(size uint32, command byte) []byte {
	h := make([]byte, headerSizeBytes)
	binary.LittleEndian.PutUint32(h[sizeFieldOffset:], size)
	h[commandFieldOffset] = command
	return h
}

// feedAll feeds stream to the framer in chunks of chunkBytes and returns copies of the
// frames it produced and the final error.
func feedAll(fr *Framer, stream []byte, chunkBytes int) (frames [][]byte, err error) {
	for len(stream) > 0 {
		chunk := stream[:min(chunkBytes, len(stream))]
		stream = stream[len(chunk):]
		for len(chunk) > 0 {
			n, frame, err := fr.Feed(chunk)
			chunk = chunk[n:]
			if err != nil {
				return frames, err
			}
			if frame != nil {
				if uintptr(unsafe.Pointer(&frame[0]))%16 != 0 {
					panic("frame buffer is not 16-byte aligned")
				}
				frames = append(frames, bytes.Clone(frame))
			}
			if n == 0 && frame == nil {
				panic("Feed made no progress")
			}
		}
	}
	return frames, nil
}

func TestFramerCutsFrames(t *testing.T) {
	ping := testFrame(nil)
	small := testFrame([]byte("hello"))
	big := testFrame(bytes.Repeat([]byte{0xAB}, 100_000))
	exactStanding := testFrame(make([]byte, testStandingBytes-headerSizeBytes))
	stream := bytes.Join([][]byte{ping, small, big, exactStanding, ping}, nil)
	want := [][]byte{ping, small, big, exactStanding, ping}
	for _, chunkBytes := range []int{1, 7, 255, 256, 257, 4096, 65536, len(stream)} {
		a := newTestArena(t)
		fr := NewFramer(a, FrameSizeMaxDefault, testStandingBytes)
		frames, err := feedAll(fr, stream, chunkBytes)
		if err != nil {
			t.Fatalf("chunk %d: %v", chunkBytes, err)
		}
		if len(frames) != len(want) {
			t.Fatalf("chunk %d: %d frames, want %d", chunkBytes, len(frames), len(want))
		}
		for i := range want {
			if !bytes.Equal(frames[i], want[i]) {
				t.Fatalf("chunk %d: frame %d differs", chunkBytes, i)
			}
		}
		if fr.Partial() {
			t.Fatalf("chunk %d: framer partial after whole frames", chunkBytes)
		}
		fr.Close()
		if err := a.CheckNoLeaks(); err != nil {
			t.Fatalf("chunk %d: %v", chunkBytes, err)
		}
	}
}

func TestFramerRejectsBadHeaders(t *testing.T) {
	tests := []struct {
		name   string
		header []byte
		want   FrameError
	}{
		{"size zero", headerWith(0, commandRequest), FrameError{Reason: FrameSizeTooSmall, Value: 0, Limit: 256}},
		{"size 255", headerWith(255, commandRequest), FrameError{Reason: FrameSizeTooSmall, Value: 255, Limit: 256}},
		{"size above max", headerWith(1<<20+1, commandRequest), FrameError{Reason: FrameSizeTooLarge, Value: 1<<20 + 1, Limit: 1 << 20}},
		{"size max u32", headerWith(^uint32(0), commandRequest), FrameError{Reason: FrameSizeTooLarge, Value: ^uint32(0), Limit: 1 << 20}},
		{"reply command", headerWith(256, 8), FrameError{Reason: FrameNotRequest, Value: 8}},
		{"prepare command", headerWith(300, 1), FrameError{Reason: FrameNotRequest, Value: 1}},
		{"zero command", headerWith(256, 0), FrameError{Reason: FrameNotRequest, Value: 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := newTestArena(t)
			fr := NewFramer(a, 1<<20, testStandingBytes)
			stream := append(bytes.Clone(tt.header), testFrame(nil)...)
			frames, err := feedAll(fr, stream, 100)
			var fe *FrameError
			if !errors.As(err, &fe) {
				t.Fatalf("err = %v, want a *FrameError", err)
			}
			if *fe != tt.want {
				t.Fatalf("err = %+v, want %+v", *fe, tt.want)
			}
			if fe.Error() == "" {
				t.Fatal("empty error message")
			}
			if len(frames) != 0 {
				t.Fatalf("got %d frames before the bad header", len(frames))
			}
			fr.Close()
			if err := a.CheckNoLeaks(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestFramerMemoryFollowsReceivedBytes: a header declaring a large frame followed by a
// trickle must not make the framer reserve the declared size up front.
func TestFramerMemoryFollowsReceivedBytes(t *testing.T) {
	a := newTestArena(t)
	fr := NewFramer(a, FrameSizeMaxDefault, testStandingBytes)
	stream := headerWith(1<<20, commandRequest)
	stream = append(stream, make([]byte, 5000)...)
	if frames, err := feedAll(fr, stream, 1000); err != nil || len(frames) != 0 {
		t.Fatalf("frames %d, err %v", len(frames), err)
	}
	if !fr.Partial() {
		t.Fatal("framer not partial inside a frame")
	}
	if got := a.ClassStats(2).AcquireCount; got != 0 {
		t.Fatalf("a 1 MiB buffer was acquired after %d bytes", len(stream))
	}
	fr.Close()
	if err := a.CheckNoLeaks(); err != nil {
		t.Fatal(err)
	}
}

func TestFramerBuffersExhausted(t *testing.T) {
	a, err := arena.New(arena.Config{Classes: []arena.ClassConfig{{BufferSizeBytes: 4 << 10, BufferCount: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	fr := NewFramer(a, FrameSizeMaxDefault, testStandingBytes)
	_, err = feedAll(fr, testFrame(make([]byte, 10_000)), 1<<20)
	if !errors.Is(err, ErrFrameBuffersExhausted) {
		t.Fatalf("err = %v, want ErrFrameBuffersExhausted", err)
	}
	fr.Close()
	if err := a.CheckNoLeaks(); err != nil {
		t.Fatal(err)
	}
}

// TestFramerResumesAfterExhaustion: running out of buffers mid-frame is not final.
// The framer keeps what it had; fed the unconsumed bytes again once a buffer is back,
// it completes the frame intact.
func TestFramerResumesAfterExhaustion(t *testing.T) {
	a := newTestArena(t)
	// Hold both 1 MiB buffers, as frames in flight elsewhere would.
	var held []arena.Buffer
	for range 2 {
		b, err := a.Acquire(1 << 20)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, b)
	}
	fr := NewFramer(a, FrameSizeMaxDefault, testStandingBytes)
	body := make([]byte, 300_000)
	for i := range body {
		body[i] = byte(i * 7)
	}
	stream := testFrame(body)
	consumed, frame, err := fr.Feed(stream)
	for err == nil && frame == nil && consumed < len(stream) {
		var n int
		n, frame, err = fr.Feed(stream[consumed:])
		consumed += n
	}
	if !errors.Is(err, ErrFrameBuffersExhausted) || frame != nil {
		t.Fatalf("with every large buffer held: frame %v, err %v; want ErrFrameBuffersExhausted", frame != nil, err)
	}
	if !fr.Partial() || consumed >= len(stream) {
		t.Fatalf("consumed %d of %d, partial %v: want a partial frame and bytes left over", consumed, len(stream), fr.Partial())
	}
	// Still none: the same answer, nothing consumed, nothing lost.
	if n, frame, err := fr.Feed(stream[consumed:]); n != 0 || frame != nil || !errors.Is(err, ErrFrameBuffersExhausted) {
		t.Fatalf("fed again while exhausted: consumed %d, frame %v, err %v", n, frame != nil, err)
	}
	a.Release(held[0])
	for consumed < len(stream) {
		n, f, err := fr.Feed(stream[consumed:])
		if err != nil {
			t.Fatalf("after a buffer came back: %v", err)
		}
		consumed += n
		if f != nil {
			frame = f
		}
	}
	if !bytes.Equal(frame, stream) {
		t.Fatal("the frame completed after the wait differs from the bytes sent")
	}
	fr.Close()
	a.Release(held[1])
	if err := a.CheckNoLeaks(); err != nil {
		t.Fatal(err)
	}
}

func TestFramerDetach(t *testing.T) {
	a := newTestArena(t)
	fr := NewFramer(a, FrameSizeMaxDefault, testStandingBytes)
	first, second := testFrame([]byte("one")), testFrame(make([]byte, 9000))
	stream := append(bytes.Clone(first), second...)
	var kept []arena.Buffer
	for len(stream) > 0 {
		n, frame, err := fr.Feed(stream)
		if err != nil {
			t.Fatal(err)
		}
		stream = stream[n:]
		if frame != nil {
			kept = append(kept, fr.Detach())
		}
	}
	if len(kept) != 2 {
		t.Fatalf("kept %d frames, want 2", len(kept))
	}
	if !bytes.Equal(kept[0].Full()[:len(first)], first) || !bytes.Equal(kept[1].Full()[:len(second)], second) {
		t.Fatal("detached frames were overwritten")
	}
	// Another frame after the detach must not reuse the detached buffers.
	if frames, err := feedAll(fr, testFrame(nil), 300); err != nil || len(frames) != 1 {
		t.Fatalf("frames %d, err %v", len(frames), err)
	}
	if !bytes.Equal(kept[0].Full()[:len(first)], first) {
		t.Fatal("detached standing buffer was reused")
	}
	for _, b := range kept {
		a.Release(b)
	}
	fr.Close()
	if err := a.CheckNoLeaks(); err != nil {
		t.Fatal(err)
	}
}

func TestFramerSteadyStateDoesNotAllocate(t *testing.T) {
	a := newTestArena(t)
	fr := NewFramer(a, FrameSizeMaxDefault, testStandingBytes)
	stream := bytes.Repeat(testFrame([]byte("0123456789")), 8)
	allocs := testing.AllocsPerRun(100, func() {
		p := stream
		for len(p) > 0 {
			n, _, err := fr.Feed(p)
			if err != nil {
				panic(err)
			}
			p = p[n:]
		}
	})
	if allocs != 0 {
		t.Fatalf("Feed allocates %v times per run", allocs)
	}
}

// referenceFrames is the obviously-correct model the fuzz target checks the framer
// against: parse the whole stream at once.
func referenceFrames(stream []byte, frameSizeMax uint32) (frames [][]byte, errReason FrameErrorReason) {
	for len(stream) >= headerSizeBytes {
		size := binary.LittleEndian.Uint32(stream[sizeFieldOffset:])
		switch {
		case size < headerSizeBytes:
			return frames, FrameSizeTooSmall
		case size > frameSizeMax:
			return frames, FrameSizeTooLarge
		case stream[commandFieldOffset] != commandRequest:
			return frames, FrameNotRequest
		}
		if uint32(len(stream)) < size {
			return frames, 0
		}
		frames = append(frames, stream[:size])
		stream = stream[size:]
	}
	return frames, 0
}

func FuzzFramer(f *testing.F) {
	f.Add(testFrame(nil), uint16(1))
	f.Add(append(testFrame([]byte("abc")), testFrame(nil)...), uint16(3))
	f.Add(headerWith(100, commandRequest), uint16(256))
	f.Add(headerWith(70000, commandRequest), uint16(40))
	f.Add(headerWith(256, 13), uint16(17))
	f.Add(append(testFrame(make([]byte, 5000)), 1, 2, 3), uint16(999))
	f.Fuzz(func(t *testing.T, stream []byte, chunk uint16) {
		const frameSizeMax = 64 << 10
		a := newTestArena(t)
		fr := NewFramer(a, frameSizeMax, testStandingBytes)
		frames, err := feedAll(fr, stream, int(chunk)+1)
		wantFrames, wantReason := referenceFrames(stream, frameSizeMax)
		if len(frames) != len(wantFrames) {
			t.Fatalf("%d frames, model %d", len(frames), len(wantFrames))
		}
		for i := range frames {
			if !bytes.Equal(frames[i], wantFrames[i]) {
				t.Fatalf("frame %d differs from the model", i)
			}
		}
		var fe *FrameError
		switch {
		case wantReason == 0 && err != nil:
			t.Fatalf("err %v, model none", err)
		case wantReason != 0 && (!errors.As(err, &fe) || fe.Reason != wantReason):
			t.Fatalf("err %v, model reason %d", err, wantReason)
		}
		fr.Close()
		if err := a.CheckNoLeaks(); err != nil {
			t.Fatal(err)
		}
	})
}

// BenchmarkFramerPing cuts 64 back-to-back PINGs (16 KiB) per op. Baseline: copying the
// same bytes frame by frame into one buffer, the least any framer that gives each
// frame an aligned buffer of its own must do.
func BenchmarkFramerPing(b *testing.B) {
	stream := bytes.Repeat(testFrame(nil), 64)
	b.Run("framer", func(b *testing.B) {
		a := newTestArena(b)
		fr := NewFramer(a, FrameSizeMaxDefault, testStandingBytes)
		b.SetBytes(int64(len(stream)))
		b.ReportAllocs()
		for b.Loop() {
			p := stream
			for len(p) > 0 {
				n, _, _ := fr.Feed(p)
				p = p[n:]
			}
		}
	})
	b.Run("copy-baseline", func(b *testing.B) {
		dst := make([]byte, headerSizeBytes)
		b.SetBytes(int64(len(stream)))
		b.ReportAllocs()
		for b.Loop() {
			for p := stream; len(p) > 0; p = p[headerSizeBytes:] {
				copy(dst, p[:headerSizeBytes])
			}
		}
	})
}

// TestFramerReportsWhatIsToCome: HeaderAwaited, Size, Awaited and LastSize follow a
// frame from its first header byte to its delivery (by Feed and by Filled), across
// Detach, and back to nothing at Close: what a connection chooses its next recv by.
func TestFramerReportsWhatIsToCome(t *testing.T) {
	a := newTestArena(t)
	fr := NewFramer(a, FrameSizeMaxDefault, testStandingBytes)
	defer fr.Close()
	check := func(step string, headerAwaited, size, awaited, lastSize int) {
		t.Helper()
		if h, s, a, l := fr.HeaderAwaited(), fr.Size(), fr.Awaited(), fr.LastSize(); h != headerAwaited || s != size || a != awaited || l != lastSize {
			t.Fatalf("%s: HeaderAwaited %d, Size %d, Awaited %d, LastSize %d; want %d, %d, %d, %d",
				step, h, s, a, l, headerAwaited, size, awaited, lastSize)
		}
	}
	check("new", headerSizeBytes, 0, 0, 0)
	large := testFrame(make([]byte, 100<<10))
	feed := func(p []byte) []byte {
		t.Helper()
		n, frame, err := fr.Feed(p)
		if err != nil || n != len(p) {
			t.Fatalf("Feed took %d of %d bytes: %v", n, len(p), err)
		}
		return frame
	}
	feed(large[:100])
	check("part of a header", headerSizeBytes-100, 0, 0, 0)
	feed(large[100 : headerSizeBytes+10])
	check("header in", 0, len(large), len(large)-headerSizeBytes-10, 0)
	room := fr.Space()
	n := copy(room, large[headerSizeBytes+10:])
	if fr.Filled(n) != nil {
		t.Fatal("a frame delivered before its body was in")
	}
	for fr.Awaited() > 0 {
		filled := len(large) - fr.Awaited()
		n := copy(fr.Space(), large[filled:])
		if frame := fr.Filled(n); frame != nil && !bytes.Equal(frame, large) {
			t.Fatal("the frame delivered by Filled differs from the one sent")
		}
	}
	check("delivered by Filled", headerSizeBytes, 0, 0, len(large))
	a.Release(fr.Detach())
	check("detached", headerSizeBytes, 0, 0, len(large))
	small := testFrame([]byte("small"))
	if frame := feed(small); !bytes.Equal(frame, small) {
		t.Fatal("the small frame delivered by Feed differs from the one sent")
	}
	check("delivered by Feed", headerSizeBytes, 0, 0, len(small))
	fr.Close()
	check("closed", headerSizeBytes, 0, 0, 0)
}
