package wire

import (
	"math/rand/v2"
	"testing"
)

func TestConsumerOffsetRoundTrip(t *testing.T) {
	checkRoundTrip(t, 20, func(r *rand.Rand) *ConsumerOffset {
		return &ConsumerOffset{PartitionID: r.Uint32(), CurrentOffset: r.Uint64(), StoredOffset: r.Uint64()}
	})
}

// Only 0 (nothing stored) and 20 bytes are valid GetConsumerOffset bodies.
func TestConsumerOffsetLengths(t *testing.T) {
	for n := range 42 {
		var o ConsumerOffset
		err := o.Decode(make([]byte, n))
		if (n == consumerOffsetNumBytes) != (err == nil) {
			t.Fatalf("%d bytes: err = %v", n, err)
		}
	}
}
