package shard

import (
	"testing"

	"github.com/iggy-shard/iggy-shard/arena"
)

// sendMessagesFrameBytes is the SEND_MESSAGES frame of a 1000 x 1000 B batch as
// cmd/iggy-bench sends it (1,048,538 bytes of batch on the wire, plus the header):
// 218 bytes over 1 MiB.
const sendMessagesFrameBytes = 1_048_538 + headerSizeBytes

// arenaConfigOneMiB is ArenaConfigDefault before its large-batch class grew from
// 1 MiB to 1.25 MiB: the baseline of BenchmarkFramerBatch.
func arenaConfigOneMiB() arena.Config {
	cfg := ArenaConfigDefault()
	cfg.Classes = append([]arena.ClassConfig(nil), cfg.Classes...)
	for i := range cfg.Classes {
		if c := &cfg.Classes[i]; c.BufferSizeBytes == batchBufferBytes {
			c.BufferSizeBytes = 1 << 20
		}
	}
	return cfg
}

// BenchmarkFramerBatch assembles one 1000 x 1000 B batch frame per op from 8 KiB
// receives, as a connection does, in the default arena (the receive class lent to the
// ring) and in the same arena with the old 1 MiB class. A frame grows by doubling
// (4 KiB, 64 KiB, then a large buffer), copying what it holds at each step: with
// 1 MiB buffers the last step copies a whole MiB into a 16 MiB buffer.
func BenchmarkFramerBatch(b *testing.B) {
	frame := testFrame(make([]byte, sendMessagesFrameBytes-headerSizeBytes))
	for _, bc := range []struct {
		name string
		cfg  arena.Config
	}{{"1MiB-class", arenaConfigOneMiB()}, {"1.25MiB-class", ArenaConfigDefault()}} {
		b.Run(bc.name, func(b *testing.B) {
			a, err := arena.New(bc.cfg)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { a.Close() })
			recv, err := recvClass(bc.cfg)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := a.LendClass(recv); err != nil {
				b.Fatal(err)
			}
			fr := NewFramer(a, FrameSizeMaxDefault, standingFrameBytes)
			b.SetBytes(int64(len(frame)))
			b.ReportAllocs()
			for b.Loop() {
				for p := frame; len(p) > 0; {
					n, got, err := fr.Feed(p[:min(len(p), recvBufferBytes)])
					if err != nil {
						b.Fatal(err)
					}
					p = p[n:]
					if got != nil && len(p) != 0 {
						b.Fatal("frame delivered early")
					}
				}
			}
		})
	}
}
