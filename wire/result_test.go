package wire

import (
	"bytes"
	"errors"
	"testing"
)

func TestResultGolden(t *testing.T) {
	success := append(AppendResultSuccess(nil), 0xab, 0xcd)
	checkGolden(t, "requests/result_success.hex", success)
	rejection := AppendResultRejection(nil, ErrStreamNameAlreadyExists)
	checkGolden(t, "requests/result_rejection.hex", rejection)
	if len(rejection) != ResultRejectionBytes {
		t.Fatalf("rejection is %d bytes", len(rejection))
	}

	payload, result, err := SplitResult(readGolden(t, "requests/result_success.hex"))
	if err != nil || result != 0 || !bytes.Equal(payload, []byte{0xab, 0xcd}) {
		t.Fatalf("success: % x, %v, %v", payload, result, err)
	}
	payload, result, err = SplitResult(readGolden(t, "requests/result_rejection.hex"))
	if err != nil || result != ErrStreamNameAlreadyExists || len(payload) != 0 {
		t.Fatalf("rejection: % x, %v, %v", payload, result, err)
	}
}

func TestSplitResultMalformed(t *testing.T) {
	tests := []struct {
		name string
		body []byte
	}{
		{"empty", nil},
		{"short count", []byte{0, 0, 0}},
		{"count 1, no entry", []byte{1, 0, 0, 0}},
		{"count 1, half entry", []byte{1, 0, 0, 0, 0, 0, 0, 0}},
		{"count 2, one entry", []byte{2, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0}},
		{"count near 4G", []byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 3, 0, 0, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, _, err := SplitResult(tt.body); !errors.Is(err, ErrInvalidCommand) {
				t.Fatalf("err = %v", err)
			}
		})
	}
	// Two entries: the first result wins and the payload follows both.
	body := []byte{2, 0, 0, 0, 0, 0, 0, 0, 20, 0, 0, 0, 1, 0, 0, 0, 41, 0, 0, 0, 9}
	payload, result, err := SplitResult(body)
	if err != nil || result != ErrResourceNotFound || !bytes.Equal(payload, []byte{9}) {
		t.Fatalf("two entries: % x, %v, %v", payload, result, err)
	}
}

func FuzzSplitResult(f *testing.F) {
	f.Add(readGolden(f, "requests/result_success.hex"))
	f.Add(readGolden(f, "requests/result_rejection.hex"))
	f.Fuzz(func(t *testing.T, body []byte) {
		payload, result, err := SplitResult(body)
		if err != nil {
			return
		}
		if len(payload) > len(body)-ResultSuccessBytes {
			t.Fatalf("payload %d bytes from a %d-byte body", len(payload), len(body))
		}
		if body[0]|body[1]|body[2]|body[3] == 0 && (result != 0 || !bytes.Equal(payload, body[4:])) {
			t.Fatalf("count 0 read as %v", result)
		}
	})
}
