package bzip2

// rotationSorter sorts the cyclic rotations of a block by prefix doubling
// (Manber and Myers, on rotations instead of suffixes): after the round for
// length h, rotations are ordered and ranked by their first 2h bytes, and the
// order by 2h bytes comes from two stable counting sorts on the ranks by h
// bytes. The first round sorts by 4 bytes at once (radix sort), then at most
// ceil(log2 n)-2 rounds of O(n) each follow, so a block of one repeated
// pattern costs O(n log n), where a comparison sort of rotations would be
// quadratic. Rounds stop early once every rank is distinct, which for text
// comes after a few rounds.
//
// Rotations that are equal as strings (a block that is a pattern repeated a
// whole number of times) keep equal ranks; their order does not matter,
// swapping two equal rows leaves the sorted matrix, and so the transform,
// unchanged.
//
// The slices are kept between blocks so that a Writer allocates per block
// size, not per block.
type rotationSorter struct {
	order     []int32 // rotation start positions in sorted order
	byRank2nd []int32 // positions ordered by the rank of their second half
	rank      []int32 // rank of the rotation starting at each position
	nextRank  []int32
	count     []int32 // counting sort buckets, one per rank
}

// sort returns the start positions of block's rotations in sorted order. The
// result aliases the sorter's memory until the next call.
func (s *rotationSorter) sort(block []byte) []int32 {
	n := len(block)
	s.order = resize(s.order, n)
	s.byRank2nd = resize(s.byRank2nd, n)
	s.rank = resize(s.rank, n)
	s.nextRank = resize(s.nextRank, n)
	s.count = resize(s.count, max(n, 256))
	ranks := s.sortByFirst4Bytes(block)
	order := s.order
	for h := 4; h < n && ranks < n; h *= 2 {
		// The rotation at p-h has p as its second half, so walking order
		// (sorted by h bytes) and stepping back h lists positions sorted by
		// their second half.
		for k, p := range order {
			q := int(p) - h
			if q < 0 {
				q += n
			}
			s.byRank2nd[k] = int32(q)
		}
		// A stable counting sort by the first half's rank then orders by both.
		rank := s.rank
		count := s.count[:ranks]
		clear(count)
		for _, p := range s.byRank2nd {
			count[rank[p]]++
		}
		prefixSumExclusive(count)
		for _, p := range s.byRank2nd {
			r := rank[p]
			order[count[r]] = p
			count[r]++
		}
		ranks = s.rerank(h)
	}
	return order
}

// sortByFirst4Bytes is the first round, for h = 4 at once: it orders and ranks
// rotations by their first four bytes (taken cyclically, so any n works), with
// a least-significant-digit radix sort, one stable counting sort per digit,
// and returns the number of distinct ranks. Digits are 16 bits in large
// blocks (two passes) and bytes in small ones, whose memory stays small.
func (s *rotationSorter) sortByFirst4Bytes(block []byte) int {
	n := len(block)
	key := s.nextRank // free until the first rerank
	for i := range block {
		k := uint32(0)
		for j := i; j < i+4; j++ {
			k = k<<8 | uint32(block[j%n])
		}
		key[i] = int32(k)
	}
	digitBits := uint(8)
	if n >= 1<<16 {
		digitBits = 16
	}
	digitMask := uint32(1)<<digitBits - 1
	count := s.count[:1<<digitBits]
	src, dst := s.order, s.byRank2nd
	for i := range src {
		src[i] = int32(i)
	}
	// An even number of passes (4 or 2) leaves the result in s.order.
	for shift := uint(0); shift < 32; shift += digitBits {
		clear(count)
		for _, p := range src {
			count[uint32(key[p])>>shift&digitMask]++
		}
		prefixSumExclusive(count)
		for _, p := range src {
			d := uint32(key[p]) >> shift & digitMask
			dst[count[d]] = p
			count[d]++
		}
		src, dst = dst, src
	}

	r := int32(-1)
	for k, p := range s.order {
		if k == 0 || key[p] != key[s.order[k-1]] {
			r++
		}
		s.rank[p] = r
	}
	return int(r) + 1
}

// rerank gives each rotation the rank of its first 2h bytes, knowing order is
// sorted by them and rank holds the ranks by h bytes, and returns how many
// distinct ranks there are.
func (s *rotationSorter) rerank(h int) int {
	n := len(s.order)
	rank, next := s.rank, s.nextRank
	second := func(p int32) int32 {
		q := int(p) + h
		if q >= n {
			q -= n
		}
		return rank[q]
	}
	r := int32(0)
	prev := s.order[0]
	next[prev] = 0
	for _, p := range s.order[1:] {
		if rank[p] != rank[prev] || second(p) != second(prev) {
			r++
		}
		next[p] = r
		prev = p
	}
	s.rank, s.nextRank = next, rank
	return int(r) + 1
}

// prefixSumExclusive turns counts into the first index of each bucket.
func prefixSumExclusive(count []int32) {
	sum := int32(0)
	for i, c := range count {
		count[i] = sum
		sum += c
	}
}

// resize returns s with length n, reusing its memory when large enough. The
// contents are not preserved.
func resize[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// burrowsWheeler writes into last the last column of the sorted rotations of
// block and returns origPtr, the row of the rotation starting at 0.
func burrowsWheeler(sorter *rotationSorter, block, last []byte) (origPtr int) {
	n := len(block)
	for row, p := range sorter.sort(block) {
		if p == 0 {
			origPtr = row
			last[row] = block[n-1]
		} else {
			last[row] = block[p-1]
		}
	}
	return origPtr
}
