package segment

import (
	"encoding/binary"
	"fmt"
	"sort"
)

// indexEntrySize is the size of one .index entry: offset u64, timestamp u64, position
// u64, little-endian, no header (iggy.apache.org/docs/server/storage-engine, "Indexes";
// apache/iggy core/server_common/src/segment_storage/index_writer.rs). Part of the disk
// format.
const indexEntrySize = 24

// index is a segment's index as it is on disk: 24-byte entries back to back, one per
// stored batch, in offset order. Keeping the encoded bytes (rather than a []struct)
// makes writing the index a write of a sub-slice, and appending an entry a 24-byte
// append into a buffer that grows by doubling, so appends do not allocate per batch.
type index []byte

func (x index) len() int { return len(x) / indexEntrySize }

func (x index) offset(i int) uint64 {
	return binary.LittleEndian.Uint64(x[i*indexEntrySize:])
}

func (x index) timestamp(i int) uint64 {
	return binary.LittleEndian.Uint64(x[i*indexEntrySize+8:])
}

func (x index) position(i int) int64 {
	return int64(binary.LittleEndian.Uint64(x[i*indexEntrySize+16:]))
}

func (x index) append(offset, timestampMicros uint64, position int64) index {
	x = binary.LittleEndian.AppendUint64(x, offset)
	x = binary.LittleEndian.AppendUint64(x, timestampMicros)
	return binary.LittleEndian.AppendUint64(x, uint64(position))
}

// floor returns the last entry whose offset is <= offset, or -1.
func (x index) floor(offset uint64) int {
	return sort.Search(x.len(), func(i int) bool { return x.offset(i) > offset }) - 1
}

// firstAtOrAfterTimestamp returns the first entry whose timestamp is >= ts, or len.
// Timestamps in a log never decrease (Append refuses that), so this is a binary search.
func (x index) firstAtOrAfterTimestamp(ts uint64) int {
	return sort.Search(x.len(), func(i int) bool { return x.timestamp(i) >= ts })
}

// checkIndex validates the entries of an index read back from disk against the log
// they describe (logSizeBytes long, first offset baseOffset): offsets strictly
// increasing from baseOffset, timestamps non-decreasing, positions strictly
// increasing from 0 and inside the log, each batch at least a header long. It returns
// how many leading entries pass; a trailing partial entry is ignored.
func checkIndex(x index, baseOffset uint64, logSizeBytes int64) int {
	n := x.len()
	for i := 0; i < n; i++ {
		off, pos := x.offset(i), x.position(i)
		if i == 0 {
			if off != baseOffset || pos != 0 {
				return 0
			}
			continue
		}
		if off <= x.offset(i-1) || x.timestamp(i) < x.timestamp(i-1) || pos < x.position(i-1)+minBatchSizeBytes || pos > logSizeBytes {
			return i
		}
	}
	if n > 0 && x.position(n-1)+minBatchSizeBytes > logSizeBytes {
		return n - 1
	}
	return n
}

// minBatchSizeBytes is the smallest stored batch: a header and one empty frame.
const minBatchSizeBytes = 256 + 48

func segmentLogName(baseOffset uint64) string   { return fmt.Sprintf("%020d.log", baseOffset) }
func segmentIndexName(baseOffset uint64) string { return fmt.Sprintf("%020d.index", baseOffset) }

// parseSegmentName returns the base offset of a file named NNNNNNNNNNNNNNNNNNNN.ext.
func parseSegmentName(name, ext string) (uint64, bool) {
	if len(name) != 20+len(ext) || name[20:] != ext {
		return 0, false
	}
	var v uint64
	for _, c := range []byte(name[:20]) {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if v > (1<<64-1-d)/10 {
			return 0, false
		}
		v = v*10 + d
	}
	return v, true
}
