package httpapi

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"math"
	"net/http/httptest"
	"testing"

	"github.com/iggy-shard/iggy-shard/wire"
)

// polledOf is a decoded poll reply of messages with the given ids, payloads and
// user header blocks (one each, by index).
func polledOf(t testing.TB, ids []wire.Uint128, payloads, headers [][]byte) *wire.PolledMessages {
	t.Helper()
	var bb wire.BatchBuilder
	for i := range ids {
		if err := bb.Append(ids[i], createdAt+uint64(i), payloads[i], headers[i]); err != nil {
			t.Fatal(err)
		}
	}
	batch, err := bb.Finish()
	if err != nil {
		t.Fatal(err)
	}
	wire.StampBatch(batch, 3, 100, createdAt+10)
	body := (&wire.PolledMessages{PartitionID: 3, CurrentOffset: 100 + uint64(len(ids)), MessagesCount: uint32(len(ids)), Records: batch}).Append(nil)
	var p wire.PolledMessages
	if err := p.Decode(body); err != nil {
		t.Fatal(err)
	}
	return &p
}

// checkSamePoll holds writePolled's answer to encoding/json's of the old structs.
func checkSamePoll(t *testing.T, p *wire.PolledMessages, budgetBytes int, truncate bool) {
	t.Helper()
	want, err := json.Marshal(renderPolled(p, budgetBytes, truncate))
	if err != nil {
		t.Fatal(err)
	}
	w := httptest.NewRecorder()
	writePolled(w, p, budgetBytes, truncate)
	if got := w.Body.Bytes(); !bytes.Equal(got, want) {
		t.Fatalf("budget %d truncate %v:\n%s\nwant\n%s", budgetBytes, truncate, got, want)
	}
	if w.Code != 200 || w.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("answered %d %q", w.Code, w.Header().Get("Content-Type"))
	}
}

func TestPolledReplyMatchesEncodingJSON(t *testing.T) {
	good, err := wire.AppendTLV(nil, wire.HeaderString, []byte("b"), wire.HeaderBool, []byte{1})
	if err != nil {
		t.Fatal(err)
	}
	good, _ = wire.AppendTLV(good, wire.HeaderString, []byte("a"), wire.HeaderUint8, []byte{7})
	broken := append(append([]byte{}, good...), 2, 0)
	ids := []wire.Uint128{{}, {Lo: 1}, {Lo: math.MaxUint64}, {Hi: 1}, {Hi: 1, Lo: 5}, {Hi: math.MaxUint64, Lo: math.MaxUint64}, {Hi: 0x0190a1b2c3d47e5f, Lo: 0x8a9b0c1d2e3f4a5b}}
	var payloads, headers [][]byte
	for i := range ids {
		payloads = append(payloads, bytes.Repeat([]byte{byte(i), 0xff, '<', '&'}, i+1))
		headers = append(headers, [][]byte{nil, good, broken}[i%3])
	}
	p := polledOf(t, ids, payloads, headers)
	for _, budget := range []int{0, 1, 1000, 1500, 1 << 20} {
		checkSamePoll(t, p, budget, true)
		checkSamePoll(t, p, budget, false)
	}
	checkSamePoll(t, &wire.PolledMessages{PartitionID: 1, CurrentOffset: 9}, 0, true)
	// An answer of several pollFlushBytes, written a buffer at a time.
	ids, payloads, headers = nil, nil, nil
	for i := range 300 {
		ids = append(ids, wire.Uint128{Hi: uint64(i), Lo: uint64(i)})
		payloads = append(payloads, bytes.Repeat([]byte{byte(i)}, 1000+i))
		headers = append(headers, [][]byte{nil, nil, good}[i%3])
	}
	p = polledOf(t, ids, payloads, headers)
	checkSamePoll(t, p, 0, true)
	checkSamePoll(t, p, 3*pollFlushBytes/2, true)
}

// FuzzPolledReplyMatchesEncodingJSON: any ids, payloads, headers and budget.
func FuzzPolledReplyMatchesEncodingJSON(f *testing.F) {
	f.Add(uint64(0), uint64(1), []byte("hello"), []byte{}, uint8(2), 0, true)
	f.Add(uint64(1), uint64(0), []byte{0xff, 0}, []byte{2, 1, 0, 0, 0, 'a', 9, 1, 0, 0, 0, 7}, uint8(3), 900, true)
	f.Fuzz(func(t *testing.T, hi, lo uint64, payload, headers []byte, n uint8, budget int, truncate bool) {
		if len(payload) == 0 || len(payload) > 4096 || len(headers) > 1024 || n == 0 || n > 8 {
			return
		}
		var ids []wire.Uint128
		var payloads, blocks [][]byte
		for i := range int(n) {
			ids = append(ids, wire.Uint128{Hi: hi * uint64(i), Lo: lo + uint64(i)})
			payloads = append(payloads, payload[:1+i%len(payload)])
			blocks = append(blocks, [][]byte{nil, headers}[i%2])
		}
		checkSamePoll(t, polledOf(t, ids, payloads, blocks), max(budget, 0), truncate)
	})
}

// A poll's answer is written without an allocation per message: into the pooled
// buffer, straight from the wire reply, user headers and their order included. A
// message of more entries than the order's stack array grows a scratch (twice for
// 96 entries) once for the whole answer.
func TestPolledReplyAllocationsPerMessage(t *testing.T) {
	cases := headerBlockCases(t)
	for _, tt := range []struct {
		name  string
		block []byte
		most  float64
	}{
		{"no headers", nil, 0},
		{"three headers out of order", benchUserHeaders(t), 0},
		{"every value kind", cases["every value kind"], 0},
		{"headers shown as base64", cases["truncated"], 0},
		{"more entries than the stack array", cases["past the inline order"], 2},
	} {
		var allocs [2]float64
		for i, n := range []int{1, 1000} {
			ids := make([]wire.Uint128, n)
			payloads, headers := make([][]byte, n), make([][]byte, n)
			for j := range ids {
				ids[j] = wire.Uint128{Hi: uint64(j), Lo: uint64(j)}
				payloads[j] = bytes.Repeat([]byte{'x'}, 1000)
				headers[j] = tt.block
			}
			p := polledOf(t, ids, payloads, headers)
			buf := make([]byte, 0, 4<<20)
			allocs[i] = testing.AllocsPerRun(20, func() { buf = appendPolled(buf[:0], p, 0, true) })
		}
		if allocs[0] > tt.most || allocs[1] > tt.most {
			t.Errorf("%s: %.1f allocations answering 1 message, %.1f answering 1000: want at most %.0f", tt.name, allocs[0], allocs[1], tt.most)
		}
	}
}

// appendBase64 writes what encoding/base64 writes, after what b holds.
func FuzzAppendBase64(f *testing.F) {
	for _, s := range []string{"", "x", "xy", "xyz", "\xff\xfe\xfd\x00", "hello, world"} {
		f.Add([]byte("prefix"), []byte(s))
	}
	f.Fuzz(func(t *testing.T, prefix, src []byte) {
		want := base64.StdEncoding.AppendEncode(append([]byte{}, prefix...), src)
		if got := appendBase64(append([]byte{}, prefix...), src); !bytes.Equal(got, want) {
			t.Fatalf("%x: %s, want %s", src, got, want)
		}
		if got := appendBase64(append(make([]byte, 0, len(want)), prefix...), src); !bytes.Equal(got, want) {
			t.Fatalf("%x with room: %s, want %s", src, got, want)
		}
	})
}
