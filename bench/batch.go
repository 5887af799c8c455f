package bench

import (
	"encoding/binary"
	"fmt"

	"github.com/iggy-shard/iggy-shard/wire"
)

const (
	batchHeaderSizeBytes = wire.BatchHeaderSize
	frameHeaderSizeBytes = wire.FrameHeaderSize

	// Batch header fields the producer rewrites before each send (wire/batch.go
	// draws the layout; these offsets are part of the wire format and never change).
	batchOriginTimestampAt = 24
	batchChecksumAt        = 40
	batchMessageCountAt    = 48

	// idMagic marks the high half of every message id the tool sends, so a consumer
	// knows the message is ours; the low half is the message's index in its batch.
	idMagic = uint64(0x6967_6779_6265_6e63) // "ignybenc"
)

// templateBatch builds the batch a producer sends again and again: n messages of
// size bytes, message i with id {Hi: idMagic | producer, Lo: i} and a payload whose
// bytes depend on the producer and i, so that a misplaced or corrupted payload does
// not pass for another. It is built once per actor; each send only restamps the
// origin timestamp (restamp), so the send loop allocates nothing and hashes only
// the batch header and frame checksums, not the payloads.
func templateBatch(producer, n, size int) ([]byte, error) {
	var bb wire.BatchBuilder
	bb.Reset(make([]byte, 0, batchLength(n, size)))
	payload := make([]byte, size)
	for i := range n {
		for j := range payload {
			payload[j] = byte(producer*31 + i*7 + j)
		}
		id := wire.Uint128{Hi: idMagic ^ uint64(producer), Lo: uint64(i)}
		if err := bb.Append(id, 1, payload, nil); err != nil {
			return nil, fmt.Errorf("bench: building the batch: %w", err)
		}
	}
	return bb.Finish()
}

// restamp sets the batch's origin timestamp (the producer time every message
// carries, which consumers use for end-to-end latency) and recomputes the batch
// checksum, which covers the header fields and the frame checksums only.
func restamp(batch []byte, nowMicros uint64) {
	binary.LittleEndian.PutUint64(batch[batchOriginTimestampAt:], nowMicros)
	sum, ok := wire.ComputeBatchChecksum(batch[:batchHeaderSizeBytes], batch[batchHeaderSizeBytes:])
	if !ok {
		panic("bench: restamp of a batch that templateBatch did not build")
	}
	binary.LittleEndian.PutUint64(batch[batchChecksumAt:], sum)
}
