package httpapi

import (
	"bytes"
	"encoding/base64"
	"testing"

	"github.com/iggy-shard/iggy-shard/wire"
)

// User headers sent as an array are stored as the reference's BTreeMap encodes them:
// ordered by key kind, then key bytes, a key given twice once with its last value;
// a base64 string is stored as given. Both ways of reading a send build that block.
func TestSendStoresArrayHeadersInTheReferenceOrder(t *testing.T) {
	reset := countingIDs(t)
	type header struct {
		keyKind   wire.HeaderKind
		key       string
		valueKind wire.HeaderKind
		value     string
	}
	field := func(k wire.HeaderKind, v string) string {
		return `{"kind":"` + k.String() + `","value":"` + base64.StdEncoding.EncodeToString([]byte(v)) + `"}`
	}
	array := func(hs ...header) string {
		s := "["
		for i, h := range hs {
			if i > 0 {
				s += ","
			}
			s += `{"key":` + field(h.keyKind, h.key) + `,"value":` + field(h.valueKind, h.value) + `}`
		}
		return s + "]"
	}
	block := func(hs ...header) []byte {
		var b []byte
		for _, h := range hs {
			var err error
			if b, err = wire.AppendTLV(b, h.keyKind, []byte(h.key), h.valueKind, []byte(h.value)); err != nil {
				t.Fatal(err)
			}
		}
		return b
	}
	zeta := header{wire.HeaderString, "zeta", wire.HeaderString, "z"}
	alpha := header{wire.HeaderString, "alpha", wire.HeaderUint64, "\x01\x00\x00\x00\x00\x00\x00\x00"}
	alphaAgain := header{wire.HeaderString, "alpha", wire.HeaderString, "last"}
	flag := header{wire.HeaderBool, "\x01", wire.HeaderBool, "\x00"}
	seven := header{wire.HeaderUint64, "\x07\x00\x00\x00\x00\x00\x00\x00", wire.HeaderString, "u64 key"}
	raw := header{wire.HeaderRaw, "\xff", wire.HeaderString, "raw key"}
	for _, tt := range []struct {
		name        string
		userHeaders string
		want        []byte
	}{
		{"ordered already", array(alpha, zeta, flag), block(alpha, zeta, flag)},
		{"by key kind, then key bytes", array(seven, zeta, flag, alpha, raw), block(raw, alpha, zeta, flag, seven)},
		{"a key twice: its last value", array(alpha, zeta, alphaAgain), block(alphaAgain, zeta)},
		{"a key twice in a row", array(zeta, alpha, alphaAgain), block(alphaAgain, zeta)},
		{"a string: as given", `"` + base64.StdEncoding.EncodeToString(block(zeta, alpha, zeta)) + `"`, block(zeta, alpha, zeta)},
	} {
		raw := sendWithHeaders(tt.userHeaders)
		checkSameSend(t, reset, raw) // the scanner and the old decoder agree
		reset()
		req, err := buildSendBody(scanStream, scanTopic, raw, scanNow)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		// The message's payload "x" is followed by its headers block, which ends the
		// request.
		if !bytes.HasSuffix(req, append([]byte("x"), tt.want...)) {
			t.Errorf("%s: request ends %x, want the block %x", tt.name, req[max(0, len(req)-len(tt.want)-1):], tt.want)
		}
	}
}
