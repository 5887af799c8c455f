package wire

import (
	"errors"
	"testing"
)

func TestGetSnapshotRules(t *testing.T) {
	tests := []struct {
		name    string
		body    []byte
		wantErr bool
	}{
		{name: "no types", body: []byte{1, 0}},
		{name: "all alone", body: []byte{6, 1, 100}},
		{name: "every section", body: []byte{1, 6, 1, 2, 3, 4, 5, 6}},
		{name: "all with another", body: []byte{1, 2, 100, 1}, wantErr: true},
		{name: "unknown type", body: []byte{1, 1, 7}, wantErr: true},
		{name: "type 0", body: []byte{1, 1, 0}, wantErr: true},
		{name: "compression 0", body: []byte{0, 1, 1}, wantErr: true},
		{name: "compression 7", body: []byte{7, 1, 1}, wantErr: true},
		{name: "count past body", body: []byte{1, 3, 1, 2}, wantErr: true},
		{name: "trailing ignored", body: []byte{1, 1, 1, 1}},
		{name: "empty", body: nil, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r GetSnapshot
			err := r.Decode(tt.body)
			if tt.wantErr != (err != nil) || (err != nil && !errors.Is(err, ErrInvalidCommand)) {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
		})
	}
	r := GetSnapshot{Compression: SnapshotZstd, Types: []byte{3, 100}}
	if _, err := r.Append(nil); !errors.Is(err, ErrInvalidCommand) {
		t.Fatalf("Append all+other: %v", err)
	}
	r = GetSnapshot{Compression: SnapshotZstd, Types: make([]byte, 256)}
	if _, err := r.Append(nil); !errors.Is(err, ErrInvalidCommand) {
		t.Fatalf("Append 256 types: %v", err)
	}
	r = GetSnapshot{Compression: SnapshotStored, Types: []byte{5}}
	if r.Type(0) != SnapshotServerLogs || r.Type(0).String() != "server_logs" || SnapshotAll.String() != "all" ||
		SnapshotType(9).String() != "SnapshotType(9)" || SnapshotXz.String() != "xz" {
		t.Fatal("snapshot names")
	}
}

func TestDescribeOptionsScope(t *testing.T) {
	for scope := 0; scope < 256; scope++ {
		var r DescribeOptions
		err := r.Decode([]byte{byte(scope)})
		if valid := scope >= 1 && scope <= 3; valid != (err == nil) {
			t.Fatalf("scope %d: err = %v", scope, err)
		}
		if _, aerr := (&DescribeOptions{Scope: OptionsScope(scope)}).Append(nil); (aerr == nil) != (err == nil) {
			t.Fatalf("scope %d: Append err = %v", scope, aerr)
		}
	}
	if OptionsScopeUser.String() != "user" || OptionsScope(0).String() != "OptionsScope(0)" {
		t.Fatal("scope names")
	}
}

func TestEmptyBodies(t *testing.T) {
	if err := DecodeEmptyBody(nil); err != nil {
		t.Fatal(err)
	}
	if err := DecodeEmptyBody([]byte{}); err != nil {
		t.Fatal(err)
	}
	// The reference reads nothing from these bodies, so bytes in them are ignored.
	if err := DecodeEmptyBody([]byte{0, 0, 0, 0}); err != nil {
		t.Fatalf("four bytes: %v", err)
	}
	var r GetClient
	if err := r.Decode([]byte{1, 2, 3}); !errors.Is(err, ErrInvalidCommand) {
		t.Fatalf("short GetClient: %v", err)
	}
}
