package httpapi

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/iggy-shard/iggy-shard/jsonview"
	"github.com/iggy-shard/iggy-shard/wire"
)

var (
	scanStream = wire.NumericIdentifier(1)
	scanTopic  = wire.StringIdentifier([]byte("t"))
	scanNow    = time.Unix(1733400000, 0)
)

// countingIDs makes randomMessageID deterministic (1, 2, 3...) until the returned
// reset, which starts the count again; the test restores the real minting.
func countingIDs(t testing.TB) (reset func()) {
	real := randomMessageID
	var n uint64
	randomMessageID = func() wire.Uint128 { n++; return wire.Uint128{Hi: 1 << 62, Lo: n} }
	t.Cleanup(func() { randomMessageID = real })
	return func() { n = 0 }
}

// oldSend is the request as decodeSendMessages and buildSend make it.
func oldSend(raw []byte) ([]byte, error) {
	b, err := decodeSendMessages(raw)
	if err != nil {
		return nil, err
	}
	return buildSend(scanStream, scanTopic, b, scanNow)
}

// checkSameSend holds the fast way to the old decoder on raw: the same request bytes,
// or the same refusal. It reports whether the fast way took the body.
func checkSameSend(t *testing.T, reset func(), raw []byte) (fast bool) {
	t.Helper()
	reset()
	want, wantErr := oldSend(raw)
	reset()
	scanned, ok := scanSend(scanStream, scanTopic, raw, scanNow)
	if ok && (wantErr != nil || !bytes.Equal(scanned, want)) {
		t.Fatalf("the scanner took %q, which the old decoder answers %v\n%x\nwant\n%x", raw, wantErr, scanned, want)
	}
	reset()
	got, gotErr := buildSendBody(scanStream, scanTopic, raw, scanNow)
	if !bytes.Equal(got, want) || errorText(gotErr) != errorText(wantErr) {
		t.Fatalf("%q: built %x, %v\nwant %x, %v", raw, got, gotErr, want, wantErr)
	}
	return ok
}

// errorText is an answer's status and text. The old decoder names the first unknown
// top-level key its map yields, which is any of them: the name is left out.
func errorText(err error) string {
	if err == nil {
		return ""
	}
	text := err.Error()
	if i := strings.Index(text, "unknown field `"); i >= 0 && strings.HasSuffix(text, "`, expected `partitioning` or `messages`") {
		text = text[:i] + "unknown field"
	}
	var r *rejection
	if errors.As(err, &r) {
		return strconv.Itoa(r.status) + " " + text
	}
	return text
}

// The shapes the SDKs, the Web UI and curl users send are taken by the scanner and
// built as the old decoder built them; the others still get the old decoder's answer.
func TestScanSendTakesTheUsualShapes(t *testing.T) {
	reset := countingIDs(t)
	for _, tt := range []struct {
		body string
		fast bool
	}{
		{`{"partitioning":{"kind":"partition_id","value":"AQAAAA=="},"messages":[{"id":7,"payload":"aGVsbG8="},{"payload":"d29ybGQ="}]}`, true},
		{" {\n \"partitioning\" : { \"value\" : \"\" , \"kind\" : \"balanced\" } ,\r\n\t\"messages\" : [ { \"payload\" : \"eA==\" , \"id\" : 0 , \"user_headers\" : null } ] } \n", true},
		{`{"partitioning":{"kind":"messages_key","value":"a2V5"},"messages":[{"id":"0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b","payload":"eA==","user_headers":[{"key":{"kind":"string","value":"a2V5XzE="},"value":{"kind":"uint32","value":"AQAAAA=="}}]}]}`, true},
		{`{"partitioning":{"kind":"balanced","value":""},"messages":[{"id":"340282366920938463463374607431768211455","payload":"eA==","user_headers":"AgUAAABrZXlfMQIHAAAAdmFsdWUgMQ=="}]}`, true},
		{`{"partitioning":{"kind":"balanced","value":""},"messages":[{"id":18446744073709551615,"payload":"eA=="}]}`, true},
		// encoding/json's order for a map: messages first.
		{`{"messages":[{"id":1,"payload":"eA=="}],"partitioning":{"kind":"partition_id","value":"AAAAAA=="}}`, true},
		// Taken by the old decoder alone: a key twice, escapes, unknown keys in a message.
		{`{"partitioning":{"kind":"balanced","value":""},"partitioning":{"kind":"balanced","value":""},"messages":[{"payload":"eA=="}]}`, false},
		{`{"partitioning":{"kind":"balanced","value":""},"messages":[{"payload":"e\u0041=="}]}`, false},
		{`{"partitioning":{"kind":"balanced","value":""},"messages":[{"payload":"eA==","note":1}]}`, false},
		// Refused, in the old decoder's words.
		{`{"partitioning":{"kind":"balanced","value":""},"messages":[]}`, false},
		{`{"partitioning":{"kind":"balanced","value":""},"messages":[{"payload":""}]}`, false},
		{`{"partitioning":{"kind":"balanced","value":""},"messages":[{"payload":"e"}]}`, false},
		{`{"partitioning":{"kind":"balanced","value":""},"messages":[{"id":-1,"payload":"eA=="}]}`, false},
		{`{"partitioning":{"kind":"balanced","value":""},"messages":[{"id":1.5,"payload":"eA=="}]}`, false},
		{`{"partitioning":{"kind":"balanced","value":""},"messages":[{"id":18446744073709551616,"payload":"eA=="}]}`, false},
		{`{"partitioning":{"kind":"balanced","value":""},"messages":[{"id":01,"payload":"eA=="}]}`, false},
		{`{"partitioning":{"kind":"balanced","value":""},"messages":[{"id":1}]}`, false},
		{`{"partitioning":{"kind":"balanced","value":""},"messages":[{"payload":"eA==","payload":"eA=="}]}`, false},
		{`{"partitioning":{"kind":"nope","value":""},"messages":[{"payload":"eA=="}]}`, false},
		{`{"partitioning":{"kind":"balanced","value":""},"messages":[{"payload":"eA=="}],"extra":1}`, false},
		{`{"partitioning":{"kind":"balanced","value":""},"messages":[{"payload":"eA=="}]}x`, false},
		{`{"partitioning":{"kind":"balanced","value":""},"messages":[{"payload":"eA==","user_headers":[1]}]}`, false},
	} {
		if fast := checkSameSend(t, reset, []byte(tt.body)); fast != tt.fast {
			t.Errorf("%s: scanned %v, want %v", tt.body, fast, tt.fast)
		}
	}
}

// sendWithHeaders is a one-message SendMessages body whose user_headers is the
// given JSON.
func sendWithHeaders(userHeaders string) []byte {
	return []byte(`{"partitioning":{"kind":"balanced","value":""},"messages":[{"id":1,"payload":"eA==","user_headers":` + userHeaders + `}]}`)
}

// User headers in either form are taken by the scanner, whatever their kinds and
// sizes; the shapes it leaves to the old decoder are accepted or refused there, in
// its words.
func TestScanSendTakesUserHeaders(t *testing.T) {
	reset := countingIDs(t)
	// Every block a poll may answer, in the form the poll answers it (an array, or a
	// string for a block the array cannot show), is taken as sent.
	for name, block := range headerBlockCases(t) {
		rendered, err := json.Marshal(jsonview.UserHeaders(block))
		if err != nil {
			t.Fatal(err)
		}
		if !checkSameSend(t, reset, sendWithHeaders(string(rendered))) {
			t.Errorf("%s: %s left to the old decoder", name, rendered)
		}
	}
	field := func(kind, value string) string { return `{"kind":"` + kind + `","value":"` + value + `"}` }
	key := field("string", "a2V5")
	max := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{0xfe}, 255))
	over := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{0xfe}, 256))
	for _, tt := range []struct {
		headers string
		fast    bool
	}{
		{`[]`, true},
		{`""`, true},
		{`null`, true},
		{` [ { "value" : { "value" : "AQ==" , "kind" : "bool" } , "key" : ` + key + ` } ] `, true},
		{`[{"key":` + field("raw", max) + `,"value":` + field("raw", max) + `}]`, true},
		{`"` + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{1}, 1000)) + `"`, true},
		// Refused, in the old decoder's words.
		{`[{"key":` + field("raw", over) + `,"value":` + field("raw", "eA==") + `}]`, false},
		{`[{"key":` + key + `,"value":` + field("raw", over) + `}]`, false},
		{`[{"key":` + key + `,"value":` + field("string", "") + `}]`, false},
		{`[{"key":` + field("string", "") + `,"value":` + field("string", "eA==") + `}]`, false},
		{`[{"key":` + key + `,"value":` + field("uint32", "e") + `}]`, false},
		{`[{"key":` + key + `,"value":` + field("uint32", "eA=x") + `}]`, false},
		{`[{"key":` + key + `,"value":` + field("uint256", "eA==") + `}]`, false},
		{`[{"key":` + key + `,"value":` + field("String", "eA==") + `}]`, false},
		{`[{"key":` + key + `}]`, false},
		{`[{"key":` + key + `,"value":null}]`, false},
		{`[{"key":` + key + `,"value":{"kind":"string"}}]`, false},
		{`[{"key":` + key + `,"value":{"value":"eA=="}}]`, false},
		{`[{"key":` + key + `,"value":` + field("string", "eA==") + `},null]`, false},
		{`[{"key":` + key + `,"value":` + field("string", "eA==") + `},]`, false},
		{`[{"key":` + key + `,"value":` + field("string", "eA==") + `}`, false},
		{`{"a2V5":` + field("string", "eA==") + `}`, false},
		{`{"key":` + key + `,"value":` + field("string", "eA==") + `}`, false},
		{`"eA=x"`, false},
		{`"e"`, false},
		{`7`, false},
		{`true`, false},
		// Taken by the old decoder alone: a key twice (the last wins), unknown or
		// differently cased keys, escapes, line breaks in base64.
		{`[{"key":` + key + `,"key":` + key + `,"value":` + field("string", "eA==") + `}]`, false},
		{`[{"key":` + key + `,"value":{"kind":"raw","kind":"string","value":"eA=="}}]`, false},
		{`[{"key":` + key + `,"value":` + field("string", "eA==") + `,"note":1}]`, false},
		{`[{"Key":` + key + `,"value":` + field("string", "eA==") + `}]`, false},
		{`[{"key":` + key + `,"value":{"kind":"str\u0069ng","value":"eA=="}}]`, false},
		{`[{"key":` + key + `,"value":{"kind":"string","value":"eA\u003d="}}]`, false},
		{`"AgUA\nAABrZXlfMQIHAAAAdmFsdWUgMQ=="`, false},
	} {
		if fast := checkSameSend(t, reset, sendWithHeaders(tt.headers)); fast != tt.fast {
			t.Errorf("%s: scanned %v, want %v", tt.headers, fast, tt.fast)
		}
	}
}

// FuzzScanSendMatchesDecoderHeaders: FuzzScanSendMatchesDecoder on bodies whose
// fuzzed part is one message's user_headers, so that the fuzzer works on the
// headers' JSON rather than on the body around it.
func FuzzScanSendMatchesDecoderHeaders(f *testing.F) {
	for _, block := range headerBlockCases(f) {
		rendered, err := json.Marshal(jsonview.UserHeaders(block))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(rendered))
	}
	for _, s := range []string{`[]`, `""`, `null`, `[{"key":{"kind":"string","value":"YQ=="},"value":{"kind":"uint8","value":""}}]`,
		`{"YQ==":{"kind":"uint8","value":"Bw=="}}`, `[{"value":{"value":"AQ==","kind":"bool"},"key":{"kind":"raw","value":"YQ=="}}]`} {
		f.Add(s)
	}
	reset := countingIDs(f)
	f.Fuzz(func(t *testing.T, userHeaders string) {
		checkSameSend(t, reset, sendWithHeaders(userHeaders))
	})
}

// FuzzScanSendMatchesDecoder: whatever the body, the scanner builds what the old
// decoder (encoding/json into sendMessagesBody) builds, or leaves the body to it.
func FuzzScanSendMatchesDecoder(f *testing.F) {
	for _, s := range []string{
		`{"partitioning":{"kind":"partition_id","value":"AAAAAA=="},"messages":[{"id":0,"payload":"aGVsbG8="}]}`,
		`{"partitioning":{"kind":"balanced","value":""},"messages":[{"id":"0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b","payload":"d29ybGQ=","user_headers":[{"key":{"kind":"string","value":"a2V5XzE="},"value":{"kind":"uint32","value":"AQAAAA=="}}]}]}`,
		`{"partitioning":{"kind":"messages_key","value":"a2V5"},"messages":[{"id":"340282366920938463463374607431768211455","payload":"eA==","user_headers":"AgUAAABrZXlfMQIHAAAAdmFsdWUgMQ=="}]}`,
		`{"partitioning":{"kind":"balanced","value":""},"messages":[{"id":12,"payload":"eA==","user_headers":null},{"payload":"eWVz"}]}`,
		`{"partitioning":{"kind":"balanced","value":""},"messages":[{"id":1e3,"payload":"eA=="}]}`,
		`{"partitioning":{"kind":"balanced","value":""},"messages":[{"payload":"eA==","user_headers":[{"key":{"kind":"string","value":"YQ=="},"value":{"kind":"raw","value":"Yg=="}}],"id":"42"}]}`,
		`{"partitioning":{"kind":"balanced","value":""},"messages":[]}`,
		`{"messages":[{"payload":"eA=="}]}`,
		`[]`, `null`, `{"partitioning":null,"messages":null}`,
	} {
		f.Add([]byte(s))
	}
	reset := countingIDs(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		checkSameSend(t, reset, body)
	})
}

// sendJSON is a SendMessages body of n messages of size-byte payloads, numbered ids.
func sendJSON(n, size int) []byte { return sendJSONWithHeaders(n, size, nil) }

// sendJSONWithHeaders is sendJSON with each message's user headers (a block) in
// the array form, as the SDKs send them.
func sendJSONWithHeaders(n, size int, headers []byte) []byte {
	payload := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{'x'}, size))
	var entries string
	if len(headers) > 0 {
		rendered, err := json.Marshal(jsonview.UserHeaders(headers))
		if err != nil {
			panic(err)
		}
		entries = `,"user_headers":` + string(rendered)
	}
	var b strings.Builder
	b.WriteString(`{"partitioning":{"kind":"partition_id","value":"AQAAAA=="},"messages":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"id":` + strconv.Itoa(i+1) + `,"payload":"` + payload + `"` + entries + `}`)
	}
	b.WriteString(`]}`)
	return []byte(b.String())
}

// A send's allocations do not grow with its messages: the body it builds, the
// partitioning, and the payloads' and headers' scratch when the pool has none.
func TestScanSendAllocationsPerMessage(t *testing.T) {
	const most = 8
	for _, headers := range [][]byte{nil, benchUserHeaders(t)} {
		var allocs [2]float64
		for i, n := range []int{1, 1000} {
			raw := sendJSONWithHeaders(n, 1000, headers)
			allocs[i] = testing.AllocsPerRun(20, func() {
				if _, ok := scanSend(scanStream, scanTopic, raw, scanNow); !ok {
					t.Fatal("not scanned")
				}
			})
		}
		// Compared with a bound, not with each other: the race detector's sync.Pool
		// drops a scratch now and then.
		if allocs[0] > most || allocs[1] > most {
			t.Fatalf("%d bytes of headers: %.1f allocations for a send of 1 message, %.1f for 1000: want at most %d whatever the count",
				len(headers), allocs[0], allocs[1], most)
		}
	}
}

// idFromText reads what messageID.UnmarshalJSON reads, the same way.
func TestIDFromTextMatchesUnmarshalJSON(t *testing.T) {
	for _, text := range []string{"0", "007", "18446744073709551616", "340282366920938463463374607431768211455",
		"340282366920938463463374607431768211456", "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b", "0190A1B2C3D47E5F8A9B0C1D2E3F4A5B",
		"--0190a1b2c3d47e5f8a9b0c1d2e3f4a5b--", "12345678901234567890123456789012", "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5", "+1", "-1", "", "1_0", "g"} {
		var want messageID
		wantErr := want.UnmarshalJSON([]byte(strconv.Quote(text)))
		got, ok := idFromText([]byte(text))
		if ok && (wantErr != nil || got != want.v) {
			t.Errorf("%q: read %#x:%#x, UnmarshalJSON %#x:%#x, %v", text, got.Hi, got.Lo, want.v.Hi, want.v.Lo, wantErr)
		}
		if !ok && wantErr == nil && strings.Trim(text, "0123456789abcdefABCDEF-") == "" {
			t.Errorf("%q: left to UnmarshalJSON, which reads it", text)
		}
	}
}

// FuzzIDFromTextMatchesUnmarshalJSON: any text idFromText reads, UnmarshalJSON
// reads the same.
func FuzzIDFromTextMatchesUnmarshalJSON(f *testing.F) {
	f.Add("0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b")
	f.Add("340282366920938463463374607431768211455")
	f.Fuzz(func(t *testing.T, text string) {
		got, ok := idFromText([]byte(text))
		if !ok {
			return
		}
		var want messageID
		if err := want.UnmarshalJSON([]byte(strconv.Quote(text))); err != nil || got != want.v {
			t.Fatalf("%q: read %#x:%#x, UnmarshalJSON %#x:%#x, %v", text, got.Hi, got.Lo, want.v.Hi, want.v.Lo, err)
		}
	})
}

// decodeBase64To reads what encoding/base64 reads, the same way, and takes the
// canonical text the SDKs send.
func FuzzDecodeBase64To(f *testing.F) {
	for _, s := range []string{"", "eA==", "eB==", "eHk=", "eHp=", "eHl6", "aGVsbG8gd29ybGQ=", "e===", "eA=x", "eA==eA==", "e\nA=="} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		want := make([]byte, base64.StdEncoding.DecodedLen(len(src)))
		wantN, wantErr := base64.StdEncoding.Decode(want, src)
		got := make([]byte, base64.StdEncoding.DecodedLen(len(src)))
		n, ok := decodeBase64To(got, src)
		if ok && (wantErr != nil || !bytes.Equal(got[:n], want[:wantN])) {
			t.Fatalf("%q: read %x, encoding/base64 %x, %v", src, got[:n], want[:wantN], wantErr)
		}
		if canonical := base64.StdEncoding.EncodeToString(want[:wantN]); wantErr == nil && string(src) == canonical && len(src) > 0 && !ok {
			t.Fatalf("%q: canonical, left to encoding/base64", src)
		}
	})
}
