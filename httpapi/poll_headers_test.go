package httpapi

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"testing"

	"github.com/iggy-shard/iggy-shard/jsonview"
	"github.com/iggy-shard/iggy-shard/wire"
)

// headerBlock is a user headers block of the given pairs, built with AppendTLV.
func headerBlock(t testing.TB, pairs ...wire.TLVEntry) []byte {
	t.Helper()
	var block []byte
	for _, p := range pairs {
		var err error
		if block, err = wire.AppendTLV(block, p.KeyKind, p.Key, p.ValueKind, p.Value); err != nil {
			t.Fatalf("%v: %v", p, err)
		}
	}
	return block
}

// headerBlockCases are the blocks a polled message may carry: every kind as key and
// as value, the sizes at their bounds, orders the sort must fix (and keep, for equal
// keys), and the blocks shown raw.
func headerBlockCases(t testing.TB) map[string][]byte {
	t.Helper()
	fixed := func(k wire.HeaderKind) []byte {
		n := k.FixedSizeBytes()
		if n == 0 {
			n = 5
		}
		return bytes.Repeat([]byte{0x80 | byte(k)}, n)
	}
	var everyKind, everyKeyKind []wire.TLVEntry
	for k := wire.HeaderRaw; k <= wire.HeaderFloat64; k++ {
		everyKind = append(everyKind, wire.TLVEntry{KeyKind: wire.HeaderString, Key: []byte("kind_" + k.String()), ValueKind: k, Value: fixed(k)})
		everyKeyKind = append(everyKeyKind, wire.TLVEntry{KeyKind: k, Key: fixed(k), ValueKind: wire.HeaderString, Value: []byte(k.String())})
	}
	var many []wire.TLVEntry
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 3 * headerRefsInline {
		many = append(many, wire.TLVEntry{KeyKind: wire.HeaderRaw, Key: []byte{byte(r.IntN(256)), byte(r.IntN(4))}, ValueKind: wire.HeaderUint32, Value: []byte{byte(i), 0, 0, 0}})
	}
	str := func(key, value string) wire.TLVEntry {
		return wire.TLVEntry{KeyKind: wire.HeaderString, Key: []byte(key), ValueKind: wire.HeaderString, Value: []byte(value)}
	}
	good := headerBlock(t, str("b", "2"), str("a", "1"))
	cases := map[string][]byte{
		"none":             nil,
		"one":              headerBlock(t, str("key_1", "value 1")),
		"every value kind": headerBlock(t, everyKind...),
		"every key kind":   headerBlock(t, everyKeyKind...),
		"sizes at the bounds": headerBlock(t, wire.TLVEntry{KeyKind: wire.HeaderString, Key: bytes.Repeat([]byte{'k'}, 255), ValueKind: wire.HeaderRaw, Value: bytes.Repeat([]byte{0xff}, 255)},
			wire.TLVEntry{KeyKind: wire.HeaderRaw, Key: []byte{0}, ValueKind: wire.HeaderRaw, Value: []byte{0}}),
		"a width the kind does not have": headerBlock(t, wire.TLVEntry{KeyKind: wire.HeaderString, Key: []byte("u32"), ValueKind: wire.HeaderUint32, Value: []byte{1, 2, 3}}),
		// Byte order and base64 order differ: 0xfb is "+w==", 0x00 "AA==", '0' "MA==".
		"base64 order":          headerBlock(t, wire.TLVEntry{KeyKind: wire.HeaderRaw, Key: []byte{0}, ValueKind: wire.HeaderBool, Value: []byte{0}}, wire.TLVEntry{KeyKind: wire.HeaderRaw, Key: []byte{0xfb}, ValueKind: wire.HeaderBool, Value: []byte{1}}, str("0", "x"), str("00", "y"), str("0", "z")),
		"equal keys, stable":    headerBlock(t, str("k", "3"), str("a", "1"), str("k", "1"), str("k", "2")),
		"past the inline order": headerBlock(t, many...),
		"unknown value kind":    append(bytes.Clone(good), 2, 1, 0, 0, 0, 'c', 16, 1, 0, 0, 0, 9),
		"unknown key kind":      append(bytes.Clone(good), 255, 1, 0, 0, 0, 'c', 2, 1, 0, 0, 0, 9),
		"truncated":             good[:len(good)-1],
		"trailing byte":         append(bytes.Clone(good), 2),
		"zero length":           append(bytes.Clone(good), 2, 0, 0, 0, 0, 2, 1, 0, 0, 0, 'x'),
		"zero kind":             append(bytes.Clone(good), 0, 1, 0, 0, 0, 'c', 2, 1, 0, 0, 0, 'x'),
		"key without value":     append(bytes.Clone(good), 2, 1, 0, 0, 0, 'c'),
	}
	return cases
}

// checkSameHeaders holds appendUserHeaders to encoding/json's rendering of block.
func checkSameHeaders(t *testing.T, name string, block []byte) {
	t.Helper()
	want, err := json.Marshal(jsonview.UserHeaders(block))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := appendUserHeaders([]byte("prefix"), block, nil)
	if !bytes.Equal(got, append([]byte("prefix"), want...)) {
		t.Fatalf("%s (%x):\n%s\nwant\nprefix%s", name, block, got, want)
	}
}

func TestPolledHeadersMatchEncodingJSON(t *testing.T) {
	var ids []wire.Uint128
	var payloads, blocks [][]byte
	for name, block := range headerBlockCases(t) {
		checkSameHeaders(t, name, block)
		ids = append(ids, wire.Uint128{Lo: uint64(len(ids))})
		payloads = append(payloads, []byte(name))
		blocks = append(blocks, block)
	}
	// And in a poll's answer, one message after another sharing the order's scratch.
	checkSamePoll(t, polledOf(t, ids, payloads, blocks), 0, true)
}

// FuzzPolledHeadersMatchEncodingJSON: any block, raw or built of pairs the fuzzer
// picks (short keys, so that equal and reordered keys are common).
func FuzzPolledHeadersMatchEncodingJSON(f *testing.F) {
	for _, block := range headerBlockCases(f) {
		f.Add(block)
	}
	f.Add([]byte{2, 1, 9, 16, 3, 7, 1, 0, 0xfb, 13, 2, 8})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 8192 {
			return
		}
		checkSameHeaders(t, "raw", data)
		// Pairs of (key kind, key length, value kind, value length) and their bytes:
		// kinds 1..16 (16 has no name), a fixed-size kind's size unless the length
		// byte's high bit asks for 1..4 bytes, others 1..4 bytes.
		size := func(k wire.HeaderKind, c byte) int {
			if n := k.FixedSizeBytes(); n != 0 && c&0x80 == 0 {
				return n
			}
			return 1 + int(c%4)
		}
		var block []byte
		for len(data) >= 4 {
			kk, vk := wire.HeaderKind(1+data[0]%16), wire.HeaderKind(1+data[2]%16)
			kn, vn := size(kk, data[1]), size(vk, data[3])
			data = data[4:]
			if len(data) < kn+vn {
				break
			}
			block, _ = wire.AppendTLV(block, kk, data[:kn], vk, data[kn:kn+vn])
			data = data[kn+vn:]
		}
		checkSameHeaders(t, "built", block)
	})
}
