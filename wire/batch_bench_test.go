package wire

import (
	"testing"

	"github.com/zeebo/xxh3"
)

// The benchmark batch: 1000 messages of 1000 bytes each, frame header included, so
// 1 MB of frames behind the 256-byte header. BenchmarkXXH3Baseline hashes the same
// megabyte in one call: it is the floor ValidateBatch is measured against (a
// validation must hash every byte at least once).
const (
	benchMessageCount     = 1000
	benchFrameSizeBytes   = 1000
	benchPayloadSizeBytes = benchFrameSizeBytes - FrameHeaderSize
)

func benchBatch(b *testing.B) []byte {
	b.Helper()
	payload := make([]byte, benchPayloadSizeBytes)
	for i := range payload {
		payload[i] = byte(i * 7)
	}
	var bb BatchBuilder
	bb.Reset(make([]byte, 0, BatchHeaderSize+benchMessageCount*benchFrameSizeBytes))
	for i := range benchMessageCount {
		if err := bb.Append(Uint128{Lo: uint64(i)}, 1_700_000_000_000_000+uint64(i), payload, nil); err != nil {
			b.Fatal(err)
		}
	}
	batch, err := bb.Finish()
	if err != nil {
		b.Fatal(err)
	}
	if err := ValidateBatch(batch); err != nil {
		b.Fatal(err)
	}
	return batch
}

func BenchmarkXXH3Baseline(b *testing.B) {
	batch := benchBatch(b)
	blob := batch[BatchHeaderSize:]
	b.SetBytes(int64(len(blob)))
	b.ReportAllocs()
	var sink uint64
	for b.Loop() {
		sink += xxh3.Hash(blob)
	}
	_ = sink
}

// BenchmarkXXH3PerFrameBaseline hashes what the spec makes a validator hash: each
// frame's bytes 8..1000 in its own XXH3 call. That is the true floor of ValidateBatch;
// the gap to BenchmarkXXH3Baseline is the hash library's per-call cost and its slower
// path for inputs under one 1 KB block.
func BenchmarkXXH3PerFrameBaseline(b *testing.B) {
	batch := benchBatch(b)
	blob := batch[BatchHeaderSize:]
	b.SetBytes(int64(len(blob)))
	b.ReportAllocs()
	var sink uint64
	for b.Loop() {
		for at := 0; at < len(blob); at += benchFrameSizeBytes {
			sink += xxh3.Hash(blob[at+frameIDAt : at+benchFrameSizeBytes])
		}
	}
	_ = sink
}

func BenchmarkValidateBatch(b *testing.B) {
	batch := benchBatch(b)
	b.SetBytes(int64(len(batch)))
	b.ReportAllocs()
	for b.Loop() {
		if err := ValidateBatch(batch); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCheckStoredBatch(b *testing.B) {
	batch := benchBatch(b)
	StampBatch(batch, 1, 1000, 1_700_000_000_500_000)
	b.SetBytes(int64(len(batch)))
	b.ReportAllocs()
	for b.Loop() {
		if err := CheckStoredBatch(batch); err != nil {
			b.Fatal(err)
		}
	}
}

// StampBatch reads only the 1000 frame headers, not the payloads.
func BenchmarkStampBatch(b *testing.B) {
	batch := benchBatch(b)
	b.ReportAllocs()
	var offset uint64
	for b.Loop() {
		StampBatch(batch, 1, offset, 1_700_000_000_500_000+offset)
		offset += benchMessageCount
	}
}

func BenchmarkSliceBatch(b *testing.B) {
	batch := benchBatch(b)
	StampBatch(batch, 1, 0, 1_700_000_000_500_000)
	var hdr [BatchHeaderSize]byte
	for _, c := range []struct {
		name        string
		fromOffset  uint64
		maxMessages uint32
	}{
		{"whole", 0, benchMessageCount},
		{"first100", 0, 100},
		{"middle100", 450, 100},
		{"last100", benchMessageCount - 100, 100},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_, count, err := SliceBatch(&hdr, batch, c.fromOffset, c.maxMessages)
				if err != nil || count != min(c.maxMessages, benchMessageCount) {
					b.Fatal(count, err)
				}
			}
		})
	}
}

func BenchmarkFrameIteration(b *testing.B) {
	batch := benchBatch(b)
	b.SetBytes(int64(len(batch)))
	b.ReportAllocs()
	var payloadBytes int
	for b.Loop() {
		for it := Frames(batch); it.Next(); {
			f := it.Frame()
			payloadBytes += len(f.Payload()) + int(f.OffsetDelta())
		}
	}
	_ = payloadBytes
}

func BenchmarkBatchBuilder(b *testing.B) {
	payload := make([]byte, benchPayloadSizeBytes)
	buf := make([]byte, 0, BatchHeaderSize+benchMessageCount*benchFrameSizeBytes)
	var bb BatchBuilder
	b.SetBytes(int64(cap(buf)))
	b.ReportAllocs()
	for b.Loop() {
		bb.Reset(buf[:0])
		for i := range benchMessageCount {
			_ = bb.Append(Uint128{Lo: uint64(i)}, uint64(i), payload, nil)
		}
		if _, err := bb.Finish(); err != nil {
			b.Fatal(err)
		}
	}
}

// benchPollBody is a PolledMessages body carrying the benchmark batch whole.
func benchPollBody(b *testing.B) []byte {
	batch := benchBatch(b)
	StampBatch(batch, 1, 0, 1_700_000_000_500_000)
	reply := PolledMessages{PartitionID: 1, CurrentOffset: benchMessageCount - 1, MessagesCount: benchMessageCount, Records: batch}
	return reply.Append(nil)
}

// BenchmarkDecodePolledMessages is the client's structural check of a 1 MB poll reply
// (no checksums; the SDKs verify none).
func BenchmarkDecodePolledMessages(b *testing.B) {
	body := benchPollBody(b)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	var p PolledMessages
	for b.Loop() {
		if err := p.Decode(body); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkPolledMessagesIterate(b *testing.B) {
	body := benchPollBody(b)
	var p PolledMessages
	if err := p.Decode(body); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	var sink uint64
	for b.Loop() {
		for it := p.Messages(); it.Next(); {
			m := it.Message()
			sink += m.Offset + uint64(len(m.Payload()))
		}
	}
	_ = sink
}

// BenchmarkDecodeSendMessages decodes the metadata and the outline of a 1 MB
// SendMessages body: the routing work before ValidateBatch.
func BenchmarkDecodeSendMessages(b *testing.B) {
	batch := benchBatch(b)
	req := SendMessages{StreamID: NumericIdentifier(1), TopicID: NumericIdentifier(2),
		Partitioning: Partitioning{Kind: PartitioningPartitionID, PartitionID: 0}, MessagesCount: benchMessageCount, Batch: batch}
	body, err := req.Append(nil)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	var r SendMessages
	for b.Loop() {
		if err := r.Decode(body); err != nil {
			b.Fatal(err)
		}
	}
}
