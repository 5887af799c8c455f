package httpapi

import (
	"slices"

	"github.com/iggy-shard/iggy-shard/jsonview"
	"github.com/iggy-shard/iggy-shard/wire"
)

// A polled message's user headers, written straight from the block as
// jsonview.UserHeaders and encoding/json write them (TestPolledHeadersMatchEncodingJSON
// holds them equal): [] for none; the entries ordered by key (kind code, then
// bytes), one per key, when the block parses, every kind has a name and every
// fixed-size field its size; else the whole block as one base64 string.

// headerRefsInline is how many entries a message may have before the order of its
// entries needs more than the caller's stack array.
const headerRefsInline = 32

// appendUserHeaders appends block's JSON to b. refs is scratch for the entries'
// order (the grown scratch is returned for the next message): no allocation for a
// block of up to cap(refs) entries.
func appendUserHeaders(b, block []byte, refs []uint32) ([]byte, []uint32) {
	if len(block) == 0 {
		return append(b, "[]"...), refs
	}
	refs = refs[:0]
	ordered := true // strictly: no key twice
	var prev wire.TLVEntry
	it := wire.NewTLVIterator(block)
	for {
		at := it.Offset()
		e, ok := it.Next()
		if !ok {
			break
		}
		if !jsonview.HeaderFieldShown(e.KeyKind, e.Key) || !jsonview.HeaderFieldShown(e.ValueKind, e.Value) {
			return appendBase64String(b, block), refs
		}
		if len(refs) > 0 && jsonview.CompareHeaderKeys(prev, e) >= 0 {
			ordered = false
		}
		prev = e
		refs = append(refs, uint32(at))
	}
	if it.Err() != nil {
		return appendBase64String(b, block), refs
	}
	if !ordered {
		slices.SortStableFunc(refs, func(x, y uint32) int {
			return jsonview.CompareHeaderKeys(headerEntryAt(block, x), headerEntryAt(block, y))
		})
	}
	b = append(b, '[')
	first := true
	for i, at := range refs {
		e := headerEntryAt(block, at)
		// A key given twice is shown once, with its last value.
		if i+1 < len(refs) && jsonview.CompareHeaderKeys(e, headerEntryAt(block, refs[i+1])) == 0 {
			continue
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		b = append(b, `{"key":`...)
		b = appendHeaderField(b, e.KeyKind, e.Key)
		b = append(b, `,"value":`...)
		b = appendHeaderField(b, e.ValueKind, e.Value)
		b = append(b, '}')
	}
	return append(b, ']'), refs
}

// headerEntryAt is the entry at byte offset at of a block the walk accepted.
func headerEntryAt(block []byte, at uint32) wire.TLVEntry {
	it := wire.NewTLVIterator(block[at:])
	e, _ := it.Next()
	return e
}

func appendHeaderField(b []byte, kind wire.HeaderKind, v []byte) []byte {
	b = append(b, `{"kind":"`...)
	b = append(b, kind.String()...)
	b = append(b, `","value":"`...)
	b = appendBase64(b, v)
	return append(b, `"}`...)
}

// appendBase64String appends v's base64 as a JSON string: the alphabet needs no
// escape.
func appendBase64String(b, v []byte) []byte {
	b = append(b, '"')
	b = appendBase64(b, v)
	return append(b, '"')
}
