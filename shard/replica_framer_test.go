package shard

import (
	"bytes"
	"testing"
	"unsafe"

	"github.com/iggy-shard/iggy-shard/arena"
	"github.com/iggy-shard/iggy-shard/wire"
)

const framerTestCluster = "framer"

func framerTestArena(t testing.TB) *arena.Arena {
	a, err := arena.New(arena.Config{Classes: []arena.ClassConfig{
		{BufferSizeBytes: 4 << 10, BufferCount: 16},
		{BufferSizeBytes: 64 << 10, BufferCount: 8},
		{BufferSizeBytes: 1 << 20, BufferCount: 2},
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return a
}

// framerRun feeds stream to a fresh framer chunkBytes at a time (as recvs would
// deliver it) and returns the frames it delivered (copied) and its error, if any.
func framerRun(t testing.TB, a *arena.Arena, stream []byte, chunkBytes int, handshake bool) ([][]byte, error) {
	f, err := newReplicaFramer(a, wire.ClusterID(framerTestCluster), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if !handshake {
		f.EndHandshake()
	}
	var frames [][]byte
	for len(stream) > 0 {
		target := f.RecvTarget()
		if len(target) == 0 {
			t.Fatal("the framer offers nowhere to receive")
		}
		n := copy(target[:min(len(target), chunkBytes)], stream)
		stream = stream[n:]
		f.Received(n)
		for {
			frame, err := f.Next()
			if err != nil {
				return frames, err
			}
			if frame == nil {
				break
			}
			if uintptr(unsafe.Pointer(unsafe.SliceData(frame)))%wire.HeaderAlignment != 0 {
				t.Fatal("a frame delivered at an unaligned address")
			}
			if size, _ := wire.PeekSize(frame); int(size) != len(frame) {
				t.Fatalf("a frame of %d bytes whose header says %d", len(frame), size)
			}
			if !handshake {
				h, err := wire.DecodeReplicaHeader(frame, 1<<20)
				if err != nil || !wire.ReplicaHeaderSealValid(h) || !wire.ReplicaBodySealValid(h, frame[wire.HeaderSize:]) {
					t.Fatalf("a delivered frame fails validation: %v", err)
				}
			}
			frames = append(frames, bytes.Clone(frame))
		}
	}
	return frames, nil
}

func framerSeedStream() []byte {
	var s []byte
	s = append(s, sealed(commitFrame(framerTestCluster, 1))...)
	s = append(s, sealed(stateChunkFrame(framerTestCluster, 300))...) // leaves the next frame unaligned
	s = append(s, sealed(prepareFrame(framerTestCluster, 64<<10, true))...)
	s = append(s, sealed(stateChunkFrame(framerTestCluster, 200<<10))...) // a frame of its own buffer
	s = append(s, sealed(commitFrame(framerTestCluster, 2))...)
	return s
}

func TestReplicaFramerChunkingDoesNotMatter(t *testing.T) {
	a := framerTestArena(t)
	stream := framerSeedStream()
	whole, err := framerRun(t, a, stream, len(stream), false)
	if err != nil || len(whole) != 5 {
		t.Fatalf("%d frames, err %v", len(whole), err)
	}
	for _, chunk := range []int{1, 7, 255, 256, 4096, 65535} {
		got, err := framerRun(t, a, stream, chunk, false)
		if err != nil || len(got) != len(whole) {
			t.Fatalf("chunk %d: %d frames, err %v", chunk, len(got), err)
		}
		for i := range got {
			if !bytes.Equal(got[i], whole[i]) {
				t.Fatalf("chunk %d: frame %d differs", chunk, i)
			}
		}
	}
	if n := a.InUseCount(); n != 0 {
		t.Fatalf("%d arena buffers still in use", n)
	}
}

func TestReplicaFramerDetachAndRetain(t *testing.T) {
	a := framerTestArena(t)
	f, err := newReplicaFramer(a, wire.ClusterID(framerTestCluster), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	f.EndHandshake()
	big := sealed(stateChunkFrame(framerTestCluster, 100<<10))
	rest := big
	var frame []byte
	for frame == nil {
		target := f.RecvTarget()
		n := copy(target, rest)
		rest = rest[n:]
		f.Received(n)
		if frame, err = f.Next(); err != nil {
			t.Fatal(err)
		}
	}
	if !f.InBig() {
		t.Fatal("a 100 KiB frame was not in a buffer of its own")
	}
	kept := f.Detach()
	if !bytes.Equal(kept.Full()[:len(big)], big) {
		t.Fatal("the detached buffer does not hold the frame")
	}
	f.Close()
	if n := a.InUseCount(); n != 1 {
		t.Fatalf("%d buffers in use after Close, want only the detached one", n)
	}
	a.Release(kept)
}

// FuzzReplicaFramer feeds arbitrary bytes to the replica framer, whole and in chunks:
// it must not panic, every frame it delivers must pass validation, the chunking must
// not change what it delivers or refuses, and it must give back every buffer.
func FuzzReplicaFramer(f *testing.F) {
	// Small seeds: the fuzzer mutates large inputs slowly. Frames over the read
	// buffer's 64 KiB (their own buffer) are TestReplicaFramerChunkingDoesNotMatter's.
	var stream []byte
	stream = append(stream, sealed(commitFrame(framerTestCluster, 1))...)
	stream = append(stream, sealed(stateChunkFrame(framerTestCluster, 300))...)
	stream = append(stream, sealed(prepareFrame(framerTestCluster, 1000, true))...)
	stream = append(stream, sealed(prepareFrame(framerTestCluster, 600, false))...)
	f.Add(stream, uint16(1), false)
	f.Add(stream[:len(stream)/2], uint16(300), false)
	f.Add(append(sealed(commitFrame(framerTestCluster, 1)), commitFrame(framerTestCluster, 9)...), uint16(256), false)
	f.Add(sealed(commitFrame("another", 1)), uint16(100), false)
	hello := make([]byte, 256)
	wire.PutReplicaHello(hello, wire.ClusterID(framerTestCluster), 0, nil)
	f.Add(append(hello, hello[:100]...), uint16(50), true)
	f.Fuzz(func(t *testing.T, stream []byte, chunk uint16, handshake bool) {
		a := framerTestArena(t)
		whole, wholeErr := framerRun(t, a, stream, max(len(stream), 1), handshake)
		chunked, chunkedErr := framerRun(t, a, stream, max(int(chunk), 1), handshake)
		if (wholeErr == nil) != (chunkedErr == nil) || len(whole) != len(chunked) {
			t.Fatalf("whole: %d frames, %v; in chunks of %d: %d frames, %v", len(whole), wholeErr, chunk, len(chunked), chunkedErr)
		}
		for i := range whole {
			if !bytes.Equal(whole[i], chunked[i]) {
				t.Fatalf("frame %d differs with chunks of %d", i, chunk)
			}
		}
		if n := a.InUseCount(); n != 0 {
			t.Fatalf("%d arena buffers still in use", n)
		}
	})
}

func TestReplicaFramerWithoutALargeReadBuffer(t *testing.T) {
	a := framerTestArena(t)
	var held []arena.Buffer
	for {
		b, err := a.Acquire(64 << 10)
		if err != nil {
			break
		}
		held = append(held, b)
	}
	// No 64 KiB buffer: the framer keeps its 4 KiB one, frames above it take
	// buffers of their own (here the 1 MiB class), and all arrive as they were.
	stream := append(append(sealed(stateChunkFrame(framerTestCluster, 300)), sealed(prepareFrame(framerTestCluster, 10<<10, true))...),
		sealed(commitFrame(framerTestCluster, 3))...)
	for _, chunk := range []int{1, 1000, len(stream)} {
		frames, err := framerRun(t, a, stream, chunk, false)
		if err != nil || len(frames) != 3 {
			t.Fatalf("chunk %d: %d frames, err %v", chunk, len(frames), err)
		}
	}
	for _, b := range held {
		a.Release(b)
	}
	if n := a.InUseCount(); n != 0 {
		t.Fatalf("%d arena buffers still in use", n)
	}
}
