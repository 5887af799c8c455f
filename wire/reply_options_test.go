package wire

import (
	"math/rand/v2"
	"testing"
)

func TestOptionDescriptorRoundTrip(t *testing.T) {
	checkRoundTrip(t, 21, func(r *rand.Rand) *OptionDescriptor {
		o := &OptionDescriptor{Key: randName(r), Kind: HeaderKind(r.Uint32()), Default: randBytes(r, 16)}
		if r.IntN(2) == 0 {
			o.Description = randName(r)
		}
		return o
	})
}

// The DescribeOptions topic reply decodes element by element without allocating.
func TestDescribeOptionsIterDoesNotAllocate(t *testing.T) {
	body := AppendTopicOptionsCatalogReply(nil)
	allocs := testing.AllocsPerRun(100, func() {
		it := IterOptionDescriptors(body)
		n := 0
		for it.Next() {
			n++
		}
		if n != int(topicOptionCount) || it.Err() != nil {
			t.Fatalf("%d descriptors, %v", n, it.Err())
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations", allocs)
	}
}
