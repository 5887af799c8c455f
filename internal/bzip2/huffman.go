package bzip2

import "slices"

// maxCodeBits bounds code lengths: the format allows 20, bzip2 writes at most
// 17, and so do we.
const maxCodeBits = 17

// huffmanBuilder computes length-limited Huffman code lengths in fixed memory.
type huffmanBuilder struct {
	weight     [maxAlphabetSize]int64
	sortKeys   [maxAlphabetSize]int64 // weight<<16 | symbol, to sort leaves
	nodeWeight [2 * maxAlphabetSize]int64
	parent     [2 * maxAlphabetSize]int16
	depth      [2 * maxAlphabetSize]int32
}

// codeLengths sets lengths[i] for each of the len(freq) >= 2 symbols to a
// Huffman code length of at most maxCodeBits. Symbols that do not occur get a
// code too (as if they occurred once): the format gives every symbol a length.
//
// When the optimal code is too deep, the weights are halved (keeping them
// above zero) and the code rebuilt, as bzip2 does: flattening the weights
// makes the tree shallower, and weights of all ones give a balanced tree.
func (hb *huffmanBuilder) codeLengths(lengths []uint8, freq []int32) {
	n := len(freq)
	for i, f := range freq {
		hb.weight[i] = max(int64(f), 1)
	}
	for hb.build(lengths, n) > maxCodeBits {
		for i := range n {
			hb.weight[i] = 1 + hb.weight[i]/2
		}
	}
}

// build sets lengths from hb.weight[:n] by the two-queue method and returns the
// longest length. Nodes 0..n-1 are the leaves by ascending weight; internal
// nodes n..2n-2 are made in ascending weight order, so the lightest unmerged
// node is always at the head of one of the two queues.
func (hb *huffmanBuilder) build(lengths []uint8, n int) int {
	keys := hb.sortKeys[:n]
	for i := range keys {
		keys[i] = hb.weight[i]<<16 | int64(i)
	}
	slices.Sort(keys)
	for k, key := range keys {
		hb.nodeWeight[k] = key >> 16
	}
	nextLeaf, nextInternal := 0, n
	lightest := func(made int) int {
		if nextLeaf < n && (nextInternal >= made || hb.nodeWeight[nextLeaf] <= hb.nodeWeight[nextInternal]) {
			nextLeaf++
			return nextLeaf - 1
		}
		nextInternal++
		return nextInternal - 1
	}
	for made := n; made < 2*n-1; made++ {
		a := lightest(made)
		b := lightest(made)
		hb.nodeWeight[made] = hb.nodeWeight[a] + hb.nodeWeight[b]
		hb.parent[a], hb.parent[b] = int16(made), int16(made)
	}
	// A parent is made after its children, so walking down from the root
	// sees every parent's depth before its children's.
	root := 2*n - 2
	hb.depth[root] = 0
	longest := 0
	for node := root - 1; node >= 0; node-- {
		d := hb.depth[hb.parent[node]] + 1
		hb.depth[node] = d
		if node < n {
			lengths[keys[node]&0xffff] = uint8(min(d, 255))
			longest = max(longest, int(d))
		}
	}
	return longest
}

// canonicalCodes assigns codes as bzip2 and its readers do: by ascending length,
// and within a length by ascending symbol, each code one more than the last.
func canonicalCodes(codes []uint32, lengths []uint8) {
	code := uint32(0)
	for length := uint8(1); length <= maxCodeBits; length++ {
		for symbol, l := range lengths {
			if l == length {
				codes[symbol] = code
				code++
			}
		}
		code <<= 1
	}
}
