package compat

import (
	"crypto/rand"
	"encoding/binary"

	"github.com/zeebo/xxh3"
)

// sendBody is a SendMessages (101, op 160) body as the Go SDK builds it (apache/iggy
// foreign/go/internal/command): the partitioning is always kind 2 with an explicit
// 0-based id, and the batch header leaves partition_id, base_offset and base_timestamp
// 0 for the server to stamp.
func sendBody(stream, topic []byte, partitionID uint32, originMicros uint64, payloads ...[]byte) []byte {
	partitioning := binary.LittleEndian.AppendUint32([]byte{2, 4}, partitionID)
	return sendBodyPartitioned(stream, topic, partitioning, originMicros, payloads...)
}

// sendBodyPartitioned takes the partitioning bytes [kind][len][value] as given.
func sendBodyPartitioned(stream, topic, partitioning []byte, originMicros uint64, payloads ...[]byte) []byte {
	var metadata []byte
	metadata = append(metadata, stream...)
	metadata = append(metadata, topic...)
	metadata = append(metadata, partitioning...)
	metadata = binary.LittleEndian.AppendUint32(metadata, uint32(len(payloads)))

	body := binary.LittleEndian.AppendUint32(nil, uint32(len(metadata)))
	body = append(body, metadata...)
	return append(body, batch(originMicros, payloads)...)
}

// batch builds the 256-byte batch header and the frames. Message i has
// origin_timestamp originMicros+i, so the batch origin is originMicros and the
// frame's timestamp_delta is i.
func batch(originMicros uint64, payloads [][]byte) []byte {
	return batchWithHeaders(originMicros, payloads, nil)
}

// batchWithHeaders is batch with userHeaders[i] (opaque bytes to the server)
// after payload i.
func batchWithHeaders(originMicros uint64, payloads, userHeaders [][]byte) []byte {
	frames := make([]byte, 0, 64*len(payloads))
	checksums := make([]byte, 0, 8*len(payloads))
	for i, payload := range payloads {
		start := len(frames)
		frames = append(frames, make([]byte, 48)...)
		f := frames[start:]
		rand.Read(f[8:24]) // a random UUID v4, as the SDK mints for an all-zero id
		f[8+6] = f[8+6]&0x0f | 0x40
		f[8+8] = f[8+8]&0x3f | 0x80
		binary.LittleEndian.PutUint32(f[24:], uint32(i)) // offset_delta
		binary.LittleEndian.PutUint32(f[28:], uint32(i)) // timestamp_delta
		var headers []byte
		if i < len(userHeaders) {
			headers = userHeaders[i]
		}
		binary.LittleEndian.PutUint32(f[32:], uint32(len(headers)))
		binary.LittleEndian.PutUint32(f[36:], uint32(len(payload)))
		frames = append(frames, payload...)
		frames = append(frames, headers...)
		sum := xxh3.Hash(frames[start+8:])
		binary.LittleEndian.PutUint64(frames[start:], sum)
		checksums = binary.LittleEndian.AppendUint64(checksums, sum)
	}
	batchLength := uint64(256 + len(frames))
	seal := make([]byte, 0, 44+len(checksums))
	seal = binary.LittleEndian.AppendUint64(seal, 0) // partition_id
	seal = binary.LittleEndian.AppendUint64(seal, 0) // base_offset
	seal = binary.LittleEndian.AppendUint64(seal, 0) // base_timestamp
	seal = binary.LittleEndian.AppendUint64(seal, originMicros)
	seal = binary.LittleEndian.AppendUint64(seal, batchLength)
	seal = binary.LittleEndian.AppendUint32(seal, uint32(len(payloads)))
	seal = append(seal, checksums...)

	header := make([]byte, 256)
	binary.LittleEndian.PutUint64(header[24:], originMicros)
	binary.LittleEndian.PutUint64(header[32:], batchLength)
	binary.LittleEndian.PutUint64(header[40:], xxh3.Hash(seal))
	binary.LittleEndian.PutUint32(header[48:], uint32(len(payloads)))
	return append(header, frames...)
}

// Poll strategies (iggy.apache.org/docs/binary-protocol/encodings, "Polling strategy").
const (
	strategyOffset = 1
	strategyFirst  = 3
	strategyNext   = 5
)

// Consumer kinds.
const (
	consumerSingle = 1
	consumerGroup  = 2
)

// consumer is [kind u8][Identifier].
func consumer(kind uint8, id uint32) []byte { return numericID([]byte{kind}, id) }

// partitionFlag is [flag u8][partition u32]; the SDK sends five zero bytes when it
// has no partition.
func partitionFlag(b []byte, partitionID uint32, set bool) []byte {
	if !set {
		return append(b, 0, 0, 0, 0, 0)
	}
	return binary.LittleEndian.AppendUint32(append(b, 1), partitionID)
}

// pollBody is PollMessages (100): [consumer][stream][topic][flag][partition]
// [strategy kind u8][value u64][count u32][auto_commit u8].
func pollBody(cons, stream, topic []byte, partitionID uint32, hasPartition bool, strategy uint8, value uint64, count uint32, autoCommit bool) []byte {
	b := append(append(append([]byte(nil), cons...), stream...), topic...)
	b = partitionFlag(b, partitionID, hasPartition)
	b = binary.LittleEndian.AppendUint64(append(b, strategy), value)
	b = binary.LittleEndian.AppendUint32(b, count)
	if autoCommit {
		return append(b, 1)
	}
	return append(b, 0)
}

// offsetTarget is [consumer][stream][topic][flag][partition], the common prefix of
// the consumer-offset requests (120, 121, 122).
func offsetTarget(cons, stream, topic []byte, partitionID uint32, hasPartition bool) []byte {
	b := append(append(append([]byte(nil), cons...), stream...), topic...)
	return partitionFlag(b, partitionID, hasPartition)
}

// xxh32 is XXH32 with seed 0, the hash the SDK resolves a messages key with
// (apache/iggy foreign/go). Written out here so the check does not lean on the
// implementation under test.
func xxh32(b []byte) uint32 {
	var (
		p1 uint32 = 2654435761
		p2 uint32 = 2246822519
		p3 uint32 = 3266489917
		p4 uint32 = 668265263
		p5 uint32 = 374761393
	)
	rotl := func(x uint32, r uint) uint32 { return x<<r | x>>(32-r) }
	round := func(acc, lane uint32) uint32 { return rotl(acc+lane*p2, 13) * p1 }
	n := len(b)
	var h uint32
	if n >= 16 {
		v1, v2, v3, v4 := p1+p2, p2, uint32(0), -p1
		for len(b) >= 16 {
			v1 = round(v1, binary.LittleEndian.Uint32(b[0:]))
			v2 = round(v2, binary.LittleEndian.Uint32(b[4:]))
			v3 = round(v3, binary.LittleEndian.Uint32(b[8:]))
			v4 = round(v4, binary.LittleEndian.Uint32(b[12:]))
			b = b[16:]
		}
		h = rotl(v1, 1) + rotl(v2, 7) + rotl(v3, 12) + rotl(v4, 18)
	} else {
		h = p5
	}
	h += uint32(n)
	for len(b) >= 4 {
		h = rotl(h+binary.LittleEndian.Uint32(b)*p3, 17) * p4
		b = b[4:]
	}
	for _, c := range b {
		h = rotl(h+uint32(c)*p5, 11) * p1
	}
	h ^= h >> 15
	h *= p2
	h ^= h >> 13
	h *= p3
	h ^= h >> 16
	return h
}
