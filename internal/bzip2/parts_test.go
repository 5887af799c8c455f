package bzip2

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"testing"
)

// naiveBWT sorts rotations by comparing them whole: quadratic, as a reference.
func naiveBWT(block []byte) []byte {
	n := len(block)
	rotation := func(p int) []byte { return append(append([]byte{}, block[p:]...), block[:p]...) }
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return bytes.Compare(rotation(a), rotation(b)) })
	last := make([]byte, n)
	for row, p := range order {
		last[row] = block[(p+n-1)%n]
	}
	return last
}

// TestBurrowsWheelerMatchesNaive: the prefix-doubling sort gives the same last
// column as sorting whole rotations, and origPtr names a row whose rotation is
// the block (with equal rotations any of them will do).
func TestBurrowsWheelerMatchesNaive(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	blocks := [][]byte{
		[]byte("a"), []byte("ab"), []byte("ba"), []byte("banana"), []byte("abracadabra"),
		[]byte("aaaa"), []byte("abab"), []byte("abcabcabc"), []byte("aabaabaab"), []byte("mississippi"),
	}
	for range 200 {
		n := 1 + rng.IntN(64)
		alphabet := 1 + rng.IntN(4)
		b := make([]byte, n)
		for i := range b {
			b[i] = 'a' + byte(rng.IntN(alphabet))
		}
		if rng.IntN(4) == 0 {
			b = bytes.Repeat(b[:1+rng.IntN(n)], 1+rng.IntN(5))
		}
		blocks = append(blocks, b)
	}
	var sorter rotationSorter
	for _, block := range blocks {
		last := make([]byte, len(block))
		origPtr := burrowsWheeler(&sorter, block, last)
		if want := naiveBWT(block); !bytes.Equal(last, want) {
			t.Fatalf("%q: last column %q, want %q", block, last, want)
		}
		p := int(sorter.order[origPtr])
		if rotated := append(append([]byte{}, block[p:]...), block[:p]...); !bytes.Equal(rotated, block) {
			t.Fatalf("%q: origPtr %d is rotation %d, %q", block, origPtr, p, rotated)
		}
	}
}

func TestZeroRunDigits(t *testing.T) {
	const a, b = symbolRunA, symbolRunB
	for _, tc := range []struct {
		run  int
		want []uint16
	}{
		{1, []uint16{a}},
		{2, []uint16{b}},
		{3, []uint16{a, a}},
		{4, []uint16{b, a}},
		{5, []uint16{a, b}},
		{6, []uint16{b, b}},
		{7, []uint16{a, a, a}},
		{14, []uint16{b, b, b}},
		{15, []uint16{a, a, a, a}},
	} {
		var freq [maxAlphabetSize]int32
		got := appendZeroRun(nil, &freq, tc.run)
		if !slices.Equal(got, tc.want) {
			t.Errorf("run %d: %v, want %v", tc.run, got, tc.want)
		}
		// The value read back: digit k of RUNA is 1<<k, of RUNB 2<<k.
		value := 0
		for k, s := range got {
			value += (int(s) + 1) << k
		}
		if value != tc.run {
			t.Errorf("run %d reads back as %d", tc.run, value)
		}
	}
}

func TestMoveToFront(t *testing.T) {
	var freq [maxAlphabetSize]int32
	// inUse b, c, x: list starts [b c x].
	got := moveToFront(nil, &freq, []byte("bbbcxxcb"), []byte("bcx"))
	// b b b: zeros x3 -> RUNA RUNA; c: position 1 -> 2; x: position 2 -> 3;
	// x: zero -> RUNA; c: position 1 -> 2; b: position 2 -> 3; EOB = 4.
	want := []uint16{symbolRunA, symbolRunA, 2, 3, symbolRunA, 2, 3, 4}
	if !slices.Equal(got, want) {
		t.Fatalf("symbols %v, want %v", got, want)
	}
	if freq[symbolRunA] != 3 || freq[2] != 2 || freq[3] != 2 || freq[4] != 1 {
		t.Fatalf("freq %v", freq[:5])
	}
}

// kraftSum is the sum of 2^(maxCodeBits-l): a complete prefix code, which
// the standard library's reader needs, sums to exactly 2^maxCodeBits.
func kraftSum(lengths []uint8) int {
	sum := 0
	for _, l := range lengths {
		sum += 1 << (maxCodeBits - int(l))
	}
	return sum
}

// TestCodeLengths: codes are complete and within maxCodeBits, even for
// Fibonacci frequencies whose optimal code is as deep as there are symbols.
func TestCodeLengths(t *testing.T) {
	fibonacci := make([]int32, 30)
	fibonacci[0], fibonacci[1] = 1, 1
	for i := 2; i < len(fibonacci); i++ {
		fibonacci[i] = fibonacci[i-1] + fibonacci[i-2]
	}
	rng := rand.New(rand.NewPCG(1, 1))
	random := make([]int32, maxAlphabetSize)
	for i := range random {
		random[i] = int32(rng.IntN(1000))
	}
	cases := map[string][]int32{
		"two symbols":          {5, 0},
		"three unused symbols": {0, 0, 0},
		"fibonacci":            fibonacci,
		"random 258":           random,
		"one dominant":         append([]int32{900000}, make([]int32, 257)...),
	}
	var hb huffmanBuilder
	for name, freq := range cases {
		t.Run(name, func(t *testing.T) {
			lengths := make([]uint8, len(freq))
			hb.codeLengths(lengths, freq)
			for i, l := range lengths {
				if l < 1 || l > maxCodeBits {
					t.Fatalf("symbol %d: length %d", i, l)
				}
			}
			if sum := kraftSum(lengths); sum != 1<<maxCodeBits {
				t.Fatalf("Kraft sum %d, want %d: %v", sum, 1<<maxCodeBits, lengths)
			}
			codes := make([]uint32, len(freq))
			canonicalCodes(codes, lengths)
			for i := range codes {
				for j := range codes {
					if i != j && lengths[i] <= lengths[j] && codes[j]>>(lengths[j]-lengths[i]) == codes[i] {
						t.Fatalf("code of %d is a prefix of code of %d", i, j)
					}
				}
			}
		})
	}
	// The Fibonacci case must go through the limit: unlimited, its code is
	// deeper than maxCodeBits.
	for i, f := range fibonacci {
		hb.weight[i] = int64(f)
	}
	if depth := hb.build(make([]uint8, len(fibonacci)), len(fibonacci)); depth <= maxCodeBits {
		t.Fatalf("unlimited Fibonacci code depth %d, want more than %d", depth, maxCodeBits)
	}
}
