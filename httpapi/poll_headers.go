package httpapi

import (
	"slices"

	"github.com/iggy-shard/iggy-shard/wire"
)

// A polled message's user headers, written straight from the block as
// renderUserHeaders and encoding/json wrote them (TestPolledHeadersMatchEncodingJSON
// holds them equal): [] for none; the entries sorted by the base64 of their keys,
// stable, when the block parses and every kind has a name; else the whole block as
// one base64 string, so that nothing is renamed on its way through.

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
	sorted := true
	var prevKey []byte
	it := wire.NewTLVIterator(block)
	for {
		at := it.Offset()
		e, ok := it.Next()
		if !ok {
			break
		}
		if !e.KeyKind.Known() || !e.ValueKind.Known() {
			return appendBase64String(b, block), refs
		}
		if prevKey != nil && compareBase64(prevKey, e.Key) > 0 {
			sorted = false
		}
		prevKey = e.Key
		refs = append(refs, uint32(at))
	}
	if it.Err() != nil {
		return appendBase64String(b, block), refs
	}
	if !sorted {
		slices.SortStableFunc(refs, func(x, y uint32) int {
			return compareBase64(headerEntryAt(block, x).Key, headerEntryAt(block, y).Key)
		})
	}
	b = append(b, '[')
	for i, at := range refs {
		if i > 0 {
			b = append(b, ',')
		}
		e := headerEntryAt(block, at)
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

// compareBase64 orders a and b as their standard base64 texts compare, without
// writing them: group by group of three bytes, each group's four characters
// (padded) compared as one big-endian number.
func compareBase64(a, b []byte) int {
	for {
		switch {
		case len(a) == 0 && len(b) == 0:
			return 0
		case len(a) == 0:
			return -1
		case len(b) == 0:
			return 1
		}
		ga, gb := base64Group(a), base64Group(b)
		if ga != gb {
			if ga < gb {
				return -1
			}
			return 1
		}
		a, b = a[min(3, len(a)):], b[min(3, len(b)):]
	}
}

// base64Group is the four characters of src's first group of (up to) three bytes,
// the first in the high byte.
func base64Group(src []byte) uint32 {
	var v uint32
	switch len(src) {
	case 1:
		v = uint32(src[0]) << 16
		return uint32(base64Alphabet[v>>18])<<24 | uint32(base64Alphabet[v>>12&0x3f])<<16 | '='<<8 | '='
	case 2:
		v = uint32(src[0])<<16 | uint32(src[1])<<8
		return uint32(base64Alphabet[v>>18])<<24 | uint32(base64Alphabet[v>>12&0x3f])<<16 | uint32(base64Alphabet[v>>6&0x3f])<<8 | '='
	}
	v = uint32(src[0])<<16 | uint32(src[1])<<8 | uint32(src[2])
	return uint32(base64Alphabet[v>>18])<<24 | uint32(base64Alphabet[v>>12&0x3f])<<16 | uint32(base64Alphabet[v>>6&0x3f])<<8 |
		uint32(base64Alphabet[v&0x3f])
}
