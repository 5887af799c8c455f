package wire

import (
	"bytes"
	"testing"
)

func trailingRule(t testing.TB, code CommandCode) TrailingBytes {
	t.Helper()
	for _, r := range RequestBodyRules() {
		if r.Code == code {
			return r.Trailing
		}
	}
	t.Fatalf("%v has no row in RequestBodyRules", code)
	return 0
}

// The table has one row per registry code, in code order, except the legacy logins
// whose bodies are never read.
func TestRequestBodyRulesCoverRegistry(t *testing.T) {
	rules := RequestBodyRules()
	i := 0
	for _, info := range Commands() {
		if info.Code == CodeLoginUser || info.Code == CodeLoginWithPersonalAccessToken {
			continue
		}
		if i >= len(rules) || rules[i].Code != info.Code {
			t.Fatalf("row %d: want %v next", i, info.Code)
		}
		if r := rules[i]; r.Trailing != TrailingIgnored && r.Trailing != TrailingRefused || r.Reference == "" {
			t.Errorf("%v: incomplete row %+v", info.Code, r)
		}
		i++
	}
	if i != len(rules) {
		t.Errorf("%d rows for %d codes", len(rules), i)
	}
}

// The decoders do what the table says with four bytes after a valid body (the
// Node.js SDK's DeleteTopic carries a u32 there).
func TestDecodersFollowRequestBodyRules(t *testing.T) {
	for _, tt := range goldenRequests(t) {
		body := append(bytes.Clone(readGolden(t, "requests/"+tt.file)), 0, 0, 0, 0)
		_, err := CheckRequestBody(tt.code, body)
		switch rule := trailingRule(t, tt.code); {
		case rule == TrailingIgnored && err != nil:
			t.Errorf("%s: 4 trailing bytes refused (%v), the reference ignores them", tt.file, err)
		case rule == TrailingRefused && err == nil:
			t.Errorf("%s: 4 trailing bytes accepted, the reference refuses them", tt.file)
		}
	}
	// SendMessages is decoded outside the catalog: its batch must end the body.
	var s SendMessages
	body := append(sendGoldenBody(t), 0, 0, 0, 0)
	if err := s.Decode(body); err == nil || trailingRule(t, CodeSendMessages) != TrailingRefused {
		t.Errorf("SendMessages with 4 bytes after the batch: %v, rule %v", err, trailingRule(t, CodeSendMessages))
	}
}
