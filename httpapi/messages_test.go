package httpapi

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"testing"

	"github.com/iggy-shard/iggy-shard/wire"
)

// pollOf is a PolledMessages reply of n messages of size bytes each.
func pollOf(t *testing.T, n, size int) []byte {
	t.Helper()
	var bb wire.BatchBuilder
	for i := 0; i < n; i++ {
		if err := bb.Append(wire.Uint128{Lo: uint64(i + 1)}, createdAt, bytes.Repeat([]byte{'x'}, size), nil); err != nil {
			t.Fatal(err)
		}
	}
	batch, err := bb.Finish()
	if err != nil {
		t.Fatal(err)
	}
	wire.StampBatch(batch, 0, 0, createdAt)
	p := wire.PolledMessages{CurrentOffset: uint64(n - 1), MessagesCount: uint32(n), Records: batch}
	return p.Append(nil)
}

// A poll's answer is bounded by the budget counted after base64: without
// auto-commit the messages past it are left for the next poll; with auto-commit
// the server has already moved the offset past all of them, so all are answered.
func TestPollBudgetCountsBase64(t *testing.T) {
	const size = 3000 // 4000 bytes of base64 each
	budget := 2*(size*4/3+messageJSONOverheadBytes) + 100
	a, f, _ := testAPI(t, func(o *Options) { o.PollBudgetBytes = budget })
	auth := bearer(t, a, 0)
	f.on(wire.CodePollMessages, pollOf(t, 5, size), nil)
	for _, tt := range []struct {
		query string
		want  int
	}{{"?auto_commit=false", 2}, {"?auto_commit=true", 5}} {
		w := serve(a, "GET", "/streams/0/topics/0/messages"+tt.query, auth, "")
		var p polledCount
		if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil || p.Count != tt.want || len(p.Messages) != tt.want {
			t.Fatalf("%s: count %d of 5, want %d (%v)", tt.query, p.Count, tt.want, err)
		}
		if tt.want == 2 && w.Body.Len() > budget {
			t.Fatalf("%s: %d bytes answered over a budget of %d", tt.query, w.Body.Len(), budget)
		}
	}
	// One message larger than the budget is still answered: a poll always moves on.
	b, f2, _ := testAPI(t, func(o *Options) { o.PollBudgetBytes = 100 })
	f2.on(wire.CodePollMessages, pollOf(t, 3, size), nil)
	w := serve(b, "GET", "/streams/0/topics/0/messages", bearer(t, b, 0), "")
	var p polledCount
	if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil || p.Count != 1 {
		t.Fatalf("a message over the budget: count %d (%v)", p.Count, err)
	}
}

func TestUserHeadersRendering(t *testing.T) {
	render := func(block []byte) string {
		b, _ := appendUserHeaders(nil, block, nil)
		return string(b)
	}
	if got := render(nil); got != "[]" {
		t.Fatalf("no headers: %s", got)
	}
	block, _ := wire.AppendTLV(nil, wire.HeaderString, []byte("b"), wire.HeaderBool, []byte{1})
	block, _ = wire.AppendTLV(block, wire.HeaderString, []byte("a"), wire.HeaderUint8, []byte{7})
	want := `[{"key":{"kind":"string","value":"YQ=="},"value":{"kind":"uint8","value":"Bw=="}},{"key":{"kind":"string","value":"Yg=="},"value":{"kind":"bool","value":"AQ=="}}]`
	if got := render(block); got != want {
		t.Fatalf("headers sorted by key:\n%s\nwant\n%s", got, want)
	}
	broken := append(append([]byte{}, block...), 2, 0)
	if got, want := render(broken), `"`+base64.StdEncoding.EncodeToString(broken)+`"`; got != want {
		t.Fatalf("a block that does not parse is shown as base64: %s, want %s", got, want)
	}
	// The reference's order (a BTreeMap of keys: kind code, then bytes), not the
	// base64's ("+w==" would come last): a raw key before string keys before a
	// uint32 key; "a" given twice is shown once, with its last value.
	mixed := headerBlock(t,
		wire.TLVEntry{KeyKind: wire.HeaderString, Key: []byte("b"), ValueKind: wire.HeaderBool, Value: []byte{1}},
		wire.TLVEntry{KeyKind: wire.HeaderUint32, Key: []byte{1, 0, 0, 0}, ValueKind: wire.HeaderString, Value: []byte("x")},
		wire.TLVEntry{KeyKind: wire.HeaderString, Key: []byte("a"), ValueKind: wire.HeaderUint8, Value: []byte{7}},
		wire.TLVEntry{KeyKind: wire.HeaderRaw, Key: []byte{0xfb}, ValueKind: wire.HeaderBool, Value: []byte{0}},
		wire.TLVEntry{KeyKind: wire.HeaderString, Key: []byte("a"), ValueKind: wire.HeaderUint8, Value: []byte{9}})
	want = `[{"key":{"kind":"raw","value":"+w=="},"value":{"kind":"bool","value":"AA=="}},` +
		`{"key":{"kind":"string","value":"YQ=="},"value":{"kind":"uint8","value":"CQ=="}},` +
		`{"key":{"kind":"string","value":"Yg=="},"value":{"kind":"bool","value":"AQ=="}},` +
		`{"key":{"kind":"uint32","value":"AQAAAA=="},"value":{"kind":"string","value":"eA=="}}]`
	if got := render(mixed); got != want {
		t.Fatalf("headers in the reference's order:\n%s\nwant\n%s", got, want)
	}
	// A fixed-size kind of another size does not parse in the reference either.
	narrow := headerBlock(t, wire.TLVEntry{KeyKind: wire.HeaderString, Key: []byte("n"), ValueKind: wire.HeaderUint32, Value: []byte{1, 2, 3}})
	if got, want := render(narrow), `"`+base64.StdEncoding.EncodeToString(narrow)+`"`; got != want {
		t.Fatalf("a uint32 of 3 bytes: %s, want %s", got, want)
	}
}

type polledCount struct {
	Count    int               `json:"count"`
	Messages []json.RawMessage `json:"messages"`
}
