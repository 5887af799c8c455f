package bzip2

import (
	"bytes"
	"testing"
)

// FuzzRoundTrip: any input, at any level, cut into two Writes anywhere, reads
// back whole through compress/bzip2, and the cut does not change the stream.
func FuzzRoundTrip(f *testing.F) {
	f.Add([]byte{}, uint8(9), uint16(0))
	f.Add([]byte("x"), uint8(1), uint16(1))
	f.Add([]byte("banana banana banana"), uint8(5), uint16(7))
	f.Add(repeatByte('a', 1000), uint8(1), uint16(500))
	f.Add(repeatByte('a', 101), uint8(2), uint16(4))
	f.Add(bytes.Repeat([]byte("ab"), 3000), uint8(9), uint16(3))
	f.Add(allByteValues(), uint8(3), uint16(128))
	f.Add(runsOfEveryLength()[:4000], uint8(1), uint16(2000))
	f.Add(textLike(5000), uint8(9), uint16(1234))
	f.Fuzz(func(t *testing.T, data []byte, levelSeed uint8, cut uint16) {
		level := 1 + int(levelSeed%9)
		whole := checkRoundTrip(t, data, level)
		split := min(int(cut), len(data))
		var buf bytes.Buffer
		z := NewWriter(&buf, level)
		if _, err := z.Write(data[:split]); err != nil {
			t.Fatal(err)
		}
		if _, err := z.Write(data[split:]); err != nil {
			t.Fatal(err)
		}
		if err := z.Close(); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(buf.Bytes(), whole) {
			t.Fatalf("cut at %d changes the stream", split)
		}
	})
}

// FuzzBurrowsWheeler: the prefix-doubling sort agrees with sorting whole
// rotations, on blocks small enough for the quadratic reference.
func FuzzBurrowsWheeler(f *testing.F) {
	f.Add([]byte("banana"))
	f.Add([]byte("abababab"))
	f.Add(repeatByte('a', 17))
	f.Add([]byte("abcabcabd"))
	f.Add(allByteValues())
	f.Fuzz(func(t *testing.T, block []byte) {
		if len(block) == 0 || len(block) > 512 {
			return
		}
		var sorter rotationSorter
		last := make([]byte, len(block))
		origPtr := burrowsWheeler(&sorter, block, last)
		if want := naiveBWT(block); !bytes.Equal(last, want) {
			t.Fatalf("%q: last column %q, want %q", block, last, want)
		}
		p := int(sorter.order[origPtr])
		if !bytes.Equal(append(append([]byte{}, block[p:]...), block[:p]...), block) {
			t.Fatalf("%q: origPtr %d is rotation %d, not the block", block, origPtr, p)
		}
	})
}
